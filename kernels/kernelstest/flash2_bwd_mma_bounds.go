package kernelstest

import (
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Flash2BwdMMAStep is Of for flash2_bwd_mma's records. The pre and dq
// kernels are flash2_bwd's operation for operation (D over d in order, each
// product of two bf16 exact), so their bounds are Flash2BwdStep's: D agrees
// bit for bit, and the finished dQ differs by what its parts do plus the
// atomics' order and flush. A step parts from the mirror where the GPU's
// arithmetic is not pinned down: the sum inside each mma (mmaSlack, as for
// flash2_fast), ex2.approx (ex2Slack), and the bf16 roundings that a small
// difference can tip to the next bf16 value (bf16Flip). To first order:
//
//	S_raw, dP  d/16 mmas each: Δ = Σ_chunks mmaSlack(16, |acc| + Σ|products|)
//	S          the trace's S_raw·scale: scale·ΔS_raw + 2u|S|
//	P          x = fma(S_raw, sl2, −L·log2 e), L·log2 e the same float32 on
//	           both sides: Δx = sl2·ΔS_raw + 2u|x|, ΔP = ex2Slack(P, Δx)
//	dS         P·(dP − D): ΔP·|dP − D| + P·ΔdP + 2u·P·|dP − D| + 2u|dS|
//	dV_j       += Br/16 mmas of bf16(P)·dO: Σ_chunks (mmaSlack +
//	           Σ_r bf16Flip(P, ΔP)·|dO|), carried from step to step
//	dK_j       likewise with bf16(dS) and Q
//	dQ part    Bc/16 mmas of bf16(dS)·K_j from zero: Σ_chunks (mmaSlack +
//	           Σ_c bf16Flip(dS, ΔdS)·|K|)
func (b *Bounds) Flash2BwdMMAStep(m *instrument.Record) map[string][]float64 {
	if m.Kind != instrument.KindBwdStep {
		return b.Flash2BwdStep(m)
	}
	h := b.h
	br, bc, d := h.Br, h.Bc, h.D
	scale := float64(h.Scale)
	sl2 := float32(h.Scale * float32(1.4426950408889634))
	st := b.bwdHead(m.BH)
	dv, dk, bdv, bdk := st.step(h, m)
	q, k, v, do := b.q[m.BH], b.k[m.BH], b.v[m.BH], st.do

	// chunked is Σ_x a[x]·b[x] over n terms in mma chunks of 16 and the
	// sum of their mmaSlack, with extra(x) added per term.
	chunked := func(n int, term func(x int) float64, extra func(x int) float64) (sum, slack float64) {
		for x0 := 0; x0 < n; x0 += 16 {
			abs := math.Abs(sum)
			for x := x0; x < min(n, x0+16); x++ {
				t := term(x)
				sum += t
				abs += math.Abs(t)
				slack += extra(x)
			}
			slack += mmaSlack(min(16, n-x0), abs)
		}
		return sum, slack
	}
	none := func(int) float64 { return 0 }

	bs, bp, bdp, bds := make([]float64, br*bc), make([]float64, br*bc), make([]float64, br*bc), make([]float64, br*bc)
	for r := range m.RowsValid {
		g := m.I*br + r
		lb := float64(float32(float32(st.lse[g]) * float32(1.4426950408889634)))
		for c := range m.ColsValid {
			e, kc := r*bc+c, m.J*bc+c
			_, dsRaw := chunked(d, func(x int) float64 { return float64(q[g*d+x]) * float64(k[kc*d+x]) }, none)
			_, ddp := chunked(d, func(x int) float64 { return float64(v[kc*d+x]) * do[g*d+x] }, none)
			bdp[e] = ddp
			if math.IsInf(float64(m.S[e]), -1) {
				continue // masked: S = −Inf and P = 0 on both sides
			}
			bs[e] = scale*dsRaw + 2*u*math.Abs(float64(m.S[e]))
			sRaw := float64(m.S[e]) / scale
			x := sRaw*float64(sl2) - lb
			bp[e] = ex2Slack(float64(m.P[e]), float64(sl2)*dsRaw+2*u*math.Abs(x))
			dpd := math.Abs(float64(m.DP[e]) - st.delta[g])
			bds[e] = bp[e]*dpd + float64(m.P[e])*ddp + 2*u*float64(m.P[e])*dpd + 2*u*math.Abs(float64(m.DS[e]))
		}
	}

	// The accumulators, the step's rows in chunks of 16 into each.
	for c := range m.ColsValid {
		for x := range d {
			e := c*d + x
			term := func(ops []float32, in func(r int) float64) func(r int) float64 {
				return func(r int) float64 {
					if r >= m.RowsValid {
						return 0
					}
					return float64(kernels.RoundBF16(ops[r*bc+c])) * in(r)
				}
			}
			flip := func(ops []float32, bounds []float64, in func(r int) float64) func(r int) float64 {
				return func(r int) float64 {
					if r >= m.RowsValid {
						return 0
					}
					return bf16Flip(float64(ops[r*bc+c]), bounds[r*bc+c]) * math.Abs(in(r))
				}
			}
			dO := func(r int) float64 { return do[(m.I*br+r)*d+x] }
			qv := func(r int) float64 { return float64(q[(m.I*br+r)*d+x]) }
			// Each chunk's slack is of |acc| + Σ|products|: the accumulator
			// going in is the mirror's previous value.
			_, sv := chunked(br, term(m.P, dO), flip(m.P, bp, dO))
			_, sk := chunked(br, term(m.DS, qv), flip(m.DS, bds, qv))
			bdv[e] += sv + mmaCarry(br, dv[e])
			bdk[e] += sk + mmaCarry(br, dk[e])
			dv[e], dk[e] = float64(m.DV[e]), float64(m.DK[e]) // walk on the mirror's own values
		}
	}

	bdq := make([]float64, br*d)
	for r := range m.RowsValid {
		g := m.I*br + r
		st.parts[g]++
		for x := range d {
			kx := func(c int) float64 {
				if c >= m.ColsValid {
					return 0
				}
				return float64(k[(m.J*bc+c)*d+x])
			}
			_, s := chunked(bc, func(c int) float64 { return float64(kernels.RoundBF16(m.DS[r*bc+c])) * kx(c) },
				func(c int) float64 { return bf16Flip(float64(m.DS[r*bc+c]), bds[r*bc+c]) * math.Abs(kx(c)) })
			bdq[r*d+x] = s
			st.partAbs[g*d+x] += math.Abs(float64(m.DQ[r*d+x]))
			st.partB[g*d+x] += s
		}
	}
	return map[string][]float64{"s": bs, "p": bp, "dp": bdp, "ds": bds,
		"dv": append([]float64(nil), bdv...), "dk": append([]float64(nil), bdk...), "dq": bdq}
}

// mmaCarry is what an accumulator's value going into a step adds to its
// chunks' mmaSlack: each of the step's n/16 mmas takes |acc| into its sum.
func mmaCarry(n int, acc float64) float64 {
	return float64((n+15)/16) * mmaSlack(16, math.Abs(acc))
}
