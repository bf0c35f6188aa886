package kernels_test

import (
	"math"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
)

// flash2_mma (rung 5) shares flash2_fast's tests (TestBF16Flash*, which run
// for both bf16 flash kernels); what is its own is here: that its GPU bound
// (kernelstest's Flash2MMAStep) catches wrong arithmetic.

// TestFlash2MMABoundCatchesWrongArithmetic: the bound is no blank cheque.
// Kernels with a plausible mistake in what the GPU leaves free must fail it
// on every run of the normal pattern: an exponential in base 2 (rung 6's
// ex2 without its scale by log2 e), expf rounded to bf16 (a softmax computed
// in bf16), and a tensor core accumulating in bf16. (Under the large
// pattern the scores, and so what the mma's sum order may move them by, are
// large enough that a bf16 exp fits the bound.) Nor does it tell rung 6's
// softmax from this one: flash2_fast's arithmetic on the same tiles fails
// it only where ex2.approx.ftz flushes a subnormal P that expf keeps.
func TestFlash2MMABoundCatchesWrongArithmetic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	wrong := []struct {
		name string
		mma  func(acc float32, a, b []float32, stride int) float32
		exp  func(float32) float32
	}{
		{"ex2 for expf", MMAChunk, func(x float32) float32 { return float32(math.Exp2(float64(x))) }},
		{"expf in bf16", MMAChunk, func(x float32) float32 { return RoundBF16(exactExp(x)) }},
		{"bf16 accumulator", func(acc float32, a, b []float32, stride int) float32 { return RoundBF16(MMAChunk(acc, a, b, stride)) }, exactExp},
	}
	for _, w := range wrong {
		caught := 0
		runs := testrand.Runs(12, 3)
		for n := range runs {
			c := bf16BoundConfig(rng, 2*n+1, instrument.VariantFlash2MMA) // the compiled tiles: enough elements that a wrong one shows
			c.Pattern = instrument.PatternNormal
			sim := MirrorBF16FlashWith(instrument.VariantFlash2MMA, c, w.mma, w.exp)
			if _, err := compareToBound(t, c, sim, mirrorTrace(t, c), map[string]float64{}); err != nil {
				caught++
				if n == 0 {
					t.Logf("%s: %v", w.name, err)
				}
			}
		}
		if caught != runs {
			t.Errorf("%s: the bound caught %d of %d runs", w.name, caught, runs)
		}
	}
}
