package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// The naive backward, float32: the CPU mirror of naive_bwd.cu, the contrast
// to flash2_bwd. It is the backward of naive attention, which stored its P
// (N×N) in device memory: it reads P back rather than recomputing it, and
// writes dP and dS (N×N each) on the way, as a framework's autograd of
// softmax(QKᵀ)V does. Four kernels, each a pass over the whole problem:
//
//  1. dp:  dP = dO Vᵀ, one block per tile (i, j), written to an N×N buffer.
//  2. ds:  one thread per row: D = Σ_c P·dP over the whole row (the
//     softmax's own backward, reading both rows), then dS = P ∘ (dP − D)
//     written to a third N×N buffer.
//  3. dq:  dQ_i = dS_i K · scale, one block per q-tile, reading dS and K
//     one kv-tile at a time.
//  4. dkv: one block per kv-tile j walking the q-tiles: dV_j += P_ijᵀ dO_i
//     and dK_j += dS_ijᵀ Q_i, both tiles read back from device memory; at
//     the end dK_j · scale and dV_j written.
//
// Nothing is skipped under a causal mask (P is 0 above the diagonal, and
// its zeros are read and multiplied like any other number). There is no
// exp, so the GPU computes the mirror's numbers bit for bit: every
// operation is a float32 product or sum in the same order.
//
// Arithmetic order: dP over d in order; D over the row's columns in order;
// dQ over the columns in order (tile by tile); dV and dK add the q-tiles'
// rows in order into the accumulator.

// naiveBwdKernel is naive's backward: no rung, flash2_bwd's contrast.
var naiveBwdKernel = &VariantInfo{
	Variant:      instrument.VariantNaiveBwd,
	Title:        "Naive backward, reads P back (float32)",
	Summary:      "The backward that stored P: it reads the forward's P (N×N) back and writes dP and dS (N×N each) to device memory.",
	DType:        instrument.DTypeF32,
	Backward:     true,
	Materialised: true,
	Loop:         LoopMaterialised,
	StepRun:      "/step?variant=naive_bwd&n=8&d=4&br=2&bc=2&pattern=normal&seed=1",
	Colour:       "#b5475d",
	BytesNote:    "The forward left P (N² floats) in device memory; the backward reads it three times and writes dP and dS (N² floats each), reading dP twice and dS twice.",
	Words: Words{
		Steps: map[instrument.Kind]StepWords{
			instrument.KindBwdDP: {Title: "Naive backward phase 1: dP tile ({i}, {j}), {head}",
				Body: "dP = {dO_i}·{V_j}ᵀ, written to an N×N buffer in device memory."},
			instrument.KindBwdDS: {Title: "Naive backward phase 2: D and dS of q-tile {i} (rows {rows}), {head}",
				Body: "Each row of P (stored by the forward) and of dP is read back whole: D = Σ P·dP over the row, then dS = P ∘ (dP − D) is written, a third N×N buffer."},
			instrument.KindBwdDQ: {Title: "Naive backward phase 3: dQ of q-tile {i} (rows {rows}), {head}",
				Body: "{dQ_i} = dS·K · 1/√d, reading q-tile {i}'s rows of dS back from device memory one kv-tile at a time."},
			instrument.KindBwdKV: {Title: "Naive backward phase 4: kv-tile {j} (keys {keys}) × q-tile {i} (rows {rows}), {head}",
				Body:  "The block of kv-tile {j} reads P and dS of this tile back from device memory with {Q_i} and {dO_i}, and adds Pᵀ·{dO_i} into {dV_j} and dSᵀ·{Q_i} into {dK_j}.",
				First: " {dK_j} and {dV_j} start at zero.",
				Later: " {dK_j} and {dV_j} already hold the earlier q-tiles' part."},
		},
		TileStates: []TileState{{"stored", "dP in device memory"}, {"normalised", "dS in device memory"}, {"consumed", "read back for dK and dV"}},
	},
	GPURate: 1e12, CPURate: 1e9,
	Launches:   naiveBwdLaunches,
	TraceSlots: &TraceSlots{Slot: naiveBwdSlot, Count: naiveBwdSlots},
	GPULimits:  naiveBwdGPULimits,
	Family:     FamilyNaiveBwd,
	phases:     func(c *Config) int { return naiveBwdPhaseKV + c.Tc() },
	records:    naiveBwdRecords,
}

// naiveBwdBlock is the naive backward's block walk: the backward's, with
// its own records and its own D, read from whole rows of P and dP.
func naiveBwdBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	backwardBlock(c, in, bh, i, emit, naiveBwdRecords, func() *bwdHead { return naiveBwdHead(c, in, bh) })
}

// The naive backward's phases: dP, D and dS, dQ, then kv-tile j's block in
// phase naiveBwdPhaseKV + j.
const (
	naiveBwdPhaseDP = iota
	naiveBwdPhaseDS
	naiveBwdPhaseDQ
	naiveBwdPhaseKV
)

// naiveBwdThreads is every naive backward kernel's block; a dq thread holds
// at most naiveMaxOutPerThread elements of dQ_i, as naive_pv's of O.
const naiveBwdThreads = 256

// naiveBwdSharedBytes is the dynamic shared memory of the dp, dq and dkv
// kernels: dO_i and V_j (rows padded by one); a dS tile and K_j; the P and
// dS tiles, Q_i and dO_i, and the accumulators dK_j and dV_j.
func naiveBwdSharedBytes(c *Config) (dp, dq, dkv int) {
	return 4 * (c.Br*c.D + c.Bc*(c.D+1)), 4 * (c.Br*c.Bc + c.Bc*c.D), 4 * (2*c.Br*c.Bc + 2*c.Br*c.D + 2*c.Bc*c.D)
}

func naiveBwdLaunches(c *Config, _ Tile) Launches {
	bh, n := int64(c.Batch*c.Heads), int64(c.N)
	tr, tc, nbh := c.Tr(), c.Tc(), c.Batch*c.Heads
	dp, dq, dkv := naiveBwdSharedBytes(c)
	shape := []Arg{Val(c.N), Val(c.D), Val(c.Br), Val(c.Bc)}
	extra := backwardBuffers(c, 4)
	for _, b := range []Buffer{BufP, BufDP, BufDS} {
		extra[b] = bh * n * n * 4
	}
	delete(extra, BufDelta) // D lives in a register of its row's thread
	return Launches{
		Kernels: []Launch{
			{Name: "naive_bwd_dp", Grid: [3]int{tc, tr, nbh}, Threads: naiveBwdThreads, Shared: dp,
				Args: append([]Arg{Buf(BufDO), Buf(BufV), Buf(BufDP)}, shape...)},
			{Name: "naive_bwd_ds", Grid: [3]int{tr, nbh, 1}, Threads: naiveBwdThreads,
				Args: append([]Arg{Buf(BufP), Buf(BufDP), Buf(BufDS)}, shape...)},
			{Name: "naive_bwd_dq", Grid: [3]int{tr, nbh, 1}, Threads: naiveBwdThreads, Shared: dq,
				Args: append(append([]Arg{Buf(BufDS), Buf(BufK), Buf(BufDQ)}, shape...), ScaleArg(c))},
			{Name: "naive_bwd_dkv", Grid: [3]int{tc, nbh, 1}, Threads: naiveBwdThreads, Shared: dkv,
				Args: append(append([]Arg{Buf(BufP), Buf(BufDS), Buf(BufQ), Buf(BufDO), Buf(BufDK), Buf(BufDV)}, shape...), ScaleArg(c))},
		},
		Extra: extra,
	}
}

// naiveBwdGPULimits: the dp kernel gives each q-tile a row of its grid, a
// dq thread holds at most naiveMaxOutPerThread elements of dQ_i, and the
// tiles fit in shared memory.
func naiveBwdGPULimits(c *Config) error {
	if c.Tr() > MaxGridY {
		return FieldErrors{{Field: FieldBr, Message: fmt.Sprintf("the naive backward's dP kernel gives each q-tile a row of its grid: N/Br must be at most %d (got %d)", MaxGridY, c.Tr())}}
	}
	if c.Br*c.D > naiveMaxOutPerThread*naiveBwdThreads {
		return FieldErrors{{Field: FieldBr, Message: fmt.Sprintf("the naive backward's dQ kernel holds at most %d values of dQ per q-tile: Br·d must be at most that (got %d)", naiveMaxOutPerThread*naiveBwdThreads, c.Br*c.D)}}
	}
	if dp, dq, dkv := naiveBwdSharedBytes(c); max(dp, dq, dkv) > MaxSharedBytes {
		return FieldErrors{{Field: FieldBc, Message: fmt.Sprintf("tiles of Br=%d, Bc=%d with d=%d need %s of shared memory in the naive backward, above the GPU's %s", c.Br, c.Bc, c.D, FormatBytes(int64(max(dp, dq, dkv))), FormatBytes(MaxSharedBytes))}}
	}
	return nil
}

// naiveBwdSlot: the dp kernel writes a record per block (tile), ds and dq
// one per q-tile block, and the dkv kernel has a slot per step (kv-tile j,
// q-tile i), since its block records only the traced q-tiles of its walk.
func naiveBwdSlot(c *Config, s StepRef) (launch, index int) {
	switch s.Kind {
	case instrument.KindBwdDP:
		return 0, (s.BH*c.Tr()+s.I)*c.Tc() + s.J
	case instrument.KindBwdDS:
		return 1, s.BH*c.Tr() + s.I
	case instrument.KindBwdDQ:
		return 2, s.BH*c.Tr() + s.I
	}
	return 3, (s.BH*c.Tc()+s.J)*c.Tr() + s.I
}

func naiveBwdSlots(c *Config, launch int) int {
	bh := c.Batch * c.Heads
	switch launch {
	case 0, 3:
		return bh * c.Tr() * c.Tc()
	}
	return bh * c.Tr()
}

func naiveBwdRecords(c *Config, _ int) []kindCount {
	out := []kindCount{
		{kind: instrument.KindBwdDP, n: c.Tc(), phase: naiveBwdPhaseDP, j0: 0},
		{kind: instrument.KindBwdDS, n: 1, phase: naiveBwdPhaseDS, j0: 0},
		{kind: instrument.KindBwdDQ, n: 1, phase: naiveBwdPhaseDQ, j0: 0},
	}
	for j := range c.Tc() {
		out = append(out, kindCount{kind: instrument.KindBwdKV, n: 1, phase: naiveBwdPhaseKV + j, j0: j})
	}
	return out
}

// naiveBwdTraffic is the device-memory traffic of one record: dp reads dO_i
// and V_j and writes the dP tile; ds reads the q-tile's rows of P and dP
// twice (for D, then for dS) and writes its rows of dS; dq reads the rows
// of dS and every K_j and writes dQ_i; a dkv step reads the P and dS tiles
// and Q_i and dO_i, and its block's last writes dK_j and dV_j.
func naiveBwdTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32 = 4
	rows, cols, d, n := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D), uint64(c.N)
	switch r.Kind {
	case instrument.KindBwdDP:
		return (rows + cols) * d * f32, rows * cols * f32
	case instrument.KindBwdDS:
		return 4 * rows * n * f32, rows * n * f32
	case instrument.KindBwdDQ:
		return rows*n*f32 + n*d*f32, rows * d * f32
	case instrument.KindBwdKV:
		read = 2*rows*cols*f32 + 2*rows*d*f32
		if r.I == c.Tr()-1 {
			written = 2 * cols * d * f32
		}
		return read, written
	}
	return 0, 0
}

// naiveBwdHead runs the four kernels over batch-head bh, keeping the
// records of the traced q-tiles. Only the rows up to the last traced
// q-tile are needed (a traced dkv step holds dK_j and dV_j of the q-tiles
// before it, and no later one's), and nothing once the run has stopped
// (nil: nothing is emitted).
func naiveBwdHead(c *Config, in *Inputs, bh int) *bwdHead {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	traced := c.TracedQ()
	h := newBwdHead()
	record := func(r *instrument.Record) *instrument.Record {
		r.BytesRead, r.BytesWritten = naiveBwdTraffic(c, r)
		return r
	}

	// dp: dP = dO Vᵀ, every tile of the rows needed.
	last := min(n, traced.Hi*br) // rows [0, last) are needed
	dp := make([]float32, n*n)
	for r := range last {
		if r%br == 0 && in.stopped() {
			return nil
		}
		for col := range n {
			dp[r*n+col] = dot32(in.DO[r*d:(r+1)*d], in.V[col*d:(col+1)*d])
		}
	}
	// ds: D from whole rows, then dS.
	delta, ds := make([]float32, n), make([]float32, n*n)
	for r := range last {
		if r%br == 0 && in.stopped() {
			return nil
		}
		var acc float32
		for col := range n {
			acc = float32(acc + float32(in.P[r*n+col]*dp[r*n+col]))
		}
		delta[r] = acc
		for col := range n {
			ds[r*n+col] = float32(in.P[r*n+col] * float32(dp[r*n+col]-acc))
		}
	}
	tile := func(m []float32, i, j int) []float32 {
		t := make([]float32, br*bc)
		for r := range c.RowsValidOf(i) {
			copy(t[r*bc:r*bc+c.ColsValidOf(j)], m[(i*br+r)*n+j*bc:])
		}
		return t
	}
	for i := traced.Lo; i < traced.Hi; i++ {
		if in.stopped() {
			return nil
		}
		rows := c.RowsValidOf(i)
		for j := range c.Tc() {
			h.tiles[[3]int{int(instrument.KindBwdDP), i, j}] = record(&instrument.Record{Kind: instrument.KindBwdDP, BH: bh, I: i, J: j,
				RowsValid: rows, ColsValid: c.ColsValidOf(j), DP: tile(dp, i, j)})
		}
		h.q[[2]int{int(instrument.KindBwdDS), i}] = record(&instrument.Record{Kind: instrument.KindBwdDS, BH: bh, I: i, J: -1,
			RowsValid: rows, Delta: tileRows(delta, 1, i*br, rows, br)})
		// dq: each element over the columns in order, then the scale.
		rec := &instrument.Record{Kind: instrument.KindBwdDQ, BH: bh, I: i, J: -1, RowsValid: rows, DQ: make([]float32, br*d)}
		for r := range rows {
			g := i*br + r
			for x := range d {
				var acc float32
				for col := range n {
					acc = float32(acc + float32(ds[g*n+col]*in.K[col*d+x]))
				}
				rec.DQ[r*d+x] = float32(acc * scale)
			}
		}
		h.q[[2]int{int(instrument.KindBwdDQ), i}] = record(rec)
	}
	// dkv: kv-tile j's block over every q-tile, rows in order into dV_j
	// and dK_j.
	for j := range c.Tc() {
		c0, cols := j*bc, c.ColsValidOf(j)
		dv, dk := make([]float32, bc*d), make([]float32, bc*d)
		for i := range traced.Hi {
			if in.stopped() {
				return nil
			}
			r0, rows := i*br, c.RowsValidOf(i)
			for col := range cols {
				for x := range d {
					av, ak := dv[col*d+x], dk[col*d+x]
					for r := range rows {
						g := r0 + r
						av = float32(av + float32(in.P[g*n+c0+col]*in.DO[g*d+x]))
						ak = float32(ak + float32(ds[g*n+c0+col]*in.Q[g*d+x]))
					}
					dv[col*d+x], dk[col*d+x] = av, ak
				}
			}
			if traced.Contains(i) {
				h.tiles[[3]int{int(instrument.KindBwdKV), i, j}] = record(&instrument.Record{Kind: instrument.KindBwdKV, BH: bh, I: i, J: j,
					RowsValid: rows, ColsValid: cols, P: tile(in.P, i, j), DS: tile(ds, i, j),
					DV: append([]float32(nil), dv...), DK: append([]float32(nil), dk...)})
			}
		}
	}
	return h
}

// FamilyNaiveBwd: float32 backward that reads the forward's P back and writes dP and dS.
var FamilyNaiveBwd = &Family{Name: "naive_bwd", Traffic: naiveBwdTraffic, block: naiveBwdBlock}
