package kernels

import (
	"math"
	"math/rand/v2"
	"sync"

	"flashstep/instrument"
)

// Inputs are the Q, K and V of one batch-head, N×d row-major float32, and
// for a backward run what the backward starts from: the output's gradient
// dO (N×d), drawn from the seed like Q, K and V, and the forward's O (N×d)
// and log-sum-exp L (N), exact attention rounded to float32 (O to bf16 for
// a bf16 kernel). Taking O and L exact, rather than from one forward
// kernel or another, keeps a backward trace the backward's arithmetic alone.
type Inputs struct {
	Q, K, V []float32

	DO, O, LSE []float32
	// P is the forward's P (N×N), exact and rounded to float32, for a
	// backward that reads it back rather than recomputing it (naive_bwd).
	P []float32

	bwd struct { // a backward mirror's walk of the batch-head, done once
		once sync.Once
		head *bwdHead // nil if the run was stopped before the walk ended
		// stop closes when the run's client has gone (RunMirror): the
		// walk, seconds long at N=4096, checks it at every kv-tile.
		stop <-chan struct{}
	}
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
func InputsFor(c *Config, bh int) *Inputs { return inputsFor(c, bh, c.N, nil) }

// inputsFor is InputsFor with a backward's O, L (and P) of rows [0, rows)
// alone, the rest zero: the CPU mirror needs the rows up to the last q-tile
// it traces, and the exact forward is seconds of float64 at N=4096. It
// stops early once stop (if not nil) closes, leaving the rest zero: the
// mirror's run has ended and will use none of it.
func inputsFor(c *Config, bh, rows int, stop <-chan struct{}) *Inputs {
	in := GenerateInputs(c, bh)
	v := variantInfo[c.Variant]
	bf16 := v != nil && v.DType == instrument.DTypeBF16
	if bf16 {
		in.Q, in.K, in.V = roundBF16All(in.Q), roundBF16All(in.K), roundBF16All(in.V)
	}
	if v != nil && v.Backward {
		in.DO = GenerateDO(c, bh)
		q, k := widen(in.Q), widen(in.K)
		in.bwd.stop = stop
		o, lse := attentionRows64(q, k, widen(in.V), c.N, c.D, c.Causal, rows, in.stopped)
		in.O, in.LSE = narrow(o), narrow(lse)
		if v.Materialised && !in.stopped() {
			in.P = probabilities(q, k, lse, c.N, c.D, c.Causal, rows, in.stopped)
		}
		if bf16 {
			in.DO, in.O = roundBF16All(in.DO), roundBF16All(in.O)
		}
	}
	return in
}

// GenerateDO draws the output's gradient dO of batch-head bh, N×d entries of
// N(0, 1), from a stream of the seed apart from Q, K and V's: a loss whose
// gradient is noise, which reaches every row and column alike.
func GenerateDO(c *Config, bh int) []float32 {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(bh)|1<<63))
	x := make([]float32, c.N*c.D)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// narrow is x rounded to float32.
func narrow(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// GenerateInputs draws the inputs of batch-head bh from the run's seed, in
// float32 whatever the kernel (InputsFor rounds them for a bf16 one). The
// same (seed, bh, pattern, N, d) always gives the same numbers, on any
// machine. A run of other shapes draws the square run's numbers and keeps
// what it needs, so that every run reads as a part of a square one: Q of a
// run with nq < N is the last nq rows of that run's Q (the queries are the
// last positions, their keys the cache), and K and V of a grouped head
// are its group's first head's (Config.KVSource). The mirrors then owe a
// shaped run's outputs the matching rows of the square run's.
func GenerateInputs(c *Config, bh int) *Inputs {
	var in *Inputs
	if src := c.KVSource(bh); src != bh {
		kv := drawInputs(c, src, nil)
		in = drawInputs(c, bh, kv.K)
		in.K, in.V = kv.K, kv.V
	} else {
		in = drawInputs(c, bh, nil)
	}
	if off := c.QueryOffset(); off > 0 {
		in.Q = in.Q[off*c.D:]
	}
	return in
}

// drawInputs is the square run's Q, K and V of batch-head bh. A peaked
// Q points at keys of pointAt where it is given (a grouped head's shared
// K) rather than at the head's own K.
func drawInputs(c *Config, bh int, pointAt []float32) *Inputs {
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
		keys := in.K
		if pointAt != nil {
			keys = pointAt
		}
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
			kt := keys[t*d : (t+1)*d]
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
