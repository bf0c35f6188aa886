package kernelstest

import (
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// fastState is a bf16 flash block's mirror state and its bounds after its
// latest step (flash2_fast's and flash2_mma's); m's bound is in the units
// the kernel keeps m in: raw (unscaled) for flash2_fast, natural for
// flash2_mma.
type fastState struct {
	bm    []float64 // the bound of the row max, kept units
	lt    []float64 // the bound of Σ_t l_t, the quad's partial sums
	l, bl []float64 // the full l and its bound
	o, bo []float64 // O and its bound
}

// mmaSlack is how far two admissible m16n8k16 sums of k products may lie
// apart, given |acc| + Σ|products|.
func mmaSlack(k int, abs float64) float64 { return float64(k+4) * 2 * u * abs }

// ex2Slack is how far the GPU's ex2.approx(x') may lie from the mirror's
// ex2(x) = p when |x' − x| ≤ dx.
func ex2Slack(p, dx float64) float64 {
	return p*math.Expm1(dx*math.Ln2) + 5*u*p + 0x1p-125
}

// absFinite is |x|, or 0 for ±Inf (a masked value, equal on both sides).
func absFinite(x float64) float64 {
	if math.IsInf(x, 0) {
		return 0
	}
	return math.Abs(x)
}

// bf16Flip bounds |bf16(p') − bf16(p)| for any float32 p' within dp of p.
func bf16Flip(p, dp float64) float64 {
	if dp == 0 {
		return 0
	}
	lo, hi := float32(p-dp), float32(p+dp)
	if float64(lo) > p-dp {
		lo = math.Nextafter32(lo, float32(math.Inf(-1)))
	}
	if float64(hi) < p+dp {
		hi = math.Nextafter32(hi, float32(math.Inf(1)))
	}
	p16 := float64(kernels.RoundBF16(float32(p)))
	return math.Max(float64(kernels.RoundBF16(hi))-p16, p16-float64(kernels.RoundBF16(lo)))
}

// Flash2FastStep is Of for flash2_fast's flash_step and epilogue records:
// the bound on every element of S, m_old, m_new, α, P, l and O of a step,
// and of O and the LSE of an epilogue, between a GPU trace and the mirror's
// record m. Records must come in trace order, after their batch-head's
// inputs record (which carries the bf16 Q, K, V). Of calls it for
// flash2_fast traces; CompareRecords then holds the GPU's record to it.
//
// How far flash2_fast's GPU trace may lie from its mirror's (bf16 inputs,
// mma.sync with float32 accumulation, ex2.approx). Both take the same bf16
// Q, K, V (kernels.InputsFor) and run the same float32 operations in the
// same order, so they differ only where the GPU's arithmetic is not pinned
// down, and by what those differences become downstream. u = 2⁻²⁴; "2u per
// rounding" allows a rounding on each side. To first order:
//
//   - One mma (k ≤ 16 products, each exact: bf16·bf16 has 16 significant
//     bits) adds its products to the accumulator in an order, and at an
//     internal precision, that PTX leaves unspecified. Assumption: the
//     tensor core behaves like a sum of the k+1 terms in some order, or a
//     multi-operand adder that aligns them to the largest exponent, keeping
//     at least float32's 24 bits of each and truncating the rest (as
//     measured on Volta to Ampere: Fasi, Higham, Mikaitis, Pranesh 2021),
//     then rounds or truncates once more. Either way it is within
//     (k+2)·2u·(|acc| + Σ|products|) of exact; the mirror's model (the chunk
//     summed in float64, rounded, then added) within 3u of the same. So one
//     mma's results differ by at most
//     mmaSlack(k) = (k+4)·2u·(|acc| + Σ|products|), plus the difference
//     the accumulators already had.
//   - S_raw, d/16 mmas: ΔS_raw = Σ_chunks mmaSlack. The trace's S =
//     S_raw·scale: ΔS = scale·ΔS_raw + 2u|S|.
//   - m_raw = max(m_old, max S_raw), max is 1-Lipschitz: Δm_new =
//     max(Δm_old, max_c ΔS_raw,c); the trace's m: scale·Δm + 2u|m|.
//   - mb = m·sl2: Δmb = sl2·Δm + 2u|mb|. Each exponent x = fma(s, sl2, −mb)
//     moves by Δx = sl2·Δs + Δmb + 2u|x|, and ex2.approx is within 2 ulp of
//     2^x correctly rounded (PTX ISA, ex2), the mirror within ½ ulp, an ulp
//     at most 2u of the value: Δp ≤ p·(2^Δx − 1) + 5u·p, plus 2⁻¹²⁵ for a
//     result near 2⁻¹²⁶ that .ftz flushes on one side only. α likewise,
//     with s = m_old. A masked score, or m_old = −Inf, gives exactly 0 on
//     both sides.
//   - l: each thread's l_t = fma(α, l_t, Σ(p0 + p1)) over Bc/8 column
//     atoms is 2·⌈Bc/8⌉ + 1 roundings, none of a value above the new l_t;
//     the four partials sum to l. So Σ_t Δl_t moves to
//     α·Σ_t Δl_t + Δα·l_old + Σ_c Δp_c + (2⌈Bc/8⌉ + 1)·2u·l, and the full
//     l = (l0 + l1) + (l2 + l3) adds 2·2u·l.
//   - O = O·α, then Bc/16 mmas of bf16(p)·V: ΔO moves to
//     α·ΔO + Δα·|O| + 2u|O·α| + Σ_chunks (mmaSlack + Σ_c Δbf16(p_c)·|v_c|).
//     bf16(p) is where a small Δp can become a large one: when p's
//     interval [p − Δp, p + Δp] holds a bf16 rounding boundary, the GPU's
//     bf16(p) may be the next bf16 value, an ulp of bf16 (2⁻⁷ relative)
//     away. Rounding is monotone, so Δbf16(p) is at most the distance from
//     bf16(p) to the rounded ends of that interval: zero for the many p
//     whose interval holds no boundary, one bf16 ulp for the others.
//   - The end: inv = 1/l (rcp.rn on both): Δinv = Δl/l² + 2u·inv;
//     out = O·inv: Δout = ΔO·inv + |O|·Δinv + 2u|out|; LSE =
//     fma(m, scale, logf l), logf within 1 ulp: ΔLSE = scale·Δm + Δl/l +
//     3u|log l| + 2u|LSE|.
func (b *Bounds) Flash2FastStep(m *instrument.Record) map[string][]float64 {
	return b.bf16FlashStep(m, exp2Folded)
}

// softmaxUnits is where flash2_fast's and flash2_mma's bounds part: the
// units the kernel keeps scores and the row max in, and its exponential.
// Everything else, the mma sums, the quad's partial sums of l, the bf16(P)
// products and the end, is one walk (bf16FlashStep).
type softmaxUnits int

const (
	// exp2Folded is flash2_fast's softmax: S and m raw, each exponent one
	// fma(s, sl2, −mb) with sl2 = scale·log2 e, ex2.approx, and
	// LSE = fma(m, scale, logf l).
	exp2Folded softmaxUnits = iota
	// naturalUnits is flash2_mma's: x = S_raw·scale at once, m in
	// natural-log units, expf(x − mb), and LSE = m + logf l.
	naturalUnits
)

// bf16FlashStep is Of for a bf16 flash kernel's step and epilogue records
// (Flash2FastStep, Flash2MMAStep), the softmax in the given units. The
// state's bm, the bound of the row max, is in the kept units: raw for
// exp2Folded, natural for naturalUnits.
func (b *Bounds) bf16FlashStep(m *instrument.Record, units softmaxUnits) map[string][]float64 {
	h := b.h
	br, bc, d := h.Br, h.Bc, h.D
	zero := func(n int) []float64 { return make([]float64, n) }
	scale := float64(h.Scale)
	sl2 := float64(float32(h.Scale * float32(1.4426950408889634)))
	natural := units == naturalUnits
	key := [2]int{m.BH, m.I}
	st := b.fast[key]
	if m.Kind == instrument.KindEpilogue || m.Kind == instrument.KindSplitEnd { // a block's end, or a split's
		bo, blse := zero(br*d), zero(br)
		for r := range m.RowsValid {
			l, bl := st.l[r], st.bl[r]
			if l == 0 {
				continue // every score masked: O = 0 and LSE = −Inf on both sides
			}
			inv := 1 / l
			binv := bl/(l*l) + 2*u*inv
			for x := range d {
				bo[r*d+x] = st.bo[r*d+x]*inv + math.Abs(st.o[r*d+x])*binv + 2*u*math.Abs(float64(m.O[r*d+x]))
			}
			bm := scale * st.bm[r] // the LSE's m in natural units
			if natural {
				bm = st.bm[r]
			}
			blse[r] = bm + bl/l + 3*u*math.Abs(math.Log(l)) + 2*u*math.Abs(float64(m.LSE[r])) + 1e-45
		}
		return map[string][]float64{"o": bo, "lse": blse}
	}

	if m.J == 0 || st == nil || b.splitPer > 0 && m.J%b.splitPer == 0 { // a block's (or a split's) first step
		st = &fastState{bm: zero(br), lt: zero(br), l: zero(br), bl: zero(br), o: zero(br * d), bo: zero(br * d)}
		b.fast[key] = st
	}
	q, k, v := b.q[m.BH], b.k[m.BH], b.v[m.BH]
	atoms := (bc + 7) / 8
	bS, bMOld, bMNew := zero(br*bc), zero(br), zero(br)
	bA, bP, bL, bO := zero(br), zero(br*bc), zero(br), zero(br*d)
	dsKept := make([]float64, bc) // each score's bound in the kept units
	for r := range m.RowsValid {
		row := m.I*br + r
		// S_raw and its bound, chunk by chunk of 16 along d.
		bm := st.bm[r]
		for c := range m.ColsValid {
			dsKept[c] = 0
			if math.IsInf(float64(m.S[r*bc+c]), -1) {
				continue // masked on both sides
			}
			col := m.J*bc + c
			var acc, bnd float64
			for k0 := 0; k0 < d; k0 += 16 {
				k1 := min(k0+16, d)
				var sum, abs float64
				for x := k0; x < k1; x++ {
					p := float64(q[row*d+x]) * float64(k[col*d+x])
					sum += p
					abs += math.Abs(p)
				}
				bnd += mmaSlack(k1-k0, math.Abs(acc)+abs)
				acc += sum
			}
			bS[r*bc+c] = scale*bnd + 2*u*math.Abs(float64(m.S[r*bc+c]))
			dsKept[c] = bnd
			if natural {
				dsKept[c] = bS[r*bc+c]
			}
			bm = math.Max(bm, dsKept[c])
		}
		if natural { // m is the max of the x's: no rounding of its own
			bMOld[r], bMNew[r] = st.bm[r], bm
		} else {
			bMOld[r] = scale*st.bm[r] + 2*u*absFinite(float64(m.MOld[r]))
			bMNew[r] = scale*bm + 2*u*absFinite(float64(m.MNew[r]))
		}
		// The exponents' common part mb: m_new (natural), or m_new·sl2
		// (exp2Folded), 0 while all is masked.
		var mb, bmb float64
		if !math.IsInf(float64(m.MNew[r]), -1) {
			if natural {
				mb, bmb = float64(m.MNew[r]), bm
			} else {
				mb = float64(m.MNew[r]) / scale * sl2
				bmb = sl2*bm + 2*u*math.Abs(mb)
			}
		}
		// slack bounds the exponential of a kept value v (in the trace's
		// natural units) whose own bound is dv, in the kept units.
		slack := func(p, v, dv float64) float64 {
			if natural {
				x := v - mb
				return expfSlack(p, dv+bmb+2*u*math.Abs(x))
			}
			x := v/scale*sl2 - mb
			return ex2Slack(p, sl2*dv+bmb+2*u*math.Abs(x))
		}
		alpha := float64(m.Alpha[r])
		if !math.IsInf(float64(m.MOld[r]), -1) {
			bA[r] = slack(alpha, float64(m.MOld[r]), st.bm[r])
		}
		var sumBP float64
		for c := range m.ColsValid {
			s := float64(m.S[r*bc+c])
			if math.IsInf(s, -1) {
				continue
			}
			bP[r*bc+c] = slack(float64(m.P[r*bc+c]), s, dsKept[c])
			sumBP += bP[r*bc+c]
		}
		lNew := float64(m.L[r])
		st.lt[r] = alpha*st.lt[r] + bA[r]*st.l[r] + sumBP + float64(2*atoms+1)*2*u*lNew
		bL[r] = st.lt[r] + 2*2*u*lNew
		// O: rescaled, then Bc/16 mmas of bf16(P)·V.
		for x := range d {
			oPrev := st.o[r*d+x]
			acc := alpha * oPrev
			bnd := bA[r]*math.Abs(oPrev) + alpha*st.bo[r*d+x] + 2*u*math.Abs(acc)
			for k0 := 0; k0 < bc; k0 += 16 {
				k1 := min(k0+16, bc)
				var sum, abs, flip float64
				for c := k0; c < min(k1, m.ColsValid); c++ {
					p := float64(m.P[r*bc+c])
					vv := float64(v[(m.J*bc+c)*d+x])
					prod := float64(kernels.RoundBF16(float32(p))) * vv
					sum += prod
					abs += math.Abs(prod)
					flip += bf16Flip(p, bP[r*bc+c]) * math.Abs(vv)
				}
				bnd += flip + mmaSlack(k1-k0, math.Abs(acc)+abs)
				acc += sum
			}
			bO[r*d+x] = bnd
		}
		st.bm[r] = bm
		st.l[r], st.bl[r] = lNew, bL[r]
	}
	for r := range m.RowsValid {
		for x := range d {
			st.o[r*d+x] = float64(m.O[r*d+x])
		}
	}
	copy(st.bo, bO)
	return map[string][]float64{"s": bS, "m_old": bMOld, "m_new": bMNew, "alpha": bA, "p": bP, "l": bL, "o": bO}
}
