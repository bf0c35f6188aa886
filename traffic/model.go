// Package traffic owns the memory-traffic model of a run: the bytes each
// step sends toward L2 (from the kernels' registry) and how many of them
// reach device memory under a cache model of the GPU, and the memory
// calculator's plan of what naive and flash hold in device memory.
package traffic

import (
	"flashstep/instrument"
	"flashstep/kernels"
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
func (m CacheModel) kvFits(c *kernels.Config) bool {
	inFlight := int64((m.ResidentBlocks+c.Tr()-1)/c.Tr() + 1)
	return inFlight*2*int64(c.N)*int64(c.D)*int64(elementBytes(c)) <= m.L2Bytes
}

// elementBytes is the size of an element of Q, K, V and O of c's kernel.
func elementBytes(c *kernels.Config) int {
	if v := kernels.Info(c.Variant); v != nil {
		return v.ElementBytes()
	}
	return 4
}

// isFlash says whether c's kernel is one of the flash loop's: one block per
// q-tile walking the kv-tiles, causal tiles above the diagonal skipped.
func isFlash(c *kernels.Config) bool { return kernels.Info(c.Variant).Loop == kernels.LoopFused }

// flash1Fits says whether the heads flash1 has in flight (one block each,
// every block resident) keep their Q, K, V, O, m and l in L2: then O, m and
// l, read and written at every step, stay there, and reach DRAM once.
func (m CacheModel) flash1Fits(c *kernels.Config) bool {
	inFlight := int64(min(c.Batch*c.Heads, m.ResidentBlocks))
	n, d := int64(c.N), int64(c.D)
	return inFlight*(4*n*d*4+2*n*4) <= m.L2Bytes
}

// bufferFits says whether one N×N buffer of every batch-head fits in L2.
func (m CacheModel) bufferFits(c *kernels.Config) bool {
	return int64(c.Batch*c.Heads)*int64(c.N)*int64(c.N)*4 <= m.L2Bytes
}

// firstQTile is the first q-tile that reads kv-tile j: q-tile 0, or under a
// causal mask the one holding row j·Bc, the first that sees column j·Bc;
// a kernel that launches its causal q-tiles heaviest first (HeaviestFirst)
// has its last q-tile, which visits every kv-tile, read each first.
func firstQTile(c *kernels.Config, j int) int {
	if c.Causal && kernels.Info(c.Variant).HeaviestFirst {
		return c.Tr() - 1
	}
	if c.Causal && !kernels.Info(c.Variant).Materialised {
		return j * c.Bc / c.Br
	}
	return 0
}

// DRAM is the bytes step s of run c reads from and writes to device memory,
// under the model.
func (m CacheModel) DRAM(c *kernels.Config, s kernels.StepRef) (read, write uint64) {
	const f32 = 4
	elem := uint64(elementBytes(c)) // Q, K, V and O: float32, or bf16
	rows, cols, d, n := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D), uint64(c.N)
	if kernels.Info(c.Variant).Backward {
		return m.backwardDRAM(c, s) // backward.go
	}
	switch kernels.Info(c.Variant).Loop {
	case kernels.LoopRowThreads:
		return m.naiveRowDRAM(c, s)
	case kernels.LoopKVOuter:
		return m.flash1DRAM(c, s)
	}
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

// naiveRowDRAM: pass 1 (the scores records) first touches Q_i and K_j,
// pass 2 (the flash steps) V_j; K and V come back from L2 for every other
// q-tile while they fit, as for flash.
func (m CacheModel) naiveRowDRAM(c *kernels.Config, s kernels.StepRef) (read, write uint64) {
	const f32 = 4
	rows, cols, d := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D)
	first := s.I == firstQTile(c, s.J) || !m.kvFits(c)
	switch s.Kind {
	case instrument.KindScores:
		if s.J == 0 {
			read += rows * d * f32
		}
		if first {
			read += cols * d * f32 // K_j
		}
	case instrument.KindFlashStep:
		if first {
			read += cols * d * f32 // V_j; K_j again only when evicted
			if !m.kvFits(c) {
				read += cols * d * f32
			}
		}
	case instrument.KindEpilogue:
		write = rows*d*f32 + rows*f32
	}
	return read, write
}

// flash1DRAM: K_j and V_j are read once per head; Q_i and the running O_i,
// m_i and l_i come back at every step, from L2 while the heads in flight
// fit (flash1Fits) and from DRAM otherwise, and their stores reach DRAM at
// every step, or once, after the q-tile's last kv-tile, while they fit.
func (m CacheModel) flash1DRAM(c *kernels.Config, s kernels.StepRef) (read, write uint64) {
	const f32 = 4
	rows, cols, d := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D)
	fits := m.flash1Fits(c)
	state := rows*d*f32 + 2*rows*f32 // O_i, m_i and l_i
	switch s.Kind {
	case instrument.KindFlashStep:
		if s.J == 0 || !fits {
			read += rows * d * f32 // Q_i
		}
		if s.J > 0 && !fits {
			read += state
		}
		if s.I == firstQTile(c, s.J) {
			read += 2 * cols * d * f32
		}
		last := s.J == c.Tc()-1
		if c.Causal {
			last = s.J == (min(c.N, (s.I+1)*c.Br)-1)/c.Bc
		}
		if !fits || last {
			write = state
		}
	case instrument.KindEpilogue:
		write = rows * f32
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

// MaxRunSteps bounds the steps of one batch-head that RunTraffic walks: a
// whole run of N=4096 at 8×8 tiles is 262,144 of them; 1×1 tiles would be
// 16.7 million, minutes of a server's time for one request.
const MaxRunSteps = 1 << 18

// RunSteps is how many steps RunTraffic would walk for c, counted no
// further than MaxRunSteps+1: a run of 1×1 tiles has too many steps to
// count them all in a request's time.
func RunSteps(c kernels.Config) int {
	n := 0
	for i := range c.Tr() {
		if n += c.QTileRecords(i); n > MaxRunSteps {
			return MaxRunSteps + 1
		}
	}
	return n
}

// RunTraffic is the traffic of every launch of a whole run of c (every
// batch-head and q-tile, whatever the trace selection).
func (m CacheModel) RunTraffic(c kernels.Config) []Traffic {
	c.TraceBH, c.TraceQ, c.Timing = instrument.Range{}, instrument.Range{}, false
	info := kernels.Info(c.Variant)
	var out []Traffic
	add := func(kernel string, s kernels.StepRef) {
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
	for _, s := range kernels.Schedule(&one) {
		kernel := info.Name() // one kernel does it all
		switch {
		case info.Backward: // a kernel per record kind: name_pre, name_main, name_dq; name_dp, name_ds, name_dq, name_dkv
			kernel += map[instrument.Kind]string{instrument.KindBwdPre: "_pre", instrument.KindBwdStep: "_main", instrument.KindBwdDQ: "_dq",
				instrument.KindBwdDP: "_dp", instrument.KindBwdDS: "_ds", instrument.KindBwdKV: "_dkv"}[s.Kind]
		case info.Materialised: // a kernel per phase: name_scores, name_softmax, name_pv
			kernel += map[instrument.Kind]string{instrument.KindScores: "_scores",
				instrument.KindSoftmax: "_softmax", instrument.KindPV: "_pv", instrument.KindEpilogue: "_pv"}[s.Kind]
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
