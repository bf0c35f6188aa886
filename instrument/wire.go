package instrument

import "fmt"

// FormatVersion is the trace format version this package writes; it reads
// every version from MinFormatVersion on. Version 2 added the backward
// pass's record kinds (bwd_pre, bwd_step, bwd_dq; the naive backward's bwd_dp,
// bwd_ds, bwd_kv) and changed nothing else,
// so a version-1 trace (every recording made before) reads as it always did.
// Version 3 added the warp roles' records (kind role, FlagRoles) and named
// two of the record header's pads, role and event, which every other kind
// still leaves zero: a version-1 or version-2 trace reads as before.
// Version 4 named the header's last six bytes of padding: nq, the run's
// query rows (the last nq positions of its n: a prefill's chunk, a decode
// step's tokens), and kv_heads, the heads of K and V, each serving
// heads/kv_heads query heads. The inputs record's Q has nq rows. A trace of
// versions 1 to 3 has nq = n and kv_heads = heads, and reads as before.
// Version 5 added split-KV's record kinds (split_end, merge): a decode
// rung that cuts the keys across blocks and merges their partials.
const (
	FormatVersion    = 5
	MinFormatVersion = 1
)

// Magic opens every trace.
var Magic = [4]byte{'F', 'S', 'T', 'R'}

// NoTile is the wire value of a tile index a record does not have (the kv-tile
// of an epilogue, say).
const NoTile = 0xFFFFFFFF

// headerWire is the fixed part of a trace header, exactly as it lies on the
// wire. Fields named Pad are zero. Its layout is the ABI: the generated C and
// JS definitions are derived from this struct by reflection.
type headerWire struct {
	Magic        [4]byte  `abi:"magic"`
	Version      uint16   `abi:"version"`
	HeaderBytes  uint16   `abi:"header_bytes"` // this struct, the label and its padding
	Variant      uint8    `abi:"variant"`
	DType        uint8    `abi:"dtype"`
	Source       uint8    `abi:"source"`
	Flags        uint8    `abi:"flags"` // FlagCausal, FlagTiming
	Pattern      uint8    `abi:"pattern"`
	Pad0         [3]uint8 `abi:"pad0"`
	N            uint32   `abi:"n"`  // sequence length
	D            uint32   `abi:"d"`  // head dimension
	Br           uint32   `abi:"br"` // rows of a q-tile
	Bc           uint32   `abi:"bc"` // columns of a kv-tile
	Batch        uint32   `abi:"batch"`
	Heads        uint32   `abi:"heads"`
	TraceBH0     uint32   `abi:"trace_bh0"` // traced batch-heads: [TraceBH0, TraceBH1)
	TraceBH1     uint32   `abi:"trace_bh1"`
	TraceQ0      uint32   `abi:"trace_q0"` // traced q-tiles: [TraceQ0, TraceQ1)
	TraceQ1      uint32   `abi:"trace_q1"`
	Seed         uint64   `abi:"seed"`
	Scale        float32  `abi:"scale"`         // softmax scale applied to QKᵀ, 1/√d
	NumSMs       uint32   `abi:"num_sms"`       // GPU runs: size of the SM axis (%nsmid); 0 otherwise
	TimerTickNs  float32  `abi:"timer_tick_ns"` // GPU runs: measured %globaltimer resolution; 0 otherwise
	Records      uint32   `abi:"records"`       // records that follow the header
	RecordedUnix int64    `abi:"recorded_unix"` // recordings: when it was made; 0 for live runs
	LabelBytes   uint16   `abi:"label_bytes"`
	KVHeads      uint16   `abi:"kv_heads"` // version 4: heads of K and V; earlier versions 0 (= heads)
	NQ           uint32   `abi:"nq"`       // version 4: query rows; earlier versions 0 (= n)
}

// Header flags.
const (
	FlagCausal = 1 // a causally masked run
	FlagTiming = 2 // timing records only, for every block of the grid
	// FlagRoles: a timing trace that also holds the role records of a
	// warp-specialised kernel (format version 3).
	FlagRoles = 4
)

// The trace modes a traced kernel is launched in (its last argument).
const (
	ModeFull   = 0 // every record of the traced selection, with its arrays
	ModeTiming = 1 // a timing record per step of every block
	ModeRoles  = 2 // timing mode plus the role records of every block
)

// recordHeaderWire opens every record. Kernels fill it in place on the GPU.
type recordHeaderWire struct {
	Kind         uint8  `abi:"kind"`
	Role         uint8  `abi:"role"`          // role records: the warp role (Role); 0 in every other kind
	RowsValid    uint16 `abi:"rows_valid"`    // rows of the q-tile that are data, not padding
	ColsValid    uint16 `abi:"cols_valid"`    // columns of the kv-tile that are data
	Event        uint16 `abi:"event"`         // role records: what the span was (Event); 0 in every other kind
	BH           uint32 `abi:"bh"`            // batch-head: batch·Heads + head
	I            uint32 `abi:"i"`             // q-tile index, or NoTile
	J            uint32 `abi:"j"`             // kv-tile index, or NoTile
	SM           uint32 `abi:"sm"`            // GPU: %smid of the block that ran the step
	BytesRead    uint64 `abi:"bytes_read"`    // device-memory bytes this step loaded
	BytesWritten uint64 `abi:"bytes_written"` // device-memory bytes this step stored
	TStart       uint64 `abi:"t_start"`       // GPU: %globaltimer at the step's start, in ns
	TEnd         uint64 `abi:"t_end"`         // GPU: %globaltimer at the step's end
}

const (
	headerWireBytes       = 96
	recordHeaderWireBytes = 56
)

// Kind says what a record holds.
type Kind uint8

const (
	KindInputs    Kind = 1
	KindFlashStep Kind = 2
	KindScores    Kind = 3
	KindSoftmax   Kind = 4
	KindPV        Kind = 5
	KindEpilogue  Kind = 6
	KindTiming    Kind = 7
	// The backward pass (format version 2).
	KindBwdPre  Kind = 8
	KindBwdStep Kind = 9
	KindBwdDQ   Kind = 10
	// The naive backward's, which reads the forward's P back.
	KindBwdDP Kind = 11
	KindBwdDS Kind = 12
	KindBwdKV Kind = 13
	// A span of one warp role of a warp-specialised block (format version
	// 3): its times only, no arrays.
	KindRole Kind = 14
	// Split-KV decoding (format version 5): a split's partial and the
	// merge of the splits, one record a split.
	KindSplitEnd Kind = 15
	KindMerge    Kind = 16
)

// Dim is a symbolic dimension of a record array; the header gives its value.
type Dim uint8

const (
	DimBr Dim = iota + 1
	DimBc
	DimD
	DimN
	DimNq // the query rows, N unless the run's queries are fewer (format version 4)
)

func (d Dim) String() string {
	switch d {
	case DimBr:
		return "Br"
	case DimBc:
		return "Bc"
	case DimD:
		return "D"
	case DimN:
		return "N"
	case DimNq:
		return "Nq"
	}
	return fmt.Sprintf("Dim(%d)", uint8(d))
}

// ArraySpec is one float32 array of a record: its name on the wire (C and JS
// use it) and its shape, a product of header dimensions.
type ArraySpec struct {
	Name  string
	Shape []Dim
	field func(*Record) *[]float32
}

// KindSpec describes one record kind: its arrays in wire order and whether it
// carries a q-tile and a kv-tile index.
type KindSpec struct {
	Kind Kind
	Name string
	HasI bool
	HasJ bool
	// OptionalJ: the kv-tile may also be NoTile (a timing record stands for
	// any step, an epilogue's included).
	OptionalJ bool
	// SplitJ: J is a split of the kv-tiles (split-KV's; fewer than the
	// kv-tiles), not a kv-tile, and the record has no columns.
	SplitJ  bool
	Arrays  []ArraySpec
	Summary string
	// Since is the format version that introduced the kind (0 reads as 1):
	// a trace of an older version holding one is malformed.
	Since uint16
}

// Kinds is the definition of every record kind.
var Kinds = []KindSpec{
	{Kind: KindInputs, Name: "inputs", Summary: "Q, K, V of one batch-head", Arrays: []ArraySpec{
		{"q", []Dim{DimNq, DimD}, func(r *Record) *[]float32 { return &r.Q }},
		{"k", []Dim{DimN, DimD}, func(r *Record) *[]float32 { return &r.K }},
		{"v", []Dim{DimN, DimD}, func(r *Record) *[]float32 { return &r.V }},
	}},
	{Kind: KindFlashStep, Name: "flash_step", HasI: true, HasJ: true, Summary: "one FlashAttention tile step", Arrays: []ArraySpec{
		{"m_old", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.MOld }},
		{"m_new", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.MNew }},
		{"alpha", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.Alpha }},
		{"l", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.L }},
		{"s", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.S }},
		{"p", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.P }},
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
	}},
	{Kind: KindScores, Name: "scores", HasI: true, HasJ: true, Summary: "naive: S tile written to device memory", Arrays: []ArraySpec{
		{"s", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.S }},
	}},
	{Kind: KindSoftmax, Name: "softmax", HasI: true, Summary: "naive: full-row max and sum of a q-tile", Arrays: []ArraySpec{
		{"m", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.MNew }},
		{"l", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.L }},
	}},
	{Kind: KindPV, Name: "pv", HasI: true, HasJ: true, Summary: "naive: P tile times V tile into O", Arrays: []ArraySpec{
		{"p", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.P }},
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
	}},
	{Kind: KindEpilogue, Name: "epilogue", HasI: true, Summary: "end of a q-tile: normalised O and log-sum-exp", Arrays: []ArraySpec{
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
		{"lse", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.LSE }},
	}},
	{Kind: KindTiming, Name: "timing", HasI: true, HasJ: true, OptionalJ: true, Summary: "SM and timestamps of a step, no arrays"},
	{Kind: KindBwdPre, Name: "bwd_pre", HasI: true, Since: 2, Summary: "backward: a q-tile's dO, O and L read, D = rowsum(dO∘O) written", Arrays: []ArraySpec{
		{"do", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.DO }},
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
		{"lse", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.LSE }},
		{"delta", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.Delta }},
	}},
	{Kind: KindBwdStep, Name: "bwd_step", HasI: true, HasJ: true, Since: 2, Summary: "backward: kv-tile j's block at q-tile i", Arrays: []ArraySpec{
		{"s", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.S }},
		{"p", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.P }},
		{"dp", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.DP }},
		{"ds", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.DS }},
		{"dv", []Dim{DimBc, DimD}, func(r *Record) *[]float32 { return &r.DV }},
		{"dk", []Dim{DimBc, DimD}, func(r *Record) *[]float32 { return &r.DK }},
		{"dq", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.DQ }},
	}},
	{Kind: KindBwdDQ, Name: "bwd_dq", HasI: true, Since: 2, Summary: "backward: a q-tile's finished dQ", Arrays: []ArraySpec{
		{"dq", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.DQ }},
	}},
	{Kind: KindBwdDP, Name: "bwd_dp", HasI: true, HasJ: true, Since: 2, Summary: "naive backward: a dP tile written to device memory", Arrays: []ArraySpec{
		{"dp", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.DP }},
	}},
	{Kind: KindBwdDS, Name: "bwd_ds", HasI: true, Since: 2, Summary: "naive backward: a q-tile's D = rowsum(P∘dP) from whole rows, dS written", Arrays: []ArraySpec{
		{"delta", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.Delta }},
	}},
	{Kind: KindBwdKV, Name: "bwd_kv", HasI: true, HasJ: true, Since: 2, Summary: "naive backward: kv-tile j's block reads P and dS of q-tile i back", Arrays: []ArraySpec{
		{"p", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.P }},
		{"ds", []Dim{DimBr, DimBc}, func(r *Record) *[]float32 { return &r.DS }},
		{"dv", []Dim{DimBc, DimD}, func(r *Record) *[]float32 { return &r.DV }},
		{"dk", []Dim{DimBc, DimD}, func(r *Record) *[]float32 { return &r.DK }},
	}},
	{Kind: KindRole, Name: "role", HasI: true, HasJ: true, OptionalJ: true, Since: 3, Summary: "a warp role's span in a block: a copy, a wait, a product, the softmax"},
	// J is the split, not a kv-tile.
	{Kind: KindSplitEnd, Name: "split_end", HasI: true, HasJ: true, SplitJ: true, Since: 5, Summary: "split-KV: split j's partial O (divided by its own l) and log-sum-exp, from its kv-tiles alone", Arrays: []ArraySpec{
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
		{"lse", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.LSE }},
	}},
	{Kind: KindMerge, Name: "merge", HasI: true, HasJ: true, SplitJ: true, Since: 5, Summary: "split-KV: split j added to the merge, weighted w = exp(LSE_j − LSE) against the whole row's LSE", Arrays: []ArraySpec{
		{"lse", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.LSE }},
		{"w", []Dim{DimBr}, func(r *Record) *[]float32 { return &r.Alpha }},
		{"o", []Dim{DimBr, DimD}, func(r *Record) *[]float32 { return &r.O }},
	}},
}

// Spec returns the definition of kind k.
func Spec(k Kind) (*KindSpec, bool) {
	for i := range Kinds {
		if Kinds[i].Kind == k {
			return &Kinds[i], true
		}
	}
	return nil, false
}

func (k Kind) String() string {
	if s, ok := Spec(k); ok {
		return s.Name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// align8 rounds n up to a multiple of 8.
func align8(n int) int { return (n + 7) &^ 7 }
