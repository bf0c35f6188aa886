package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Memory traffic in two figures. Every record carries the bytes its step
// loads and stores: the requests it sends towards the L2 cache (the kernels
// load through L2 only, with __ldcg, so no L1 hit hides a request). How many
// of those bytes reach device memory (DRAM) depends on the cache: CacheModel
// says, step by step, under three rules:
//
//   - an input (Q, K, V) comes from DRAM the first time a head's tile is
//     read, and from L2 after, as long as the tiles of the heads in flight fit
//     in L2: flash re-reads K and V once per q-tile, and on an H100 those
//     re-reads hit;
//   - a buffer that is written and read back later (S, P) round-trips through
//     DRAM when it is larger than L2, and stays in L2 when it fits; the
//     softmax's second and third passes over a row hit L2 only while the rows
//     of every warp in flight fit in it;
//   - every byte stored reaches DRAM once (write-back). A run whose writes
//     fit in L2 may end with them still there: the hardware counter then
//     shows less than the model.

// StepRef names one step of a trace, without its numbers.
type StepRef struct {
	Kind                 instrument.Kind
	BH, I, J             int
	RowsValid, ColsValid int
}

// Schedule lists the steps of c's trace (every record after the inputs) in
// trace order: what the mirror emits and where the GPU writes, without
// computing anything.
func Schedule(c *Config) []StepRef {
	info := variantInfo[c.Variant]
	bhs, qs := c.TracedBH(), c.TracedQ()
	var phases [][]StepRef
	for range info.phases(c) {
		phases = append(phases, nil)
	}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			rows := c.RowsValidOf(i)
			for _, kc := range info.records(c, i) {
				for j := range kc.n {
					ref := StepRef{Kind: kc.kind, BH: bh, I: i, J: -1, RowsValid: rows}
					if spec, _ := instrument.Spec(kc.kind); spec.HasJ {
						ref.J, ref.ColsValid = kc.j0+j, c.ColsValidOf(kc.j0+j)
					}
					if c.Timing {
						ref.Kind = instrument.KindTiming
					}
					phases[kc.phase] = append(phases[kc.phase], ref)
				}
			}
		}
	}
	var out []StepRef
	for _, p := range phases {
		out = append(out, p...)
	}
	return out
}

// Record is the step as a record without arrays, for the traffic models.
func (s StepRef) Record() *instrument.Record {
	return &instrument.Record{Kind: s.Kind, BH: s.BH, I: s.I, J: s.J, RowsValid: s.RowsValid, ColsValid: s.ColsValid}
}

// RowsValidOf and ColsValidOf are the data rows of q-tile i and columns of
// kv-tile j.
func (c *Config) RowsValidOf(i int) int { return min(c.Br, c.N-i*c.Br) }
func (c *Config) ColsValidOf(j int) int { return min(c.Bc, c.N-j*c.Bc) }

// CacheModel is the GPU as the DRAM model sees it.
type CacheModel struct {
	Name           string
	L2Bytes        int64
	ResidentBlocks int // flash2 blocks resident at once, over every SM
	// SoftmaxRows is how many rows naive_softmax has in flight: a warp a
	// row, every warp resident on every SM.
	SoftmaxRows int
}

// H100MemoryBytes is the reference H100's device memory, as its driver
// reported it (cuDeviceTotalMem) on 2026-11-22.
const H100MemoryBytes int64 = 85017493504

// H100 is the reference GPU: 50 MB of L2, 132 SMs. naive_softmax's 40
// registers (as the driver compiles it) leave room for six blocks of eight
// warps per SM.
var H100 = CacheModel{Name: "NVIDIA H100 80GB HBM3", L2Bytes: 50 << 20, ResidentBlocks: 132, SoftmaxRows: 132 * 48}

// kvFits says whether the K and V tiles of the heads a flash2 (or naive PV)
// launch has in flight fit in L2. Blocks run in launch order, q-tiles of one
// batch-head next to each other, so ResidentBlocks/Tr heads (and one more
// being started) are in flight.
func (m CacheModel) kvFits(c *Config) bool {
	inFlight := int64(ceilDiv(m.ResidentBlocks, c.Tr()) + 1)
	return inFlight*2*int64(c.N)*int64(c.D)*int64(elementBytes(c)) <= m.L2Bytes
}

// elementBytes is the size of an element of Q, K, V and O of c's kernel.
func elementBytes(c *Config) int {
	if v := variantInfo[c.Variant]; v != nil {
		return v.ElementBytes()
	}
	return 4
}

// isFlash says whether c's kernel is one of the flash loop's: one block per
// q-tile walking the kv-tiles, causal tiles above the diagonal skipped.
func isFlash(c *Config) bool {
	return c.Variant == instrument.VariantFlash2 || c.Variant == instrument.VariantFlash2Fast
}

// bufferFits says whether one N×N buffer of every batch-head fits in L2.
func (m CacheModel) bufferFits(c *Config) bool {
	return int64(c.Batch*c.Heads)*int64(c.N)*int64(c.N)*4 <= m.L2Bytes
}

// firstQTile is the first q-tile that reads kv-tile j: q-tile 0, or under a
// causal mask the one holding row j·Bc, the first that sees column j·Bc;
// flash2_fast launches its causal q-tiles heaviest first, so there the last
// q-tile, which visits every kv-tile, reads each first.
func firstQTile(c *Config, j int) int {
	if c.Causal && c.Variant == instrument.VariantFlash2Fast {
		return c.Tr() - 1
	}
	if c.Causal && isFlash(c) {
		return j * c.Bc / c.Br
	}
	return 0
}

// DRAM is the bytes step s of run c reads from and writes to device memory,
// under the model.
func (m CacheModel) DRAM(c *Config, s StepRef) (read, write uint64) {
	const f32 = 4
	elem := uint64(elementBytes(c)) // Q, K, V and O: float32, or bf16
	rows, cols, d, n := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D), uint64(c.N)
	switch s.Kind {
	case instrument.KindFlashStep:
		if s.J == 0 {
			read += rows * d * elem // Q_i: each q-tile is read once
		}
		if s.I == firstQTile(c, s.J) || !m.kvFits(c) {
			read += 2 * cols * d * elem // K_j, V_j: first touch, or evicted
		}
	case instrument.KindScores:
		if s.J == 0 {
			read += rows * d * f32
		}
		if s.I == 0 {
			read += cols * d * f32
		}
		write = rows * cols * f32
	case instrument.KindSoftmax:
		switch {
		case m.bufferFits(c): // S is still in L2
		case int64(m.SoftmaxRows)*int64(n)*f32 <= m.L2Bytes:
			read = rows * n * f32 // the first pass misses; the row then sits in L2
		default:
			read = 3 * rows * n * f32 // the rows in flight crowd each other out
		}
		write = rows*n*f32 + rows*f32
	case instrument.KindPV:
		if !m.bufferFits(c) {
			read += rows * cols * f32
		}
		if s.I == 0 || !m.kvFits(c) {
			read += cols * d * f32
		}
	case instrument.KindEpilogue:
		if isFlash(c) {
			write = rows*d*elem + rows*f32 // O, and the LSE in float32
		} else {
			write = rows * d * f32
		}
	}
	return read, write
}

// Traffic is a kernel launch's bytes, in both figures.
type Traffic struct {
	Kernel    string `json:"kernel"`
	L2Read    uint64 `json:"l2_read"`
	L2Write   uint64 `json:"l2_write"`
	DRAMRead  uint64 `json:"dram_read"`
	DRAMWrite uint64 `json:"dram_write"`
}

// RunTraffic is the traffic of every launch of a whole run of c (every
// batch-head and q-tile, whatever the trace selection).
func (m CacheModel) RunTraffic(c Config) []Traffic {
	c.TraceBH, c.TraceQ, c.Timing = instrument.Range{}, instrument.Range{}, false
	info := variantInfo[c.Variant]
	var out []Traffic
	add := func(kernel string, s StepRef) {
		if len(out) == 0 || out[len(out)-1].Kernel != kernel {
			out = append(out, Traffic{Kernel: kernel})
		}
		t := &out[len(out)-1]
		lr, lw := info.Traffic(&c, s.Record())
		dr, dw := m.DRAM(&c, s)
		t.L2Read += lr
		t.L2Write += lw
		t.DRAMRead += dr
		t.DRAMWrite += dw
	}
	// One batch-head's schedule, times every batch-head: the model treats
	// heads alike.
	one := c
	one.TraceBH = instrument.Range{Lo: 0, Hi: 1}
	for _, s := range Schedule(&one) {
		kernel := map[instrument.Kind]string{
			instrument.KindFlashStep: c.Variant.String(), instrument.KindScores: "naive_scores",
			instrument.KindSoftmax: "naive_softmax", instrument.KindPV: "naive_pv"}[s.Kind]
		if s.Kind == instrument.KindEpilogue {
			kernel = "naive_pv"
			if isFlash(&c) {
				kernel = c.Variant.String() // one kernel does it all
			}
		}
		add(kernel, s)
	}
	bh := uint64(c.Batch * c.Heads)
	for k := range out {
		out[k].L2Read *= bh
		out[k].L2Write *= bh
		out[k].DRAMRead *= bh
		out[k].DRAMWrite *= bh
	}
	return out
}

// MemoryPlan is what a run of attention holds in device memory, naive
// against flash, and where naive stops fitting.
type MemoryPlan struct {
	B, H, N, D int

	InputsBytes   int64 `json:"inputs_bytes"`     // Q, K, V, O and the LSE, float32
	NaiveSPBytes  int64 `json:"naive_sp_bytes"`   // S and P, N×N float32 each, per batch-head
	NaiveBytes    int64 `json:"naive_bytes"`      // inputs + S and P
	FlashBytes    int64 `json:"flash_bytes"`      // inputs only
	FlashTileByte int64 `json:"flash_tile_bytes"` // one block's shared memory (Br=Bc=64), on chip
	GPUBytes      int64 `json:"gpu_bytes"`
	NaiveFits     bool  `json:"naive_fits"`
	FlashFits     bool  `json:"flash_fits"`
	NaiveMaxN     int   `json:"naive_max_n"` // the largest N naive fits at, these B, H and d
	FlashMaxN     int   `json:"flash_max_n"`
}

// Limits of the calculator's inputs.
const (
	MaxCalcB = 1 << 16
	MaxCalcH = 1 << 12
	MaxCalcN = 1 << 22
	MaxCalcD = 1 << 12
)

// PlanMemory works out the plan for batch b, heads h, length n, head dim d
// on a GPU of gpuBytes.
func PlanMemory(b, h, n, d int, gpuBytes int64) (MemoryPlan, error) {
	var errs FieldErrors
	check := func(field, name string, v, hi int) {
		if v < 1 || v > hi {
			errs = append(errs, FieldError{field, fmt.Sprintf("%s must be between 1 and %d (got %d)", name, hi, v)})
		}
	}
	check("b", "B", b, MaxCalcB)
	check("h", "H", h, MaxCalcH)
	check("n", "N", n, MaxCalcN)
	check("d", "d", d, MaxCalcD)
	if len(errs) > 0 {
		return MemoryPlan{}, errs
	}
	bh := int64(b) * int64(h)
	inputs := func(n int64) int64 { return bh * (4*n*int64(d)*4 + n*4) }
	sp := func(n int64) int64 { return bh * 2 * n * n * 4 }
	p := MemoryPlan{B: b, H: h, N: n, D: d, GPUBytes: gpuBytes}
	p.InputsBytes = inputs(int64(n))
	p.NaiveSPBytes = sp(int64(n))
	p.NaiveBytes = p.InputsBytes + p.NaiveSPBytes
	p.FlashBytes = p.InputsBytes
	p.FlashTileByte = int64(Flash2Instance{Br: 64, Bc: 64, D: d}.SharedBytes())
	p.NaiveFits = p.NaiveBytes <= gpuBytes
	p.FlashFits = p.FlashBytes <= gpuBytes
	// Largest N that fits: both footprints grow with N, so bisect.
	largest := func(bytes func(int64) int64) int {
		lo, hi := int64(0), int64(1)
		for bytes(hi) <= gpuBytes && hi < 1<<40 {
			hi *= 2
		}
		for lo+1 < hi {
			mid := (lo + hi) / 2
			if bytes(mid) <= gpuBytes {
				lo = mid
			} else {
				hi = mid
			}
		}
		return int(lo)
	}
	p.NaiveMaxN = largest(func(n int64) int64 { return inputs(n) + sp(n) })
	p.FlashMaxN = largest(inputs)
	return p, nil
}
