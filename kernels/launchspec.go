package kernels

import (
	"fmt"
	"math"

	"flashstep/instrument"
)

// What a rung launches on the GPU: its compiled tiles and, for a run, its
// kernels with their grids, blocks, shared memory and arguments. Each rung
// states its own (Rung.Launches, beside its mirror); package launch turns
// them into a plan with buffers and trace offsets, naming no rung.

// Tile is one compiled instantiation of a rung's kernels: the tiles and head
// dim it is compiled for, and its block size.
type Tile struct {
	Br, Bc, D int
	Threads   int
}

// String is the tile as a form or an error names it.
func (t Tile) String() string { return fmt.Sprintf("%d×%d, d=%d", t.Br, t.Bc, t.D) }

// Fits says whether c runs at t.
func (t Tile) Fits(c *Config) bool { return t.Br == c.Br && t.Bc == c.Bc && t.D == c.D }

// Buffer names a device buffer of a run.
type Buffer int

const (
	BufQ   Buffer = iota // Q, K, V and O: N×d per batch-head, in the kernel's element type
	BufK                 //
	BufV                 //
	BufO                 //
	BufLSE               // N float32 per batch-head
	BufS                 // the materialised rungs' S
	BufP                 // the materialised rungs' P
	BufML                // m then l, N float32 each per batch-head (flash1's state between steps)
	// The backward pass's: dO, an input like Q (O and the LSE are inputs
	// too, uploaded rather than computed); D = rowsum(dO∘O), N float32 per
	// batch-head; and the gradients dQ, dK and dV, N×d per batch-head.
	BufDO
	BufDelta
	BufDQ
	BufDK
	BufDV
	BufDP // the naive backward's dP and dS, N×N float32 per batch-head
	BufDS
	// L_i·log2 e in whole q-tiles: Tr·Br float32 per batch-head, the rows
	// past N zero, as flash3_bwd_tma's pre kernel lays it out (with D) so
	// that every q-tile's run starts on a 16-byte boundary, as the copy
	// engine needs.
	BufLT
	// Split-KV's partials: each split's O (divided by its own l) and its
	// LSE, float32, splits × Tr·Br rows per batch-head (decode_split.go).
	BufSplitO
	BufSplitLSE
	// The paged cache's block table: Tc int32 a sequence (batch row), the
	// page holding each of its kv-tiles (decode_paged.go).
	BufPageTable
	NumBuffers
)

// Arg is one kernel argument: a buffer's device address, a value, or a
// tensor map of a buffer. An address or a value takes an 8-byte slot (the
// driver copies the parameter's own size out of it); a tensor map is passed
// by value, 128 bytes.
type Arg struct {
	Buffer Buffer
	IsBuf  bool
	Value  uint64
	Map    *TensorMap
}

// TensorMap describes a bf16 buffer of a run to Hopper's tensor memory
// accelerator (TMA): a 3-D tensor of D columns × N rows × BH batch-heads,
// innermost first, copied in boxes of 64 columns × Rows rows of one
// batch-head into 128-byte swizzled panels (kernels/cuda/hopper/tma.cuh); rows past N
// arrive as zeros. The worker encodes it into the driver's 128-byte tensor
// map (cuTensorMapEncodeTiled) once the buffer has an address.
//
// In its Run form it is instead a float32 buffer of N values per batch-head
// (BufLT, or D laid out as it) as one run of BH·N floats, copied Rows at a
// time, unswizzled. A box's first element must start on a 16-byte
// boundary (else the copy faults: an illegal instruction), so N is a
// whole number of q-tiles and boxes start at q-tiles.
//
// In its Add form it is a float32 buffer of D columns × N rows × BH
// batch-heads that the copy engine adds boxes of 32 columns × Rows rows
// into (cp.reduce.async.bulk.tensor), read from shared memory with the
// 128-byte swizzle; rows past N are left alone.
type TensorMap struct {
	Buffer   Buffer
	D, N, BH int
	Rows     int
	Run      bool
	Add      bool
}

// TensorMapBoxCols is a box's width: 64 bf16, the 128 bytes of one swizzled
// panel row.
const TensorMapBoxCols = 64

// TMap is buffer b (Q, K or V of c) as a tensor map copied rows rows at a
// time.
func TMap(b Buffer, c *Config, rows int) Arg {
	return Arg{Map: &TensorMap{Buffer: b, D: c.D, N: c.N, BH: c.Batch * c.Heads, Rows: rows}}
}

// TRun is float32 buffer b of c, laid out in whole q-tiles (Tr·Br values
// per batch-head), as a tensor map's run copied a q-tile at a time.
func TRun(b Buffer, c *Config) Arg {
	return Arg{Map: &TensorMap{Buffer: b, N: c.Tr() * c.Br, BH: c.Batch * c.Heads, Rows: c.Br, Run: true}}
}

// TAdd is float32 buffer b (dQ's accumulator) of c as a tensor map that
// warps add their 16 rows into, 32 columns a box.
func TAdd(b Buffer, c *Config) Arg {
	return Arg{Map: &TensorMap{Buffer: b, D: c.D, N: c.N, BH: c.Batch * c.Heads, Rows: TensorMapAddRows, Add: true}}
}

// TensorMapAddCols and TensorMapAddRows are an Add form's box: 32 float32
// (128 bytes, one swizzled row) × a warp's 16 rows.
const TensorMapAddCols, TensorMapAddRows = 32, 16

// Buf is the address of buffer b as an argument; Val an integer; Bits a
// value's raw bits.
func Buf(b Buffer) Arg  { return Arg{Buffer: b, IsBuf: true} }
func Val(v int) Arg     { return Arg{Value: uint64(v)} }
func Bits(v uint64) Arg { return Arg{Value: v} }

// ScaleArg is the softmax scale as a float32 argument.
func ScaleArg(c *Config) Arg { return Bits(uint64(math.Float32bits(c.Scale()))) }

// CausalArg is the causal flag as an integer argument.
func CausalArg(c *Config) Arg {
	if c.Causal {
		return Val(1)
	}
	return Val(0)
}

// QKVO are the arguments every fused rung starts with: Q, K, V, O and the
// log-sum-exp.
func QKVO() []Arg { return []Arg{Buf(BufQ), Buf(BufK), Buf(BufV), Buf(BufO), Buf(BufLSE)} }

// Launch is one kernel launch of a run.
type Launch struct {
	Name    string // the symbol in the PTX
	Grid    [3]int
	Threads int
	Shared  int // dynamic shared memory, bytes
	Args    []Arg
}

// Launches is what a rung launches for one run: its kernels in order and the
// buffers beyond Q, K, V, O and the log-sum-exp, bytes each, or the size of
// one of those where the rung lays it out its own way (a paged cache's K
// and V, its pools).
type Launches struct {
	Kernels []Launch
	Extra   map[Buffer]int64
}

// TraceSlots says where a rung's kernels write their records: slot returns
// the launch and the offset slot of step s's record of kind k, and count the
// slots of launch l. A rung whose every record comes from its one kernel's
// block (bh, i) leaves Rung.TraceSlots nil.
type TraceSlots struct {
	Slot  func(c *Config, s StepRef) (launch, index int)
	Count func(c *Config, launch int) int
}

// recordSlots are the trace slots of a rung whose kernel writes each record
// of q-tile i of batch-head bh to a slot of its own: its kv-tiles' steps,
// then its epilogue (flash1's block per batch-head walks every q-tile;
// decode_group's block per group of heads writes each head's).
var recordSlots = &TraceSlots{
	Slot: func(c *Config, s StepRef) (int, int) {
		j := s.J
		if s.Kind == instrument.KindEpilogue {
			j = c.Tc()
		}
		return 0, (s.BH*c.Tr()+s.I)*(c.Tc()+1) + j
	},
	Count: func(c *Config, _ int) int { return c.Batch * c.Heads * c.Tr() * (c.Tc() + 1) },
}

// Limits of the reference GPU (H100) that a rung's launch must meet: CUDA's
// limit on a grid's second and third dimensions, and the shared memory a
// block may opt into.
const (
	MaxGridY       = 65535
	MaxSharedBytes = 227 << 10
)

// hopperLaunch is the one launch of a Hopper rung that reads Q, K and V
// through tensor maps (rungs 8 to 10): a block per (q-tile, batch-head), the kernel named
// prefix_br…_bc…_d…[_causal], with shared bytes of dynamic shared memory.
func hopperLaunch(c *Config, t Tile, prefix string, shared int) Launches {
	name := fmt.Sprintf("%s_br%d_bc%d_d%d", prefix, t.Br, t.Bc, t.D)
	if c.Causal {
		name += "_causal"
	}
	args := []Arg{TMap(BufQ, c, t.Br), TMap(BufK, c, t.Bc), TMap(BufV, c, t.Bc), Buf(BufO), Buf(BufLSE), Val(c.N), ScaleArg(c)}
	return Launches{Kernels: []Launch{{Name: name, Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
		Threads: t.Threads, Shared: shared, Args: args}}}
}
