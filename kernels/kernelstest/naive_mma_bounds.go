package kernelstest

import (
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The bound between naive_mma's GPU trace and its mirror's. The softmax is
// naive's float32 code unchanged; what differs is the tensor cores' products
// and the bf16 rounding of P:
//
//   - S: each of the d/16 mma chunks may sum its terms in another order
//     (mmaSlack, as for flash2_fast), so ΔS = scale·Σ mmaSlack + 2u|S|.
//   - m = max S moves by at most the largest ΔS of its row.
//   - l = Σ exp(S − m): each term moves by e·(exp(ΔS_c + Δm) − 1) on top of
//     expf's own error, and the lane sums and the butterfly round as naive's.
//   - P = bf16(exp(S − m)/l): the float32 value moves by (Δe + p·Δl)/l plus
//     its roundings; the bf16 values of the two sides then differ by at most
//     the bf16 span of that interval (zero unless it holds a rounding
//     boundary, then one bf16 ulp).
//   - O = Σ chunks of bf16(P)·V: each chunk's mmaSlack plus Σ ΔP·|v|.
//   - The epilogue's O is the last accumulator; LSE = m + log l moves by
//     Δm + Δl/l and its roundings.

// naiveMMAState is one row's walk.
type naiveMMAState struct {
	s, bs     []float64 // the row of S and its bound
	m, bm     float64
	l, bl     float64
	acc, bacc []float64
}

// NaiveMMAStep is Of for naive_mma's records.
func (b *Bounds) NaiveMMAStep(m *instrument.Record) map[string][]float64 {
	h := b.h
	br, bc, d, n := h.Br, h.Bc, h.D, h.N
	scale := float64(h.Scale)
	zero := func(k int) []float64 { return make([]float64, k) }
	out := map[string][]float64{}
	row := func(r int) *naiveMMAState {
		key := [2]int{m.BH, m.I*br + r}
		st := b.naiveMMA[key]
		if st == nil {
			st = &naiveMMAState{s: zero(n), bs: zero(n), acc: zero(d), bacc: zero(d)}
			b.naiveMMA[key] = st
		}
		return st
	}
	switch m.Kind {
	case instrument.KindScores:
		q, k := b.q[m.BH], b.k[m.BH]
		bs := zero(br * bc)
		for r := range m.RowsValid {
			st := row(r)
			qr := q[(m.I*br+r)*d:]
			for c := range m.ColsValid {
				col := m.J*bc + c
				s := float64(m.S[r*bc+c])
				st.s[col] = s
				if math.IsInf(s, -1) {
					continue // masked: −Inf on both sides
				}
				var slack, acc float64
				for k0 := 0; k0 < d; k0 += 16 {
					k1 := min(k0+16, d)
					var abs float64
					for x := k0; x < k1; x++ {
						p := float64(qr[x]) * float64(k[col*d+x])
						acc += p
						abs += math.Abs(p)
					}
					slack += mmaSlack(k1-k0, math.Abs(acc)+abs)
				}
				st.bs[col] = scale*slack + 2*u*math.Abs(s)
				bs[r*bc+c] = st.bs[col]
			}
		}
		out["s"] = bs

	case instrument.KindSoftmax:
		bmOut, bl := zero(br), zero(br)
		for r := range m.RowsValid {
			st := row(r)
			st.m, st.l = float64(m.MNew[r]), float64(m.L[r])
			for c := range n {
				if !math.IsInf(st.s[c], -1) {
					st.bm = math.Max(st.bm, st.bs[c])
				}
			}
			var be float64
			for c := range n {
				if math.IsInf(st.s[c], -1) {
					continue
				}
				e := math.Exp(st.s[c] - st.m)
				be += e*math.Expm1(st.bs[c]+st.bm) + expBound(e)
			}
			st.bl = be + 2*u*float64((n+31)/32+5)*st.l
			bmOut[r], bl[r] = st.bm, st.bl
		}
		out["m"], out["l"] = bmOut, bl

	case instrument.KindPV:
		v := b.v[m.BH]
		bp, bo := zero(br*bc), zero(br*d)
		for r := range m.RowsValid {
			st := row(r)
			for c := range m.ColsValid {
				col := m.J*bc + c
				if math.IsInf(st.s[col], -1) || st.l == 0 {
					continue // P = 0 on both sides
				}
				e := math.Exp(st.s[col] - st.m)
				p := e / st.l
				de := e*math.Expm1(st.bs[col]+st.bm) + expBound(e)
				dp := (de+p*st.bl)/st.l + 4*u*p + 3e-45
				bp[r*bc+c] = bf16Span(p, dp)
			}
			for x := range d {
				for c0 := 0; c0 < m.ColsValid; c0 += 16 {
					c1 := min(c0+16, m.ColsValid)
					var abs float64
					for c := c0; c < c1; c++ {
						vv := float64(v[(m.J*bc+c)*d+x])
						t := float64(m.P[r*bc+c]) * vv
						st.acc[x] += t
						abs += math.Abs(t)
						st.bacc[x] += bp[r*bc+c] * math.Abs(vv)
					}
					st.bacc[x] += mmaSlack(c1-c0, math.Abs(st.acc[x])+abs)
				}
				bo[r*d+x] = st.bacc[x]
			}
		}
		out["p"], out["o"] = bp, bo

	case instrument.KindEpilogue:
		bo, blse := zero(br*d), zero(br)
		for r := range m.RowsValid {
			st := row(r)
			copy(bo[r*d:(r+1)*d], st.bacc)
			if st.l > 0 {
				blse[r] = st.bm + st.bl/st.l + 4*u*math.Abs(math.Log(st.l)) + 2*u*math.Abs(float64(m.LSE[r]))
			}
		}
		out["o"], out["lse"] = bo, blse
	}
	return out
}

// bf16Span bounds |bf16(p') − bf16(p”)| for any float32 p', p” within dp
// of p: the bf16 values at the two ends of the interval.
func bf16Span(p, dp float64) float64 {
	lo := math.Nextafter32(float32(p-dp), float32(math.Inf(-1)))
	hi := math.Nextafter32(float32(p+dp), float32(math.Inf(1)))
	return float64(kernels.RoundBF16(hi)) - float64(kernels.RoundBF16(lo))
}
