package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2's backward on tensor cores: the CPU mirror of
// flash2_bwd_mma.cu. The loop and the three kernels are flash2_bwd's
// (flash2_bwd.go); the products are mma.sync chunks of bf16 operands into
// float32, and the exponential is flash2_fast's exp2 with the scale folded
// in. Operation by operation, as the kernel:
//
//	Q, K, V, dO, O  bf16 (InputsFor rounds them); L float32
//	D          Σ_x dO·O over d in order, float32 (each product exact)
//	S_raw      d/16 mma chunks of K_j's row · Q_i's row (mmaChunk)
//	sl2, Lb    float32(scale·log2 e), float32(L·log2 e)
//	P          ex2(fma(S_raw, sl2, −Lb)); 0 where causal masks it, and in
//	           the padding
//	dP         d/16 mma chunks of V_j's row · dO_i's row
//	dS         float32(P·float32(dP − D))
//	dV_j       += Br/16 mma chunks of bf16(P) · dO_i, over the q rows
//	dK_j       += Br/16 mma chunks of bf16(dS) · Q_i
//	dQ part    Bc/16 mma chunks of bf16(dS) · K_j, over the kv rows, from 0;
//	           added into the float32 accumulator (atomically on the GPU)
//	end        dK_j·scale and dV_j; dQ = accumulator·scale
//
// Its trace is flash2_bwd's, with S in natural units (float32(S_raw·scale),
// −Inf where masked) and P the float32 value before its rounding to bf16.
// The mma's internal sum, ex2.approx and the order of the blocks' atomic
// adds are the GPU's; the mirror takes one admissible choice of each
// (mmaBwdArith), and the GPU comparison's bound allows for the others.

var flash2BwdMMAKernel = &VariantInfo{
	Variant:  instrument.VariantFlash2BwdMMA,
	Title:    "FlashAttention-2 backward, tensor cores (bf16)",
	Summary:  "flash2_bwd's loop on tensor cores: bf16 Q, K, V, dO and P through mma.sync with float32 accumulation, exp2 with the scale folded in, Q_i and dO_i streamed by cp.async; float32 gradients.",
	DType:    instrument.DTypeBF16,
	Backward: true,
	Loop:     LoopFused,
	StepRun:  "/step?variant=flash2_bwd_mma&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:   "#2e1a80",
	BytesNote: "Each step reads Q_i and dO_i (bf16), L_i and D_i, and adds its float32 part of dQ_i into device memory; K_j and V_j are read once per block, " +
		"dK_j and dV_j written once at its end, in float32. Nothing N×N is read or written.",
	Words:   flash2BwdKernel.Words,
	GPURate: 150e12, CPURate: 0.4e9, // 210–240 TFLOP/s measured at N=4096 (docs/LADDER.md, run p)
	// A warp per 16 kv rows (TestInstancesMatchSource checks
	// flash2_bwd_mma.cu agrees). The 8-warp tiles halve the atomic adds
	// into dQ per product: at d = 128 the faster by 1.6× on the H100; at
	// d = 64 the 4-warp tile is faster by 1.2× (three blocks fit an SM:
	// main_blocks in the source). The faster tile of each d comes first:
	// the sweep runs it (SweepTile).
	Tiles: []Tile{{64, 64, 64, 128}, {64, 128, 128, 256}, {64, 128, 64, 256}, {64, 64, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH2_BWD_MMA_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads/32)
	},
	Launches:   flash2BwdMMALaunches,
	TraceSlots: &TraceSlots{Slot: flash2BwdSlot, Count: flash2BwdSlots}, // the same three kernels' grids
	Family:     FamilyFlash2BwdMMA,
	phases:     func(c *Config) int { return c.Tc() + 2 },
	records:    flash2BwdRecords,
}

// Flash2BwdMMASharedBytes is the main kernel's dynamic shared memory at t
// (flash2_bwd_mma::smem_bytes): K_j and V_j, two buffers each of Q_i and
// dO_i, and dSᵀ, in bf16; two buffers each of L_i·log2 e and D_i, and each
// warp's staged 16 × (pass + 8) part of dQ_i, float32.
func Flash2BwdMMASharedBytes(t Tile) int {
	staged := 0
	if warps, atoms := t.Bc/16, t.Br/16; atoms > 0 && warps >= atoms { // a compiled tile (the zero Tile has none)
		pass := min(64, t.D/(warps/atoms)) // dQ_i's columns a warp takes in one pass
		staged = warps * 16 * (pass + 8) * 4
	}
	return 2*(2*t.Bc*t.D+4*t.Br*t.D+t.Br*t.Bc) + 4*4*t.Br + staged
}

func flash2BwdMMALaunches(c *Config, t Tile) Launches {
	return fusedBwdLaunches(c, t, "flash2_bwd_mma", Flash2BwdMMASharedBytes(t), 2)
}

// flash2BwdMMATraffic is flash2BwdTraffic with Q, K, V, dO and O in bf16.
func flash2BwdMMATraffic(c *Config, r *instrument.Record) (read, written uint64) {
	return fusedBwdTraffic(c, r, 2)
}

func flash2BwdMMABlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	backwardBlock(c, in, bh, i, emit, flash2BwdRecords, func() *bwdHead { return mmaBwdMirror.head(c, in, bh) })
}

// mmaBwdArith is what flash2_bwd_mma leaves to the GPU: the sum inside one
// mma, ex2.approx, the order of the blocks' adds into dQ and the atomic
// add's flush of subnormals. Tests swap in other admissible choices to try
// the GPU comparison's bound.
type mmaBwdArith struct {
	mma        func(acc float32, a, b []float32, stride int) float32
	ex2        func(float32) float32
	blockOrder func(tc int) []int
	dqAdd      func(dq, part float32) float32
}

var mmaBwdMirror = mmaBwdArith{mma: mmaChunk, ex2: ex2, blockOrder: flash2BwdMirror.blockOrder, dqAdd: flash2BwdMirror.dqAdd}

// chunks is acc plus Σ_k a[k]·b[k·stride] over len(a) terms, as the kernel's
// mma.sync adds them: 16 at a time, each chunk's sum rounded into acc.
func (a mmaBwdArith) chunks(acc float32, x, y []float32, stride int) float32 {
	for k := 0; k < len(x); k += 16 {
		end := min(len(x), k+16)
		acc = a.mma(acc, x[k:end], y[k*stride:], stride)
	}
	return acc
}

// head runs the three kernels over batch-head bh, keeping the records of the
// traced q-tiles (flash2_bwd's head, in this kernel's arithmetic).
func (a mmaBwdArith) head(c *Config, in *Inputs, bh int) *bwdHead {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	sl2 := float32(scale * log2e32)
	traced := c.TracedQ()
	h := newBwdHead()
	record := func(r *instrument.Record) *instrument.Record {
		r.BytesRead, r.BytesWritten = flash2BwdMMATraffic(c, r)
		return r
	}

	// pre: D = rowsum(dO ∘ O) over d in order; L·log2 e as the main
	// kernel takes it.
	delta, lb := make([]float32, n), make([]float32, n)
	for r := range n {
		delta[r] = dot32(in.DO[r*d:(r+1)*d], in.O[r*d:(r+1)*d])
		lb[r] = float32(in.LSE[r] * log2e32)
	}
	for i := traced.Lo; i < traced.Hi; i++ {
		r0, rows := i*br, c.RowsValidOf(i)
		h.q[[2]int{int(instrument.KindBwdPre), i}] = record(&instrument.Record{Kind: instrument.KindBwdPre, BH: bh, I: i, J: -1, RowsValid: rows,
			DO: tileRows(in.DO, d, r0, rows, br), O: tileRows(in.O, d, r0, rows, br),
			LSE: tileRows(in.LSE, 1, r0, rows, br), Delta: tileRows(delta, 1, r0, rows, br)})
	}

	// main: as flash2_bwd's walk (up to the last traced q-tile, dQ summed
	// for the traced rows alone, given up when the run stops), the products
	// in mma chunks. The tiles are padded with zero rows as the kernel's
	// shared tiles are; Pᵀ and dSᵀ are kept column by column (a kv row's
	// values over the q rows), the layout the kernel's Pᵀ·dO and dSᵀ·Q read.
	dq := make([]float32, n*d)
	pT, dsT := make([]float32, bc*br), make([]float32, bc*br) // bf16 values, [col][row]
	dsR := make([]float32, br*bc)                             // bf16(dS), [row][col], for dS·K_j
	for _, j := range a.blockOrder(c.Tc()) {
		c0, cols := j*bc, c.ColsValidOf(j)
		k, v := tileRows(in.K, d, c0, cols, bc), tileRows(in.V, d, c0, cols, bc)
		kT := transposed(k, bc, d) // [x][kv row]: dS·K_j walks K_j's columns
		dk, dv := make([]float32, bc*d), make([]float32, bc*d)
		for i := bwdFirstQTile(c, j); i < traced.Hi; i++ {
			if in.stopped() { // a block's walk is seconds at N=4096
				return nil
			}
			r0, rows := i*br, c.RowsValidOf(i)
			q, do := tileRows(in.Q, d, r0, rows, br), tileRows(in.DO, d, r0, rows, br)
			qT, doT := transposed(q, br, d), transposed(do, br, d) // [x][q row]
			keep := traced.Contains(i)
			var rec *instrument.Record
			if keep {
				rec = &instrument.Record{Kind: instrument.KindBwdStep, BH: bh, I: i, J: j, RowsValid: rows, ColsValid: cols,
					S: make([]float32, br*bc), P: make([]float32, br*bc), DP: make([]float32, br*bc), DS: make([]float32, br*bc),
					DQ: make([]float32, br*d)}
			}
			for col := range bc {
				for r := range br {
					sRaw := a.chunks(0, k[col*d:(col+1)*d], q[r*d:], 1)
					dp := a.chunks(0, v[col*d:(col+1)*d], do[r*d:], 1)
					var s, p, ds float32
					switch {
					case r >= rows || col >= cols: // padding: zero
					case c.Causal && c0+col > r0+r:
						s = negInf
					default:
						s = float32(sRaw * scale)
						p = a.ex2(fma32(sRaw, sl2, -lb[r0+r]))
					}
					if r < rows {
						ds = float32(p * float32(dp-delta[r0+r]))
					} else {
						ds = float32(p * dp) // D of a padding row is 0
					}
					pT[col*br+r], dsT[col*br+r], dsR[r*bc+col] = RoundBF16(p), RoundBF16(ds), RoundBF16(ds)
					if keep {
						e := r*bc + col
						rec.S[e], rec.P[e], rec.DP[e], rec.DS[e] = s, p, dp, ds
					}
				}
			}
			// dV_j += bf16(Pᵀ)·dO_i and dK_j += bf16(dSᵀ)·Q_i, chunks of 16
			// q rows in order.
			for col := range bc {
				for x := range d {
					dv[col*d+x] = a.chunks(dv[col*d+x], pT[col*br:(col+1)*br], doT[x*br:], 1)
					dk[col*d+x] = a.chunks(dk[col*d+x], dsT[col*br:(col+1)*br], qT[x*br:], 1)
				}
			}
			// dQ_i's part, bf16(dS)·K_j in chunks of 16 kv rows from zero,
			// then one add into the accumulator (of a traced q-tile's rows:
			// no other row's dQ is shown).
			for r := range rows * btoi(keep) {
				for x := range d {
					part := a.chunks(0, dsR[r*bc:(r+1)*bc], kT[x*bc:], 1)
					dq[(r0+r)*d+x] = a.dqAdd(dq[(r0+r)*d+x], part)
					rec.DQ[r*d+x] = part
				}
			}
			if keep {
				rec.DV, rec.DK = append([]float32(nil), dv...), append([]float32(nil), dk...)
				h.tiles[[3]int{int(instrument.KindBwdStep), i, j}] = record(rec)
			}
		}
	}

	// dq: the accumulator · scale.
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

// FamilyFlash2BwdMMA: bf16 backward on tensor cores, float32 gradients.
var FamilyFlash2BwdMMA = &Family{Name: "flash2_bwd_mma", Traffic: flash2BwdMMATraffic, block: flash2BwdMMABlock}
