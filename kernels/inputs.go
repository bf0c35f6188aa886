package kernels

import (
	"math"
	"math/rand/v2"

	"flashstep/instrument"
)

// Inputs are the Q, K and V of one batch-head, N×d row-major float32.
type Inputs struct {
	Q, K, V []float32
}

// largeLogitStd is the standard deviation of the entries of Q and K in the
// "large" pattern. Then S = q·k/√d has standard deviation largeLogitStd²=64, so
// the largest |S| of a head lies between about 100 (toy sizes) and 400
// (N=4096): far past where exp overflows float32 (88.7) without subtracting
// the row max.
const largeLogitStd = 8

// peakLogit is the score a "peaked" row gives its one dominant key; the other
// scores of the row stay near ±1.
const peakLogit = 10

// InputsFor is the Q, K and V that c's kernel computes with for batch-head
// bh: GenerateInputs' numbers, rounded to bf16 (round to nearest even) for a
// bf16 variant. It is the one place that rounding happens for a run: the
// mirror, the trace's inputs record, the GPU upload and the float64
// reference all take their inputs from here, so all four see the same
// numbers and the reference measures the kernel's arithmetic alone.
func InputsFor(c *Config, bh int) *Inputs {
	in := GenerateInputs(c, bh)
	if v := variantInfo[c.Variant]; v != nil && v.DType == instrument.DTypeBF16 {
		in.Q, in.K, in.V = roundBF16All(in.Q), roundBF16All(in.K), roundBF16All(in.V)
	}
	return in
}

// GenerateInputs draws the inputs of batch-head bh from the run's seed, in
// float32 whatever the kernel (InputsFor rounds them for a bf16 one). The
// same (seed, bh, pattern, N, d) always gives the same numbers, on any machine.
func GenerateInputs(c *Config, bh int) *Inputs {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(bh)))
	n, d := c.N, c.D
	normal := func(std float64) []float32 {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * std)
		}
		return x
	}
	in := &Inputs{}
	switch c.Pattern {
	case instrument.PatternLarge:
		in.Q, in.K, in.V = normal(largeLogitStd), normal(largeLogitStd), normal(1)
	case instrument.PatternPeaked:
		in.K, in.V = normal(1), normal(1)
		// Row r of Q points at one key t: Q_r = g·K_t + small noise with
		// g = peakLogit·√d/|K_t|², so S_rt ≈ peakLogit. Under a causal mask
		// the key is one the row can see.
		in.Q = make([]float32, n*d)
		for r := 0; r < n; r++ {
			limit := n
			if c.Causal {
				limit = r + 1
			}
			t := rng.IntN(limit)
			kt := in.K[t*d : (t+1)*d]
			var norm2 float64
			for _, x := range kt {
				norm2 += float64(x) * float64(x)
			}
			g := peakLogit * math.Sqrt(float64(d)) / math.Max(norm2, 1e-6)
			for k := 0; k < d; k++ {
				in.Q[r*d+k] = float32(g*float64(kt[k]) + 0.3*rng.NormFloat64())
			}
		}
	default:
		in.Q, in.K, in.V = normal(1), normal(1), normal(1)
	}
	return in
}
