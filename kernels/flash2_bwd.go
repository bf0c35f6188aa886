package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2's backward pass, float32: the CPU mirror of flash2_bwd.cu.
//
// The forward kept only O and the log-sum-exp L of every row. The backward
// recomputes S and P tile by tile from Q, K and L instead of reading an N×N
// P back from device memory. Three kernels:
//
//  1. pre, one block per q-tile i: D_i = rowsum(dO_i ∘ O_i), one thread per
//     row over d in order, written to device memory; dQ_i set to zero.
//  2. the main loop, one block per kv-tile j: K_j and V_j, and the
//     accumulators dK_j and dV_j, stay on chip while the block walks the
//     q-tiles i (under a causal mask, from the first that sees column j):
//
//     S   = Q_i K_jᵀ · scale               (−Inf where masked)
//     P   = exp(S − L_i)                   (L is final: no running max)
//     dV_j += Pᵀ dO_i
//     dP  = dO_i V_jᵀ
//     dS  = P ∘ (dP − D_i)
//     dK_j += dSᵀ Q_i
//     dQ_i += dS K_j                        added into device memory
//
//     and at the end writes dK_j · scale and dV_j. Every kv-tile's block
//     adds into each dQ_i, so those adds are atomic: the GPU's order among
//     blocks is not fixed (the mirror adds in kv-tile order), and its
//     atomic add flushes subnormal numbers to zero (the mirror's keeps them).
//  3. dq, one block per q-tile: dQ_i · scale, in place, once every block
//     has added to it. The scale is applied once at the end, to dK and to
//     dQ, rather than to every dS.
//
// Its trace: a bwd_pre per q-tile, then each kv-tile's block walking the
// q-tiles (a bwd_step each: S, P, dP, dS, dV_j and dK_j as accumulated so
// far, and the step's unscaled dS·K_j added into dQ_i), then a bwd_dq per
// q-tile with its finished dQ. The traced q-tiles are those whose steps the
// blocks record.
//
// Arithmetic order, operation for operation as the kernel: dot products
// over d in order (S, dP, D); dV and dK add the step's rows in order into
// the accumulator; dS·K_j runs over the tile's columns in order.

// flash2BwdKernel is the backward of rung 4's loop: it is no rung itself.
var flash2BwdKernel = &VariantInfo{
	Variant:  instrument.VariantFlash2Bwd,
	Title:    "FlashAttention-2 backward (float32)",
	Summary:  "One block per kv-tile keeps K_j, V_j, dK_j and dV_j on chip and walks the q-tiles, recomputing S and P from Q, K and the forward's L; dQ is added into device memory.",
	DType:    instrument.DTypeF32,
	Backward: true,
	Loop:     LoopFused,
	StepRun:  "/step?variant=flash2_bwd&n=8&d=4&br=2&bc=2&pattern=normal&seed=1",
	Colour:   "#5b3cc4",
	BytesNote: "Each step reads Q_i, dO_i, L_i and D_i and adds dS·K_j into dQ_i in device memory; K_j and V_j are read once per block, " +
		"dK_j and dV_j written once at its end. Nothing N×N is read or written.",
	Words: Words{
		Steps: map[instrument.Kind]StepWords{
			instrument.KindBwdPre: {Title: "Preprocessing q-tile {i} (rows {rows}), {head}",
				Body: "Before the main loop, one block per q-tile reads {dO_i} and the forward's {O_i} and writes {D_i} = rowsum({dO_i} ∘ {O_i}), one number per row, to device memory. It also sets {dQ_i} to zero, ready for every kv-tile's block to add into."},
			instrument.KindBwdStep: {Title: "kv-tile {j} (keys {keys}) × q-tile {i} (rows {rows}), {head}",
				Body:  "The block of kv-tile {j} keeps {K_j}, {V_j}, {dK_j} and {dV_j} on chip. It reads {Q_i}, {dO_i}, {L_i} and {D_i}, recomputes S and P = exp(S − {L_i}), adds Pᵀ·{dO_i} into {dV_j}, forms dP = {dO_i}·{V_j}ᵀ and dS = P ∘ (dP − {D_i}), adds dSᵀ·{Q_i} into {dK_j} and adds dS·{K_j} into {dQ_i} in device memory.",
				First: " This is the block's first q-tile: it loads {K_j} and {V_j}, and {dK_j} and {dV_j} start at zero.",
				Later: " {dK_j} and {dV_j} already hold what the earlier q-tiles added."},
			instrument.KindBwdDQ: {Title: "dQ of q-tile {i} finished (rows {rows}), {head}",
				Body: "Every kv-tile's block has added its dS·K_j into {dQ_i}. A last pass multiplies it by the scale 1/√d, once, and it is final."},
		},
		TileStates: []TileState{{"done", "done: S and P recomputed, used and dropped"}},
	},
	GPURate: 2e12, CPURate: 1e9,
	Tiles: Float32Tiles, TeachingTiles: true,
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH2_BWD_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads)
	},
	Launches:   flash2BwdLaunches,
	TraceSlots: &TraceSlots{Slot: flash2BwdSlot, Count: flash2BwdSlots},
	Family:     FamilyFlash2Bwd,
	phases:     func(c *Config) int { return c.Tc() + 2 },
	records:    flash2BwdRecords,
}

// flash2BwdSharedBytes is the main kernel's dynamic shared memory
// (FLASH2_BWD_SMEM in flash2_bwd.cu): K_j and V_j (rows padded by one), Q_i
// and dO_i, the P and dS tiles (padded) and L_i and D_i.
func flash2BwdSharedBytes(t Tile) int {
	return 4 * (2*t.Bc*(t.D+1) + 2*t.Br*t.D + 2*t.Br*(t.Bc+1) + 2*t.Br)
}

func flash2BwdLaunches(c *Config, t Tile) Launches {
	return fusedBwdLaunches(c, t, "flash2_bwd", flash2BwdSharedBytes(t), 4)
}

// fusedBwdLaunches are a flash backward's three kernels at tile t, named
// prefix_pre, prefix_main and prefix_dq, its main kernel taking shared
// bytes of dynamic shared memory and its dO elem bytes an element (its
// gradients, D and the dQ accumulator are float32 whatever its inputs).
func fusedBwdLaunches(c *Config, t Tile, prefix string, shared, elem int) Launches {
	name := func(k string) string { return fmt.Sprintf("%s_%s_br%d_bc%d_d%d", prefix, k, t.Br, t.Bc, t.D) }
	bh := c.Batch * c.Heads
	extra := backwardBuffers(c, 4)
	extra[BufDO] = int64(bh) * int64(c.N) * int64(c.D) * int64(elem)
	return Launches{
		Kernels: []Launch{
			{Name: name("pre"), Grid: [3]int{c.Tr(), bh, 1}, Threads: t.Threads,
				Args: []Arg{Buf(BufDO), Buf(BufO), Buf(BufLSE), Buf(BufDelta), Buf(BufDQ), Val(c.N)}},
			{Name: name("main"), Grid: [3]int{c.Tc(), bh, 1}, Threads: t.Threads, Shared: shared,
				Args: []Arg{Buf(BufQ), Buf(BufK), Buf(BufV), Buf(BufDO), Buf(BufLSE), Buf(BufDelta), Buf(BufDQ), Buf(BufDK), Buf(BufDV),
					Val(c.N), ScaleArg(c), CausalArg(c)}},
			{Name: name("dq"), Grid: [3]int{c.Tr(), bh, 1}, Threads: t.Threads,
				Args: []Arg{Buf(BufDQ), Val(c.N), ScaleArg(c)}},
		},
		Extra: extra,
	}
}

// flash2BwdSlot: the pre and dq kernels write a record per q-tile block;
// the main kernel has a slot per step, (kv-tile j, q-tile i), since its
// block of kv-tile j records only the traced q-tiles of its walk.
func flash2BwdSlot(c *Config, s StepRef) (launch, index int) {
	switch s.Kind {
	case instrument.KindBwdPre:
		return 0, s.BH*c.Tr() + s.I
	case instrument.KindBwdStep:
		return 1, (s.BH*c.Tc()+s.J)*c.Tr() + s.I
	}
	return 2, s.BH*c.Tr() + s.I
}

func flash2BwdSlots(c *Config, launch int) int {
	if launch == 1 {
		return c.Batch * c.Heads * c.Tc() * c.Tr()
	}
	return c.Batch * c.Heads * c.Tr()
}

// bwdPhases: every q-tile's pre, then kv-tile j's block in phase 1+j, then
// every q-tile's dq; q-tile i is seen by the kv-tiles flash2's forward
// visits (flash2KVTiles), since a kv-tile masked from all of i's rows adds
// nothing to it.
func flash2BwdRecords(c *Config, i int) []kindCount {
	out := []kindCount{{kind: instrument.KindBwdPre, n: 1, phase: 0, j0: 0}}
	for j := range flash2KVTiles(c, i) {
		out = append(out, kindCount{kind: instrument.KindBwdStep, n: 1, phase: 1 + j, j0: j})
	}
	return append(out, kindCount{kind: instrument.KindBwdDQ, n: 1, phase: c.Tc() + 1, j0: 0})
}

// flash2BwdTraffic is the device-memory traffic of one record: pre reads dO,
// O and L and writes D and the zeroed dQ; a step reads Q_i, dO_i, L_i and
// D_i, and K_j and V_j at the block's first q-tile, adds dQ_i (an atomic
// add per element, counted as written) and writes dK_j and dV_j at its
// last; dq reads and writes dQ_i.
func flash2BwdTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	return fusedBwdTraffic(c, r, 4)
}

// fusedBwdTraffic is flash2BwdTraffic with Q, K, V, dO and O elem bytes an
// element; L, D, dQ, dK and dV are float32 whatever the inputs.
func fusedBwdTraffic(c *Config, r *instrument.Record, elem uint64) (read, written uint64) {
	const f32 = 4
	rows, cols, d := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindBwdPre:
		return 2*rows*d*elem + rows*f32, rows*f32 + rows*d*f32
	case instrument.KindBwdStep:
		read = 2*rows*d*elem + 2*rows*f32
		if r.I == bwdFirstQTile(c, r.J) {
			read += 2 * cols * d * elem
		}
		written = rows * d * f32
		if r.I == c.Tr()-1 {
			written += 2 * cols * d * f32
		}
		return read, written
	case instrument.KindBwdDQ:
		return rows * d * f32, rows * d * f32
	}
	return 0, 0
}

// flash2BwdBlock emits q-tile i's records of batch-head bh, each in its
// phase, from the batch-head's walk (bwdHead).
func flash2BwdBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	backwardBlock(c, in, bh, i, emit, flash2BwdRecords, func() *bwdHead { return flash2BwdMirror.head(c, in, bh) })
}

// bwdArith is what the backward kernel leaves to the GPU: its expf, and the
// order in which the kv-tiles' blocks add into dQ (atomics), which the
// mirror takes as kv-tile order. Tests swap in other admissible choices to
// try the GPU comparison's bound (kernelstest.Flash2BwdStep).
type bwdArith struct {
	exp        func(float32) float32
	blockOrder func(tc int) []int
	// dqAdd is one block's add into dQ in device memory: the mirror's is a
	// plain rounded sum; the GPU's atom.add.f32 flushes subnormal inputs
	// and results to zero, which the bound allows for.
	dqAdd func(dq, part float32) float32
}

var flash2BwdMirror = bwdArith{exp: exp32, blockOrder: func(tc int) []int {
	order := make([]int, tc)
	for j := range order {
		order[j] = j
	}
	return order
}, dqAdd: func(dq, part float32) float32 { return float32(dq + part) }}

// head runs the three kernels over batch-head bh, keeping the records of
// the traced q-tiles.
func (a bwdArith) head(c *Config, in *Inputs, bh int) *bwdHead {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	traced := c.TracedQ()
	h := newBwdHead()
	record := func(r *instrument.Record) *instrument.Record {
		r.BytesRead, r.BytesWritten = flash2BwdTraffic(c, r)
		return r
	}

	// pre: D = rowsum(dO ∘ O), one row at a time over d in order.
	delta := make([]float32, n)
	for r := range n {
		delta[r] = dot32(in.DO[r*d:(r+1)*d], in.O[r*d:(r+1)*d])
	}
	for i := traced.Lo; i < traced.Hi; i++ {
		r0, rows := i*br, c.RowsValidOf(i)
		h.q[[2]int{int(instrument.KindBwdPre), i}] = record(&instrument.Record{Kind: instrument.KindBwdPre, BH: bh, I: i, J: -1, RowsValid: rows,
			DO: tileRows(in.DO, d, r0, rows, br), O: tileRows(in.O, d, r0, rows, br),
			LSE: tileRows(in.LSE, 1, r0, rows, br), Delta: tileRows(delta, 1, r0, rows, br)})
	}

	// main: kv-tile j's block, q-tiles in order; dQ gathers every block's
	// part in the order the blocks run (kv-tile order, in the mirror). A
	// traced step needs the block's earlier q-tiles (dK_j and dV_j hold
	// them) and no later one, so the walk stops at the last traced q-tile;
	// dQ is summed for the traced rows alone. It gives up when the run
	// stops (nil: nothing is emitted).
	dq := make([]float32, n*d)
	p, ds := make([]float32, br*bc), make([]float32, br*bc)
	for _, j := range a.blockOrder(c.Tc()) {
		c0, cols := j*bc, c.ColsValidOf(j)
		k, v := tileRows(in.K, d, c0, cols, bc), tileRows(in.V, d, c0, cols, bc)
		dk, dv := make([]float32, bc*d), make([]float32, bc*d)
		for i := bwdFirstQTile(c, j); i < traced.Hi; i++ {
			if in.stopped() { // a block's walk is seconds at N=4096
				return nil
			}
			r0, rows := i*br, c.RowsValidOf(i)
			keep := traced.Contains(i)
			var rec *instrument.Record
			if keep {
				rec = &instrument.Record{Kind: instrument.KindBwdStep, BH: bh, I: i, J: j, RowsValid: rows, ColsValid: cols,
					S: make([]float32, br*bc), P: make([]float32, br*bc), DP: make([]float32, br*bc), DS: make([]float32, br*bc),
					DQ: make([]float32, br*d)}
			}
			clear(p)
			clear(ds)
			// S and P, then dP and dS, element by element; padding rows and
			// columns stay zero.
			for r := range rows {
				q, do := in.Q[(r0+r)*d:(r0+r+1)*d], in.DO[(r0+r)*d:(r0+r+1)*d]
				for col := range cols {
					s := negInf
					if !c.Causal || c0+col <= r0+r {
						s = float32(dot32(q, k[col*d:(col+1)*d]) * scale)
					}
					pe := a.exp(s - in.LSE[r0+r])
					dp := dot32(do, v[col*d:(col+1)*d])
					p[r*bc+col] = pe
					ds[r*bc+col] = float32(pe * float32(dp-delta[r0+r]))
					if keep {
						rec.S[r*bc+col], rec.P[r*bc+col], rec.DP[r*bc+col] = s, pe, dp
					}
				}
			}
			// dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i: each element adds the
			// step's rows in order into its accumulator.
			for col := range cols {
				for x := range d {
					av, ak := dv[col*d+x], dk[col*d+x]
					for r := range rows {
						av = float32(av + float32(p[r*bc+col]*in.DO[(r0+r)*d+x]))
						ak = float32(ak + float32(ds[r*bc+col]*in.Q[(r0+r)*d+x]))
					}
					dv[col*d+x], dk[col*d+x] = av, ak
				}
			}
			// dQ_i += dS K_j: the step's sum over its columns in order, then
			// one add into device memory (of a traced q-tile's rows: no
			// other row's dQ is shown).
			for r := range rows * btoi(keep) {
				for x := range d {
					var acc float32
					for col := range cols {
						acc = float32(acc + float32(ds[r*bc+col]*k[col*d+x]))
					}
					dq[(r0+r)*d+x] = a.dqAdd(dq[(r0+r)*d+x], acc)
					if keep {
						rec.DQ[r*d+x] = acc
					}
				}
			}
			if keep {
				copy(rec.DS, ds)
				rec.DV, rec.DK = append([]float32(nil), dv...), append([]float32(nil), dk...)
				h.tiles[[3]int{int(instrument.KindBwdStep), i, j}] = record(rec)
			}
		}
	}

	// dq: dQ · scale, once every block has added.
	for i := traced.Lo; i < traced.Hi; i++ {
		r0, rows := i*br, c.RowsValidOf(i)
		rec := &instrument.Record{Kind: instrument.KindBwdDQ, BH: bh, I: i, J: -1, RowsValid: rows, DQ: make([]float32, br*d)}
		for e := range rows * d {
			rec.DQ[e] = float32(dq[r0*d+e] * scale)
		}
		h.q[[2]int{int(instrument.KindBwdDQ), i}] = record(rec)
	}
	return h
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FamilyFlash2Bwd: float32 backward: P recomputed, dQ added in device memory.
var FamilyFlash2Bwd = &Family{Name: "flash2_bwd", Traffic: flash2BwdTraffic, block: flash2BwdBlock}
