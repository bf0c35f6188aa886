// Tests of the gradient oracle itself (reference_grad.go): against finite
// differences of kernels.Reference64, D against the sum it stands for, and
// the finite differences' own power to catch a wrong gradient.

package kernelstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"flashstep/internal/testrand"
	"flashstep/kernels"
)

// loss is Σ dO ∘ O, whose gradient with respect to Q, K and V is what
// ReferenceGrad returns for that dO.
func loss(q, k, v, dO []float64, n, d int, causal bool) float64 {
	o, _ := kernels.Reference64(q, k, v, n, d, causal)
	var l float64
	for i := range o {
		l += dO[i] * o[i]
	}
	return l
}

// finiteDifference is ∂loss/∂x_i for every element of x (one of q, k, v),
// by central differences of step h·(1+|x_i|).
func finiteDifference(x []float64, f func() float64, h float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		keep := x[i]
		step := h * (1 + math.Abs(keep))
		x[i] = keep + step
		up := f()
		x[i] = keep - step
		down := f()
		x[i] = keep
		out[i] = (up - down) / (2 * step)
	}
	return out
}

// gradClose says whether every element of got is within tol·(1 + max|want|)
// of want; NaN and ±Inf never are.
func gradClose(got, want []float64, tol float64) error {
	var scale float64
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	bound := tol * (1 + scale)
	for i := range want {
		if diff := math.Abs(got[i] - want[i]); !(diff <= bound) {
			return fmt.Errorf("element %d: %g, want %g (|diff| %.3g > %.3g)", i, got[i], want[i], diff, bound)
		}
	}
	return nil
}

func randomNormals(rng *rand.Rand, n int, std float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.NormFloat64() * std
	}
	return out
}

// The float64 gradient is itself checked: against central differences of
// the float64 forward, every element of dQ, dK and dV, on small random
// shapes with and without the causal mask, scores up to several units.
func TestReferenceGradMatchesFiniteDifferences(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for trial := 0; trial < 40; trial++ {
		n, d, causal := 1+rng.IntN(9), 1+rng.IntN(6), rng.IntN(2) == 0
		std := 0.3 + 1.5*rng.Float64()
		q, k, v := randomNormals(rng, n*d, std), randomNormals(rng, n*d, std), randomNormals(rng, n*d, 1)
		dO := randomNormals(rng, n*d, 1)
		g := grad64(q, k, v, dO, n, d, causal)
		f := func() float64 { return loss(q, k, v, dO, n, d, causal) }
		for _, c := range []struct {
			name   string
			x, got []float64
		}{{"dQ", q, g.DQ}, {"dK", k, g.DK}, {"dV", v, g.DV}} {
			fd := finiteDifference(c.x, f, 1e-5)
			if err := gradClose(c.got, fd, 1e-7); err != nil {
				t.Fatalf("n=%d d=%d causal=%v: %s against finite differences: %v", n, d, causal, c.name, err)
			}
		}
	}
}

// D, the backward's first pass, is rowsum(dO ∘ O); it must equal
// Σ_j P_ij dP_ij, the sum the backward avoids (the D trick).
func TestReferenceGradD(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for trial := 0; trial < 20; trial++ {
		n, d, causal := 1+rng.IntN(12), 1+rng.IntN(8), rng.IntN(2) == 0
		q, k, v, dO := randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1)
		g := grad64(q, k, v, dO, n, d, causal)
		_, lse := kernels.Reference64(q, k, v, n, d, causal)
		s := make([]float64, n)
		want := make([]float64, n)
		for r := 0; r < n; r++ {
			kernels.Scores64(q, k, n, d, causal, r, s)
			for c := 0; c < n; c++ {
				p := math.Exp(s[c] - lse[r])
				var dp float64
				for x := 0; x < d; x++ {
					dp += dO[r*d+x] * v[c*d+x]
				}
				want[r] += p * dp
			}
		}
		if err := gradClose(g.D, want, 1e-12); err != nil {
			t.Fatalf("n=%d d=%d causal=%v: D: %v", n, d, causal, err)
		}
	}
}

// gradClose at its edge: an error just inside the bound passes, one just
// past it fails, and NaN fails wherever it is.
func TestGradCloseAtItsEdge(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	want := randomNormals(rng, 50, 2)
	var scale float64
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	bound := 1e-7 * (1 + scale)
	i := rng.IntN(len(want))
	got := append([]float64(nil), want...)
	got[i] += 0.99 * bound
	if err := gradClose(got, want, 1e-7); err != nil {
		t.Fatalf("an error at 0.99 of the bound failed: %v", err)
	}
	got[i] = want[i] + 1.01*bound
	if gradClose(got, want, 1e-7) == nil {
		t.Fatal("an error at 1.01 of the bound passed")
	}
	got[i] = math.NaN()
	if gradClose(got, want, 1e-7) == nil {
		t.Fatal("NaN passed")
	}
}

// A gradient that is wrong in one place is caught: ReferenceGrad with dS
// taken as P ∘ dP (forgetting D) fails the finite differences on every
// shape with more than one key a row.
func TestFiniteDifferencesCatchAForgottenD(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	n, d := 4+rng.IntN(5), 2+rng.IntN(4)
	q, k, v, dO := randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1), randomNormals(rng, n*d, 1)
	// dQ without D: Σ_c P_rc dP_rc K_c / √d.
	_, lse := kernels.Reference64(q, k, v, n, d, false)
	s := make([]float64, n)
	wrong := make([]float64, n*d)
	for r := 0; r < n; r++ {
		kernels.Scores64(q, k, n, d, false, r, s)
		for c := 0; c < n; c++ {
			p := math.Exp(s[c] - lse[r])
			var dp float64
			for x := 0; x < d; x++ {
				dp += dO[r*d+x] * v[c*d+x]
			}
			for x := 0; x < d; x++ {
				wrong[r*d+x] += p * dp * k[c*d+x] / math.Sqrt(float64(d))
			}
		}
	}
	fd := finiteDifference(q, func() float64 { return loss(q, k, v, dO, n, d, false) }, 1e-5)
	if gradClose(wrong, fd, 1e-7) == nil {
		t.Fatal("a dQ without D passed the finite differences")
	}
	if err := gradClose(grad64(q, k, v, dO, n, d, false).DQ, fd, 1e-7); err != nil {
		t.Fatalf("the reference's dQ on the same inputs: %v", err)
	}
}
