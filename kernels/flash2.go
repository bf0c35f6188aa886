package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2, float32: the CPU mirror of flash2.cu.
//
// One thread block per (batch-head, q-tile i). The block loads Q_i once, then
// walks the kv-tiles j in order, keeping the running row max m, the running
// sum l and the unnormalised output O on chip. At each tile:
//
//	S     = Q_i K_jᵀ · scale                 (−Inf where masked or padding)
//	m_new = max(m_old, rowmax(S))
//	alpha = exp(m_old − m_new)               rescales what was summed so far
//	P     = exp(S − m_new)
//	l     = alpha·l + rowsum(P)
//	O     = alpha·O, then O += P V_j   the rescaled accumulator takes the tile
//
// and after the last tile it divides once: O/l, and writes LSE = m + log l.
// Under a causal mask the kv-tiles wholly above the diagonal are skipped.

// flash2Rung is the ladder's fourth rung.
var flash2Rung = &VariantInfo{
	Variant: instrument.VariantFlash2,
	Title:   "FlashAttention-2 (float32)",
	Summary: "One block per q-tile keeps m, l and O on chip and walks the kv-tiles: S and P never leave the chip.",
	DType:   instrument.DTypeF32,
	Loop:    LoopFused,
	Rung:    4,
	Gist:    "FlashAttention-2's online softmax",
	Idea:    "FlashAttention-2's loop order: one block per q-tile keeps m, l and O on chip for all its kv-tiles and divides by l once at the end. S and P never leave the chip; in float32 without tensor cores it is compute-bound, barely faster than naive.",
	StepRun: "/step?variant=flash2&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:  "#0b5fff",
	GPURate: 6e12, CPURate: 2e9, SweptOnCPU: true,
	Tiles: Float32Tiles, TeachingTiles: true,
	Instance: func(t Tile) string { return fmt.Sprintf("FLASH2_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads) },
	Launches: func(c *Config, t Tile) Launches {
		return Launches{Kernels: []Launch{{Name: fmt.Sprintf("flash2_br%d_bc%d_d%d", t.Br, t.Bc, t.D), Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
			Threads: t.Threads, Shared: flash2SharedBytes(t), Args: append(QKVO(), Val(c.N), ScaleArg(c), CausalArg(c))}}}
	},
	Family:  FamilyFlash2,
	phases:  onePhase,
	records: flash2Records,
}

// Float32Tiles are the tiles flash2.cu is compiled at, in its order, with
// each one's block size (TestInstancesMatchSource checks the two agree):
// teaching tiles for the stepper and the 64×64 ones the sweep times.
// naive_row and flash1 compile the same tiles, so that the float32 rungs
// step over the same tiles.
var Float32Tiles = []Tile{
	{2, 2, 4, 8},
	{4, 4, 8, 32},
	{16, 16, 32, 64},
	{32, 32, 64, 128},
	{64, 64, 64, 256},
	{64, 64, 128, 256},
	{32, 64, 128, 256},
}

// flash2SharedBytes is flash2's dynamic shared memory (FLASH2_SMEM in
// flash2.cu): Q_i, K_j (rows padded by one), V_j, the S/P tile (padded) and
// three per-row arrays.
func flash2SharedBytes(t Tile) int {
	return 4 * (t.Br*t.D + t.Bc*(t.D+1) + t.Bc*t.D + t.Br*(t.Bc+1) + 3*t.Br)
}

// flash2KVTiles is how many kv-tiles q-tile i visits: all of them, or under a
// causal mask those holding a key at or before the tile's last row's
// position (QueryOffset() past its row: the mask is aligned to the end).
func flash2KVTiles(c *Config, i int) int {
	if !c.Causal {
		return c.Tc()
	}
	lastPos := c.QueryOffset() + min(c.Queries(), (i+1)*c.Br) - 1
	return min(c.Tc(), lastPos/c.Bc+1)
}

func flash2Records(c *Config, i int) []kindCount {
	return []kindCount{{kind: instrument.KindFlashStep, n: flash2KVTiles(c, i)}, {kind: instrument.KindEpilogue, n: 1}}
}

// flash2Traffic is the device-memory traffic of one record: Q_i is loaded at
// the first kv-tile, K_j and V_j at every one, O_i and the LSE stored at the
// end. Padding rows and columns are not loaded.
func flash2Traffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32 = 4
	rows, cols, d := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindFlashStep:
		read = 2 * cols * d * f32
		if r.J == 0 {
			read += rows * d * f32
		}
	case instrument.KindEpilogue:
		written = rows*d*f32 + rows*f32
	}
	return read, written
}

// flash2Block runs the block of (bh, q-tile i) and emits its records.
func flash2Block(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	r0 := i * br
	rowsValid := min(br, n-r0)
	q := tileRows(in.Q, d, r0, rowsValid, br)

	m := fill(br, negInf)
	l := make([]float32, br)
	o := make([]float32, br*d)

	for j := range flash2KVTiles(c, i) {
		c0 := j * bc
		colsValid := min(bc, n-c0)
		k := tileRows(in.K, d, c0, colsValid, bc)
		v := tileRows(in.V, d, c0, colsValid, bc)

		rec := &instrument.Record{Kind: instrument.KindFlashStep, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: colsValid,
			MOld: append([]float32(nil), m...), MNew: make([]float32, br), Alpha: make([]float32, br),
			L: make([]float32, br), S: make([]float32, br*bc), P: make([]float32, br*bc)}

		for r := range br {
			p := rec.P[r*bc : (r+1)*bc]
			mNew, alpha, rowSum := softmaxRow(c, q[r*d:(r+1)*d], k, scale, r0+r, c0, colsValid, m[r], rec.S[r*bc:(r+1)*bc], p)
			l[r] = float32(float32(alpha*l[r]) + rowSum)
			or := o[r*d : (r+1)*d]
			for x := range d {
				or[x] = pvDot(float32(alpha*or[x]), p, v, x, d)
			}
			m[r] = mNew
			rec.MNew[r], rec.Alpha[r] = mNew, alpha
		}
		copy(rec.L, l)
		rec.O = append([]float32(nil), o...)
		rec.BytesRead, rec.BytesWritten = flash2Traffic(c, rec)
		emit(0, rec)
	}

	epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: bh, I: i, J: -1, RowsValid: rowsValid,
		O: make([]float32, br*d), LSE: make([]float32, br)}
	for r := range br {
		if l[r] == 0 { // every score of the row masked: no output
			epi.LSE[r] = negInf
			continue
		}
		for x := range d {
			epi.O[r*d+x] = float32(o[r*d+x] / l[r])
		}
		epi.LSE[r] = float32(m[r] + log32(l[r]))
	}
	epi.BytesRead, epi.BytesWritten = flash2Traffic(c, epi)
	emit(0, epi)
}

// softmaxRow is one row's step of the flash loop's online softmax, shared by
// flash2 and flash1: the scores of query q (global row `row`) against the
// kv-tile k of columns c0, c0+1, ... into s (−Inf where masked or padding),
// then P = exp(S − m_new) into p. It returns m_new = max(m_old, rowmax S),
// α = exp(m_old − m_new) and the row sum of p, in column order.
func softmaxRow(c *Config, q, k []float32, scale float32, row, c0, colsValid int, mOld float32, s, p []float32) (mNew, alpha, rowSum float32) {
	d := len(q)
	rowMax := negInf
	for col := range s {
		if col >= colsValid || (c.Causal && c0+col > row) {
			s[col] = negInf
		} else {
			s[col] = float32(dot32(q, k[col*d:(col+1)*d]) * scale)
		}
		rowMax = max(rowMax, s[col])
	}
	mNew = max(mOld, rowMax)
	base := softmaxBase(mNew)
	alpha = exp32(mOld - base)
	for col := range p {
		p[col] = exp32(s[col] - base)
		rowSum = float32(rowSum + p[col])
	}
	return mNew, alpha, rowSum
}

// pvDot adds P·V's element x of one row to acc: the row's weights p times
// column x of the kv-tile v (rows of d), over the columns in order, each
// product and sum rounded.
func pvDot(acc float32, p, v []float32, x, d int) float32 {
	for col := range p {
		acc = float32(acc + float32(p[col]*v[col*d+x]))
	}
	return acc
}

// FamilyFlash2: float32, FlashAttention-2's online softmax, every operation rounded on its own.
var FamilyFlash2 = &Family{Name: "flash2", Traffic: flash2Traffic, block: flash2Block}
