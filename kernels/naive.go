package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Naive attention, float32: the CPU mirror of naive.cu. Three kernels, each a
// pass over the whole problem through device memory:
//
//  1. scores:  S = Q Kᵀ · scale, one tile (i, j) per block, written to an N×N
//     buffer (−Inf above the diagonal when causal). Nothing is skipped.
//  2. softmax: one warp per row: a pass for the max m, a pass for
//     l = Σ exp(S − m) (summed in 32 lanes, then across them), and a pass
//     writing P = exp(S − m)/l to a second N×N buffer.
//  3. pv:      O = P V, per q-tile, reading P and V one kv-tile at a time.
//
// Rows and columns past N are never computed (bounds-checked threads), so the
// padding of ragged tiles holds zeros.

// naiveRung is the ladder's second rung.
var naiveRung = &VariantInfo{
	Variant:      instrument.VariantNaive,
	Title:        "Naive attention (float32)",
	Summary:      "Three kernels: S = QKᵀ to device memory, a row softmax to P in device memory, then O = PV.",
	DType:        instrument.DTypeF32,
	Materialised: true,
	Loop:         LoopMaterialised,
	Rung:         2,
	Gist:         "S and P in device memory",
	Idea:         "Three kernels, S and P through device memory: S = QKᵀ written out as N×N, a row softmax reading it back and writing P, then O = PV. Its traffic grows with N², and its memory runs out first.",
	StepRun:      "/step?variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1",
	Colour:       "#d1495b",
	GPURate:      2e12, CPURate: 2e9, SweptOnCPU: true,
	Launches:   naiveLaunches,
	TraceSlots: &TraceSlots{Slot: materialisedSlot},
	GPULimits:  naiveGPULimits,
	Family:     FamilyNaive,
	phases:     func(*Config) int { return naivePhases },
	records:    naiveRecords,
}

// naiveThreads is the block size of every naive kernel; each thread of
// naive_pv holds at most naiveMaxOutPerThread output elements.
const (
	naiveThreads         = 256
	naiveMaxOutPerThread = 32
)

// naiveSharedBytes is the dynamic shared memory of naive_scores and naive_pv.
func naiveSharedBytes(c *Config) (scores, pv int) {
	return 4 * (c.Br*c.D + c.Bc*(c.D+1)), 4 * (c.Br*c.Bc + c.Bc*c.D)
}

// naiveLaunches: any tile the limits allow, S and P N×N float32 buffers.
func naiveLaunches(c *Config, _ Tile) Launches {
	bh, n := int64(c.Batch*c.Heads), int64(c.N)
	tr, tc, nbh := c.Tr(), c.Tc(), c.Batch*c.Heads
	scores, pv := naiveSharedBytes(c)
	shape := []Arg{Val(c.N), Val(c.D), Val(c.Br), Val(c.Bc)}
	return Launches{
		Kernels: []Launch{
			{Name: "naive_scores", Grid: [3]int{tc, tr, nbh}, Threads: naiveThreads, Shared: scores,
				Args: append([]Arg{Buf(BufQ), Buf(BufK), Buf(BufS)}, append(shape, ScaleArg(c), CausalArg(c))...)},
			{Name: "naive_softmax", Grid: [3]int{tr, nbh, 1}, Threads: naiveThreads,
				Args: append([]Arg{Buf(BufS), Buf(BufP), Buf(BufLSE)}, shape...)},
			{Name: "naive_pv", Grid: [3]int{tr, nbh, 1}, Threads: naiveThreads, Shared: pv,
				Args: append([]Arg{Buf(BufP), Buf(BufV), Buf(BufLSE), Buf(BufO)}, shape...)},
		},
		Extra: map[Buffer]int64{BufS: bh * n * n * 4, BufP: bh * n * n * 4},
	}
}

// naiveGPULimits: the scores kernel gives each q-tile a row of its grid, a
// naive_pv thread holds at most 32 outputs, and shared memory holds the
// tiles.
func naiveGPULimits(c *Config) error {
	if c.Tr() > MaxGridY {
		return FieldErrors{{Field: FieldBr, Message: fmt.Sprintf("naive's scores kernel gives each q-tile a row of its grid: N/Br must be at most %d (got %d)", MaxGridY, c.Tr())}}
	}
	if c.Br*c.D > naiveMaxOutPerThread*naiveThreads {
		return FieldErrors{{Field: FieldBr, Message: fmt.Sprintf("the naive GPU kernel holds at most %d output values per q-tile: Br·d must be at most that (got %d)", naiveMaxOutPerThread*naiveThreads, c.Br*c.D)}}
	}
	if scores, pv := naiveSharedBytes(c); max(scores, pv) > MaxSharedBytes {
		return FieldErrors{{Field: FieldBc, Message: fmt.Sprintf("tiles of Br=%d, Bc=%d with d=%d need %s of shared memory, above the GPU's %s", c.Br, c.Bc, c.D, FormatBytes(int64(max(scores, pv))), FormatBytes(MaxSharedBytes))}}
	}
	return nil
}

// materialisedSlot is where the three kernels of the materialised rungs
// write: the scores kernel a slot per tile, the softmax one per q-tile, P·V
// one per q-tile for its steps and the epilogue.
func materialisedSlot(c *Config, s StepRef) (launch, index int) {
	block := s.BH*c.Tr() + s.I
	switch s.Kind {
	case instrument.KindScores:
		return 0, block*c.Tc() + s.J
	case instrument.KindSoftmax:
		return 1, block
	}
	return 2, block
}

func naiveRecords(c *Config, _ int) []kindCount {
	return []kindCount{
		{kind: instrument.KindScores, n: c.Tc(), phase: naivePhaseScores, j0: 0},
		{kind: instrument.KindSoftmax, n: 1, phase: naivePhaseSoftmax, j0: 0},
		{kind: instrument.KindPV, n: c.Tc(), phase: naivePhasePV, j0: 0},
		{kind: instrument.KindEpilogue, n: 1, phase: naivePhasePV, j0: 0},
	}
}

// The naive kernels' phases; records are emitted phase by phase across the
// whole grid, as the three launches run one after the other.
const (
	naivePhaseScores = iota
	naivePhaseSoftmax
	naivePhasePV
	naivePhases
)

// naiveTraffic is the device-memory traffic of one record. The softmax reads
// each row of S three times (max, sum, normalise) and writes P and the LSE.
func naiveTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32 = 4
	rows, cols, d, n := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D), uint64(c.N)
	switch r.Kind {
	case instrument.KindScores:
		return (rows + cols) * d * f32, rows * cols * f32
	case instrument.KindSoftmax:
		return 3 * rows * n * f32, rows*n*f32 + rows*f32
	case instrument.KindPV:
		return rows*cols*f32 + cols*d*f32, 0
	case instrument.KindEpilogue:
		return 0, rows * d * f32
	}
	return 0, 0
}

// warpSum adds term(0..n-1) as a warp of 32 lanes does: lane k sums the
// terms k, k+32, k+64, ... in order, then five butterfly steps add lanes
// k and k^16, k^8, k^4, k^2, k^1. Every lane ends with the same sum, since
// float addition commutes; lane 0's is returned.
func warpSum(n int, term func(c int) float32) float32 {
	var lane [32]float32
	for c := 0; c < n; c++ {
		lane[c%32] = float32(lane[c%32] + term(c))
	}
	for k := 16; k >= 1; k /= 2 {
		var next [32]float32
		for x := range lane {
			next[x] = float32(lane[x] + lane[x^k])
		}
		lane = next
	}
	return lane[0]
}

// naiveArith is what differs between naive's float32 kernels and naive_mma's
// tensor-core ones: how a score is formed, how P is stored, and how a
// kv-tile's P·V adds into O.
type naiveArith struct {
	score   func(q, k []float32, scale float32) float32
	storeP  func(p float32) float32
	pvTile  func(acc float32, p []float32, v []float32, stride int) float32
	traffic func(c *Config, r *instrument.Record) (read, written uint64)
}

// naiveF32 is naive.cu's arithmetic: dot products over d in order, P in
// float32, P·V over the tile's columns in order, every operation rounded.
var naiveF32 = naiveArith{
	score:  func(q, k []float32, scale float32) float32 { return float32(dot32(q, k) * scale) },
	storeP: func(p float32) float32 { return p },
	pvTile: func(acc float32, p []float32, v []float32, stride int) float32 {
		for col, pv := range p {
			acc = float32(acc + float32(pv*v[col*stride]))
		}
		return acc
	},
	traffic: naiveTraffic,
}

// naiveBlock runs every phase for the rows of (bh, q-tile i) and emits each
// phase's records under its phase number.
func naiveBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	naiveF32.block(c, in, bh, i, emit)
}

func (a naiveArith) block(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	r0 := i * br
	rowsValid := min(br, n-r0)
	traffic := func(r *instrument.Record) *instrument.Record {
		r.BytesRead, r.BytesWritten = a.traffic(c, r)
		return r
	}

	// Phase 1: the q-tile's rows of S, tile by tile.
	s := make([]float32, rowsValid*n)
	for j := range c.Tc() {
		c0 := j * bc
		colsValid := min(bc, n-c0)
		rec := &instrument.Record{Kind: instrument.KindScores, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: colsValid, S: make([]float32, br*bc)}
		for r := range rowsValid {
			q := in.Q[(r0+r)*d : (r0+r+1)*d]
			for col := range colsValid {
				var v float32
				if c.Causal && c0+col > r0+r {
					v = negInf
				} else {
					v = a.score(q, in.K[(c0+col)*d:(c0+col+1)*d], scale)
				}
				s[r*n+c0+col] = v
				rec.S[r*bc+col] = v
			}
		}
		emit(naivePhaseScores, traffic(rec))
	}

	// Phase 2: full-row softmax, one warp per row.
	p := make([]float32, rowsValid*n)
	sm := &instrument.Record{Kind: instrument.KindSoftmax, BH: bh, I: i, J: -1, RowsValid: rowsValid,
		MNew: make([]float32, br), L: make([]float32, br)}
	for r := range rowsValid {
		row := s[r*n : (r+1)*n]
		m := negInf
		for _, v := range row {
			m = max(m, v)
		}
		base := softmaxBase(m)
		l := warpSum(n, func(c int) float32 { return exp32(row[c] - base) })
		if l > 0 {
			for col, v := range row {
				p[r*n+col] = a.storeP(float32(exp32(v-base) / l))
			}
		}
		sm.MNew[r], sm.L[r] = m, l
	}
	emit(naivePhaseSoftmax, traffic(sm))

	// Phase 3: O = P V, accumulated over the kv-tiles in column order.
	o := make([]float32, br*d)
	for j := range c.Tc() {
		c0 := j * bc
		colsValid := min(bc, n-c0)
		rec := &instrument.Record{Kind: instrument.KindPV, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: colsValid, P: make([]float32, br*bc)}
		for r := range rowsValid {
			pr := p[r*n+c0 : r*n+c0+colsValid]
			copy(rec.P[r*bc:], pr)
			or := o[r*d : (r+1)*d]
			for x := range d {
				or[x] = a.pvTile(or[x], pr, in.V[c0*d+x:], d)
			}
		}
		rec.O = append([]float32(nil), o...)
		emit(naivePhasePV, traffic(rec))
	}

	epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: bh, I: i, J: -1, RowsValid: rowsValid,
		O: append([]float32(nil), o...), LSE: make([]float32, br)}
	for r := range rowsValid {
		if sm.L[r] == 0 {
			epi.LSE[r] = negInf
			continue
		}
		epi.LSE[r] = float32(sm.MNew[r] + log32(sm.L[r]))
	}
	emit(naivePhasePV, traffic(epi))
}

// FamilyNaive: float32: S and P through device memory in three phases.
var FamilyNaive = &Family{Name: "naive", Traffic: naiveTraffic, block: naiveBlock}
