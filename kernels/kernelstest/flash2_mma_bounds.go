package kernelstest

import (
	"math"

	"flashstep/instrument"
)

// Flash2MMAStep is Of for flash2_mma's flash_step and epilogue records: the
// bound on every element of S, m_old, m_new, α, P, l and O of a step, and
// of O and the LSE of an epilogue, between a GPU trace and the mirror's
// record m. Records must come in trace order, after their batch-head's
// inputs record; CompareRecords then holds the GPU's record to it.
//
// flash2_mma runs flash2_fast's walk (bf16 inputs, the same mma chunks, the
// quad's partial sums of l, bf16(P)·V), so its bound is Flash2FastStep's
// (read that first) in other softmax units:
//
//   - x = S_raw·scale is one float32 multiply, and it is the trace's S:
//     ΔS = scale·ΔS_raw + 2u|x|, ΔS_raw the chunks' mmaSlack as there.
//   - m is the max of the x's, in natural-log units, with no rounding of its
//     own: Δm_new = max(Δm_old, max_c ΔS_c).
//   - mb = m_new exactly (0 while all is masked), and each exponent is one
//     float32 subtraction, x − mb or m_old − mb: Δarg = Δx + Δm_new +
//     2u|arg|. CUDA's expf is within 2 ulp of e^arg, the mirror's within
//     ½ ulp, an ulp at most 2u of the value: Δp ≤ p·(e^Δarg − 1) + 5u·p
//     (expfSlack), plus a few subnormal ulp, since expf, unlike ex2.approx.ftz,
//     keeps subnormal results.
//   - l, O and the end's O·(1/l) as flash2_fast's, from these Δα and Δp.
//   - LSE = m + logf(l), logf within 1 ulp: ΔLSE = Δm + Δl/l + 3u|log l| +
//     2u|LSE|.
//
// It keeps its walk in Bounds' fast map, as Flash2FastStep does: one Bounds
// walks one trace, of one variant.
func (b *Bounds) Flash2MMAStep(m *instrument.Record) map[string][]float64 {
	return b.bf16FlashStep(m, naturalUnits)
}

// expfSlack is how far the GPU's expf(x') may lie from the mirror's
// exp32(x) = p when |x' − x| ≤ dx.
func expfSlack(p, dx float64) float64 {
	return p*math.Expm1(dx) + 5*u*p + 4e-45
}
