// The backward mirrors held to the float64 gradient oracle
// (kernelstest.ReferenceGrad): every element of dQ, dK and dV within its
// tolerance, and the comparison's power to fail a backward that forgets D
// or a kv-tile's part of dQ. An external test, since kernelstest imports
// kernels; the package's own helpers come through export_test.go.

package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

// TestFlash2BwdMatchesReferenceGrad holds the backward mirrors' dQ, dK and
// dV (flash2_bwd's, naive_bwd's and flash2_bwd_mma's), every element, to
// the float64 gradient of the same inputs: ragged N, causal or not, every
// input pattern, several batch-heads; flash2_bwd_mma also at its kernel's
// tiles (64×64, d = 64 and 128), which the random shapes seldom draw.
func TestFlash2BwdMatchesReferenceGrad(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	worst := map[string]float64{}
	backward := []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantNaiveBwd, instrument.VariantFlash2BwdMMA}
	draw := func(rng *rand.Rand) Config {
		c := BackwardConfig(rng)
		c.Variant = backward[rng.IntN(len(backward))]
		if c.Variant == instrument.VariantFlash2BwdMMA && rng.IntN(2) == 0 {
			c.N, c.D, c.Br, c.Bc, c.Batch = 64+rng.IntN(200), []int{64, 128}[rng.IntN(2)], 64, 64, 1
			c.TraceBH = instrument.Range{}
		}
		return c
	}
	for _, c := range RunsOf(rng, backward, 120, 25, draw) {
		c.TraceQ = instrument.Range{}
		h, recs := RunTrace(t, c)
		NoNaN(t, c, recs)
		if h.Records != len(recs) {
			t.Fatalf("%+v: header promises %d records, trace has %d", c, h.Records, len(recs))
		}
		for bh := c.TracedBH().Lo; bh < c.TracedBH().Hi; bh++ {
			in := InputsFor(&c, bh)
			ref := kernelstest.ReferenceGrad(in, in.DO, c.N, c.D, c.Causal)
			dq, dk, dv := TraceGradients(&c, recs, bh)
			tol := kernelstest.BackwardToleranceOf(c.Variant, kernelstest.ScoreTerms(in, c.N, c.D, c.Causal))
			sq, sk, sv := kernelstest.GradSizesOf(c.Variant, in, in.DO, c.N, c.D, c.Causal)
			for _, g := range []struct {
				name string
				got  []float32
				want []float64
				size float64
			}{{"dQ", dq, ref.DQ, sq}, {"dK", dk, ref.DK, sk}, {"dV", dv, ref.DV, sv}} {
				e := kernelstest.GradError(g.got, g.want, g.size)
				if !(e <= tol) { // NaN fails too
					t.Fatalf("%+v bh %d: %s off by %.3g of its size, bound %.3g", c, bh, g.name, e, tol)
				}
				key := c.Variant.String() + " " + c.Pattern.String()
				worst[key] = math.Max(worst[key], e/tol)
			}
		}
	}
	for k, w := range worst {
		t.Logf("%-17s worst error/bound %.3f", k, w)
	}
}

// TestFlash2BwdCatchesAForgottenD: the comparison above fails a backward
// that drops D from dS = P ∘ (dP − D) (so dQ and dK lose the softmax's
// coupling of the row), and one whose dQ misses a kv-tile's part, on the
// same inputs the mirror passes on.
func TestFlash2BwdCatchesAForgottenD(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for k := range testrand.Runs(40, 10) {
		c := BackwardConfig(rng)
		c.Variant = []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantFlash2BwdMMA}[k%2]
		c.N, c.D, c.Br, c.Bc = 8+rng.IntN(40), 2+rng.IntN(30), 4, 4
		// Normal inputs: under the large pattern P is nearly one-hot, dS
		// nearly zero, and a missing part is below what any float32
		// backward can be held to.
		c.Pattern = instrument.PatternNormal
		_, recs := RunTrace(t, c)
		bh := c.TracedBH().Lo
		in := InputsFor(&c, bh)
		ref := kernelstest.ReferenceGrad(in, in.DO, c.N, c.D, c.Causal)
		tol := kernelstest.BackwardToleranceOf(c.Variant, kernelstest.ScoreTerms(in, c.N, c.D, c.Causal))
		sq, sk, _ := kernelstest.GradSizesOf(c.Variant, in, in.DO, c.N, c.D, c.Causal)
		dq, dk, _ := TraceGradients(&c, recs, bh)
		if e := kernelstest.GradError(dq, ref.DQ, sq); !(e <= tol) {
			t.Fatalf("%+v: the mirror itself fails (%.3g)", c, e)
		}
		// dK without D: dSᵀQ·scale with dS = P ∘ dP, from the trace's P and dP.
		noD := make([]float32, len(dk))
		copy(noD, dk)
		scale := c.Scale()
		for j := range c.Tc() {
			for col := range c.ColsValidOf(j) {
				for x := range c.D {
					var acc float64
					for _, r := range recs {
						if r.Kind != instrument.KindBwdStep || r.BH != bh || r.J != j {
							continue
						}
						for row := range r.RowsValid {
							acc += float64(r.P[row*c.Bc+col]) * float64(r.DP[row*c.Bc+col]) * float64(in.Q[(r.I*c.Br+row)*c.D+x])
						}
					}
					noD[(j*c.Bc+col)*c.D+x] = float32(acc * float64(scale))
				}
			}
		}
		if e := kernelstest.GradError(noD, ref.DK, sk); e <= tol {
			t.Fatalf("%+v: a dK without D passes (%.3g ≤ %.3g)", c, e, tol)
		}
		// dQ missing the part of the kv-tile that adds most to it.
		short := make([]float32, len(dq))
		copy(short, dq)
		last, most := 0, 0.0
		for _, r := range recs {
			if r.Kind == instrument.KindBwdStep && r.BH == bh {
				for _, v := range r.DQ {
					if math.Abs(float64(v)) > most {
						last, most = r.J, math.Abs(float64(v))
					}
				}
			}
		}
		for _, r := range recs {
			if r.Kind == instrument.KindBwdStep && r.BH == bh && r.J == last {
				for e := range r.RowsValid * c.D {
					short[r.I*c.Br*c.D+e] -= r.DQ[e] * scale
				}
			}
		}
		if e := kernelstest.GradError(short, ref.DQ, sq); e <= tol {
			t.Fatalf("%+v: a dQ without kv-tile %d passes (%.3g ≤ %.3g)", c, last, e, tol)
		}
	}
}
