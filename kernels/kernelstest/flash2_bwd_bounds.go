package kernelstest

import (
	"fmt"
	"math"

	"flashstep/instrument"
)

// bwdState is the walk of one backward batch-head: each kv-tile block's dV
// and dK accumulators with their bounds, and each row's dQ parts so far.
type bwdState struct {
	dv, dk, bdv, bdk map[int][]float64 // by kv-tile: Bc×d
	next             map[int]int       // by kv-tile: the q-tile its next step must be
	partAbs, partB   []float64         // by row and column of dQ: Σ|part| and Σ its bounds
	parts            []int             // by row: the parts added
	delta            []float64         // D by row, from the pre records
	lse              []float64         // L by row, from the pre records
	do               []float64         // dO, N×d, from the pre records
}

// Flash2BwdStep is Of for flash2_bwd's records. The GPU runs the mirror's
// float32 operations in the mirror's order, so everything before an exp
// agrees bit for bit: D, S, dP (bound 0). They part at P = exp(S − L),
// CUDA's expf against the mirror's (expBound), and from there:
//
//	ΔdS = ΔP·|dP − D| + 2u|dS|
//	dV_j, dK_j: each step adds its rows in order into the accumulator, so
//	  Δ grows by Σ_r (ΔP·|dO| + 2u|term| + 2u|partial sum|), with ΔdS and
//	  |Q| for dK
//	a step's dQ part: Σ_c (ΔdS·|K| + 2u|term| + 2u|partial sum|)
//	the finished dQ: the parts arrive by atomic adds in the GPU's order,
//	  not the mirror's kv-tile order, so beyond Σ Δpart each side's sum
//	  may round by up to (parts)·u·Σ|part|: 2u·parts·Σ|part| apart; and
//	  atom.add.f32 flushes subnormal inputs and results to zero, up to
//	  2⁻¹²⁶ lost twice per add (a one-hot row's dQ can be all subnormal
//	  parts); then the scale, one more rounding: Δ = scale·(that) + 2u|dQ|
//
// The walk needs every step of a block (bwdState.step).
func (b *Bounds) Flash2BwdStep(m *instrument.Record) map[string][]float64 {
	h := b.h
	br, bc, d := h.Br, h.Bc, h.D
	zero := func(n int) []float64 { return make([]float64, n) }
	st := b.bwdHead(m.BH)
	out := map[string][]float64{}
	switch m.Kind {
	case instrument.KindBwdPre:
		out["do"], out["o"], out["lse"], out["delta"] = zero(br*d), zero(br*d), zero(br), zero(br)
		for r := range m.RowsValid {
			st.delta[m.I*br+r] = float64(m.Delta[r])
			st.lse[m.I*br+r] = float64(m.LSE[r])
			for x := range d {
				st.do[(m.I*br+r)*d+x] = float64(m.DO[r*d+x])
			}
		}

	case instrument.KindBwdStep:
		dv, dk, bdv, bdk := st.step(h, m)
		q, k, do := b.q[m.BH], b.k[m.BH], st.do
		bp, bds := zero(br*bc), zero(br*bc)
		for r := range m.RowsValid {
			g := m.I*br + r
			for c := range m.ColsValid {
				e := r*bc + c
				bp[e] = expBound(float64(m.P[e]))
				bds[e] = bp[e]*math.Abs(float64(m.DP[e])-st.delta[g]) + 2*u*math.Abs(float64(m.DS[e]))
			}
		}
		out["s"], out["dp"], out["p"], out["ds"] = zero(br*bc), zero(br*bc), bp, bds
		for c := range m.ColsValid {
			for x := range d {
				e := c*d + x
				for r := range m.RowsValid {
					row := (m.I*br + r) * d
					tv := float64(m.P[r*bc+c]) * do[row+x]
					tk := float64(m.DS[r*bc+c]) * float64(q[row+x])
					dv[e] += tv
					dk[e] += tk
					bdv[e] += bp[r*bc+c]*math.Abs(do[row+x]) + 2*u*math.Abs(tv) + 2*u*math.Abs(dv[e])
					bdk[e] += bds[r*bc+c]*math.Abs(float64(q[row+x])) + 2*u*math.Abs(tk) + 2*u*math.Abs(dk[e])
				}
				dv[e], dk[e] = float64(m.DV[e]), float64(m.DK[e]) // walk on the mirror's own values
			}
		}
		out["dv"], out["dk"] = append([]float64(nil), bdv...), append([]float64(nil), bdk...)
		bdq := zero(br * d)
		for r := range m.RowsValid {
			g := m.I*br + r
			st.parts[g]++
			for x := range d {
				var acc, bound float64
				for c := range m.ColsValid {
					kv := float64(k[(m.J*bc+c)*d+x])
					t := float64(m.DS[r*bc+c]) * kv
					acc += t
					bound += bds[r*bc+c]*math.Abs(kv) + 2*u*math.Abs(t) + 2*u*math.Abs(acc)
				}
				bdq[r*d+x] = bound
				st.partAbs[g*d+x] += math.Abs(float64(m.DQ[r*d+x]))
				st.partB[g*d+x] += bound
			}
		}
		out["dq"] = bdq

	case instrument.KindBwdDQ:
		out["dq"] = st.finishedDQ(h, m)
	}
	return out
}

// bwdHead is the walk's state of batch-head bh, started at its first record.
func (b *Bounds) bwdHead(bh int) *bwdState {
	h := b.h
	zero := func(n int) []float64 { return make([]float64, n) }
	if b.bwd == nil {
		b.bwd = map[int]*bwdState{}
	}
	st := b.bwd[bh]
	if st == nil {
		st = &bwdState{dv: map[int][]float64{}, dk: map[int][]float64{}, bdv: map[int][]float64{}, bdk: map[int][]float64{},
			next: map[int]int{}, partAbs: zero(h.N * h.D), partB: zero(h.N * h.D), parts: make([]int, h.N), delta: zero(h.N),
			lse: zero(h.N), do: zero(h.N * h.D)}
		b.bwd[bh] = st
	}
	return st
}

// step checks that step m comes next in its block's walk (the walk needs
// every step of a block, so a trace must hold every q-tile: kernelstest's
// random and edge runs of a backward kernel do; it panics otherwise) and
// returns the block's accumulators and their bounds, to be carried forward.
func (st *bwdState) step(h *instrument.Header, m *instrument.Record) (dv, dk, bdv, bdk []float64) {
	if h.TracedQ.Lo != 0 || h.TracedQ.Hi != h.Tr() {
		panic("kernelstest: a backward trace's bounds need every q-tile traced")
	}
	first := 0
	if h.Causal {
		first = m.J * h.Bc / h.Br
	}
	if _, seen := st.next[m.J]; !seen {
		n := h.Bc * h.D
		st.next[m.J] = first
		st.dv[m.J], st.dk[m.J], st.bdv[m.J], st.bdk[m.J] = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	}
	if m.I != st.next[m.J] {
		panic(fmt.Sprintf("kernelstest: kv-tile %d's step at q-tile %d, expected %d", m.J, m.I, st.next[m.J]))
	}
	st.next[m.J]++
	return st.dv[m.J], st.dk[m.J], st.bdv[m.J], st.bdk[m.J]
}

// finishedDQ bounds a bwd_dq record's dQ: the steps' parts, added by
// atomics in the GPU's order (not the mirror's kv-tile order), then scaled.
func (st *bwdState) finishedDQ(h *instrument.Header, m *instrument.Record) []float64 {
	scale := float64(h.Scale)
	bdq := make([]float64, h.Br*h.D)
	for r := range m.RowsValid {
		g := m.I*h.Br + r
		for x := range h.D {
			e := g*h.D + x
			// atom.add.f32 flushes subnormal inputs and results to zero:
			// each add may lose up to 2⁻¹²⁶ on the way in and again on the
			// way out.
			sum := st.partB[e] + 2*u*float64(st.parts[g])*st.partAbs[e] + 2*0x1p-126*float64(st.parts[g])
			bdq[r*h.D+x] = scale*sum + 2*u*math.Abs(float64(m.DQ[r*h.D+x]))
		}
	}
	return bdq
}

// NaiveBwdStep is Of for naive_bwd's records: zero for every element. The
// naive backward has no exp; its every operation is a float32 product or
// sum in the mirror's order, and dQ is summed by one thread in column
// order, so the GPU's trace must be the mirror's bit for bit.
func (b *Bounds) NaiveBwdStep(m *instrument.Record) map[string][]float64 {
	spec, _ := instrument.Spec(m.Kind)
	out := map[string][]float64{}
	for i := range spec.Arrays {
		out[spec.Arrays[i].Name] = make([]float64, b.h.ArrayLen(&spec.Arrays[i]))
	}
	return out
}
