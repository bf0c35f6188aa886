// The float64 gradient oracle the backward kernels are held to (ReferenceGrad),
// the sizes their rounding is measured in (GradSizes, GradSizesOf), the
// tolerances (BackwardTolerance, BackwardToleranceBF16, BackwardToleranceOf)
// and the comparison (GradError). Only tests reach it, so it lives here and
// no production binary links it; its forward is kernels.Reference64's.

package kernelstest

import (
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Grad is attention's gradient for one batch-head: dQ, dK and dV (n×d
// row-major) given the output's gradient dO, and D, the row sums of
// dO ∘ O that FlashAttention's backward computes first.
type Grad struct {
	DQ, DK, DV []float64
	D          []float64
}

// ReferenceGrad is the exact gradient in float64 of kernels.Reference's O
// with respect to Q, K and V, over float32 inputs and a float32 dO: the
// oracle the backward kernels are held to. With P = softmax(S), S = QKᵀ/√d
// (masked above the diagonal when causal):
//
//	dV = Pᵀ dO,  dP = dO Vᵀ,  D_i = Σ_x dO_ix O_ix,
//	dS = P ∘ (dP − D),  dQ = dS K / √d,  dK = dSᵀ Q / √d.
//
// D_i equals Σ_j P_ij dP_ij (since O_i = Σ_j P_ij V_j), which is why the
// backward needs no row of P to find it. It stores P whole: it is for
// checking, at the sizes tests and the GPU checks use.
func ReferenceGrad(in *kernels.Inputs, dO []float32, n, d int, causal bool) Grad {
	return grad64(widen(in.Q), widen(in.K), widen(in.V), widen(dO), n, d, causal)
}

func grad64(q, k, v, dO []float64, n, d int, causal bool) Grad {
	o, lse := kernels.Reference64(q, k, v, n, d, causal)
	g := Grad{DQ: make([]float64, n*d), DK: make([]float64, n*d), DV: make([]float64, n*d), D: make([]float64, n)}
	scale := 1 / math.Sqrt(float64(d))
	s := make([]float64, n)
	ds := make([]float64, n)
	for r := 0; r < n; r++ {
		if math.IsInf(lse[r], -1) { // a row with no key: O = 0 whatever Q, K and V
			continue
		}
		dor := dO[r*d : (r+1)*d]
		for x := 0; x < d; x++ {
			g.D[r] += dor[x] * o[r*d+x]
		}
		kernels.Scores64(q, k, n, d, causal, r, s)
		for c := 0; c < n; c++ {
			p := math.Exp(s[c] - lse[r]) // P from the log-sum-exp, as the backward recomputes it
			if p == 0 {
				ds[c] = 0
				continue
			}
			var dp float64
			vc := v[c*d : (c+1)*d]
			dv := g.DV[c*d : (c+1)*d]
			for x := 0; x < d; x++ {
				dp += dor[x] * vc[x]
				dv[x] += p * dor[x]
			}
			ds[c] = p * (dp - g.D[r])
		}
		dq := g.DQ[r*d : (r+1)*d]
		qr := q[r*d : (r+1)*d]
		for c := 0; c < n; c++ {
			if ds[c] == 0 {
				continue
			}
			kc := k[c*d : (c+1)*d]
			dk := g.DK[c*d : (c+1)*d]
			for x := 0; x < d; x++ {
				dq[x] += ds[c] * kc[x] * scale
				dk[x] += ds[c] * qr[x] * scale
			}
		}
	}
	return g
}

// BackwardTolerance is what a float32 backward's gradients are held to
// against ReferenceGrad, in units of GradSizes: 2⁻¹⁷ (about 130 units of float32 rounding, for sums
// over up to a few hundred rows and columns), grown with the scores as the
// forward's tolerance is, since P = exp(S − L) takes the rounding of S and
// L, which are hundreds under the large pattern, as an absolute error.
// Its argument is the scores' scale as ScoreTerms gives it: a score's
// rounding follows the terms of its dot product, which can be far larger
// than the score where they cancel.
func BackwardTolerance(maxAbsS float64) float64 { return 0x1p-17 * math.Max(1, maxAbsS/16) }

// ScoreTerms is the largest sum of absolute terms of a score the run
// computes, scale·Σ_x |Q_rx·K_cx| over the (row, key) pairs it visits: the
// scale of a float32 score's rounding, and so of P = exp(S − L)'s absolute
// error. A score of −15 made of terms summing to 200 in magnitude (seed
// 6441544698169729785, N = 1, d = 7, the large pattern) rounds as one of
// 200 does.
func ScoreTerms(in *kernels.Inputs, n, d int, causal bool) float64 {
	var m float64
	scale := 1 / math.Sqrt(float64(d))
	for r := range n {
		for c := range n {
			if causal && c > r {
				continue
			}
			var terms float64
			for x := range d {
				terms += math.Abs(float64(in.Q[r*d+x]) * float64(in.K[c*d+x]))
			}
			m = math.Max(m, terms*scale)
		}
	}
	return m
}

// BackwardToleranceBF16 is BackwardTolerance for a backward whose products
// take bf16 operands (flash2_bwd_mma): 2⁻⁷ more, a bound rather than an
// estimate. Rounding to bf16 (8 significant bits) moves a number by at most
// u = 2⁻⁸ of itself. P rounded so moves each term of dV by u of itself, so
// dV by at most u of its GradSize. dK and dQ take dS = P ∘ (dP − D), where D
// was taken from O rounded to bf16 (off by up to u·Σ_x |dO||O|, which
// GradSizesOf counts in), and dS is itself rounded: at most 2u in all.
func BackwardToleranceBF16(maxAbsS float64) float64 { return 0x1p-7 + BackwardTolerance(maxAbsS) }

// BackwardToleranceOf is the tolerance of variant v's gradients.
func BackwardToleranceOf(v instrument.Variant, maxAbsS float64) float64 {
	if kernels.Info(v).DType == instrument.DTypeBF16 {
		return BackwardToleranceBF16(maxAbsS)
	}
	return BackwardTolerance(maxAbsS)
}

// GradError is max |got − want| over size, the gradient's scale: NaN if any
// element is NaN.
func GradError(got []float32, want []float64, size float64) float64 {
	var diff float64
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if math.IsNaN(d) {
			return math.NaN()
		}
		diff = math.Max(diff, d)
	}
	return diff / math.Max(size, 1e-30)
}

// GradSizes are the scales a float32 backward's rounding errors are
// proportional to, one per gradient: the largest element of the sums of
// absolute terms that make it (in float64, from the exact P, dP and D).
// dS = P ∘ (dP − D) cancels where dP is near D, so dQ and dK can be small
// where the numbers they are made of are not; their rounding is not.
//
//	dV: Σ_r P_rc |dO_rx|
//	dK: scale · Σ_r P_rc (|dP_rc| + |D_r|) |Q_rx|
//	dQ: scale · Σ_c P_rc (|dP_rc| + |D_r|) |K_cx|
func GradSizes(in *kernels.Inputs, dO []float32, n, d int, causal bool) (dq, dk, dv float64) {
	return gradSizes(in, dO, n, d, causal, false)
}

// GradSizesOf are variant v's GradSizes. A bf16 backward takes the
// forward's O rounded to bf16, which moves D by up to 2⁻⁸·Σ_x |dO_rx||O_rx|,
// a sum that cancellation in D can make far larger than |D| itself: its
// |D_r| terms are |D_r| + Σ_x |dO_rx||O_rx|.
func GradSizesOf(v instrument.Variant, in *kernels.Inputs, dO []float32, n, d int, causal bool) (dq, dk, dv float64) {
	return gradSizes(in, dO, n, d, causal, kernels.Info(v).DType == instrument.DTypeBF16)
}

func gradSizes(in *kernels.Inputs, dO []float32, n, d int, causal, roundedO bool) (dq, dk, dv float64) {
	q, k, v := widen(in.Q), widen(in.K), widen(in.V)
	o, lse := kernels.Reference64(q, k, v, n, d, causal)
	scale := 1 / math.Sqrt(float64(d))
	sdq, sdk, sdv := make([]float64, n*d), make([]float64, n*d), make([]float64, n*d)
	absQ, absK, absDO := absAll(q), absAll(k), absAll(widen(dO))
	s := make([]float64, n)
	for r := range n {
		var delta float64
		var dTerm float64 // |D_r|, and what O's rounding may move it by
		for x := range d {
			delta += float64(dO[r*d+x]) * o[r*d+x]
			dTerm += math.Abs(float64(dO[r*d+x]) * o[r*d+x])
		}
		if roundedO {
			dTerm += math.Abs(delta)
		} else {
			dTerm = math.Abs(delta)
		}
		kernels.Scores64(q, k, n, d, causal, r, s)
		for c := range n {
			p := math.Exp(s[c] - lse[r])
			if p == 0 {
				continue
			}
			var dp float64
			for x := range d {
				dp += float64(dO[r*d+x]) * v[c*d+x]
			}
			w := p * (math.Abs(dp) + dTerm) * scale
			aDO, aQ, aK := absDO[r*d:(r+1)*d], absQ[r*d:(r+1)*d], absK[c*d:(c+1)*d]
			dv, dk, dq := sdv[c*d:(c+1)*d], sdk[c*d:(c+1)*d], sdq[r*d:(r+1)*d]
			for x := range d {
				dv[x] += p * aDO[x]
				dk[x] += w * aQ[x]
				dq[x] += w * aK[x]
			}
		}
	}
	top := func(x []float64) (m float64) {
		for _, v := range x {
			m = math.Max(m, v)
		}
		return m
	}
	return top(sdq), top(sdk), top(sdv)
}

// absAll is |x|, element by element.
func absAll(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Abs(v)
	}
	return out
}

// widen is x in float64, exactly.
func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
