package kernels_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"flashstep/instrument"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/launch"
)

// simulatedGPU is other admissible arithmetic for what flash2_fast leaves
// unspecified: each mma adds its terms and the accumulator in a random
// order, in float32, rounding to nearest or truncating at every step; each
// ex2 is up to 2 ulp off the correctly rounded 2^x. It stands in for the
// GPU to try the bound that the GPU's trace will be held to.
type simulatedGPU struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (g *simulatedGPU) mma(acc float32, a, b []float32, stride int) float32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	terms := []float32{acc}
	for i, x := range a {
		terms = append(terms, x*b[i*stride]) // exact: bf16·bf16
	}
	g.rng.Shuffle(len(terms), func(i, j int) { terms[i], terms[j] = terms[j], terms[i] })
	truncate := g.rng.IntN(2) == 0
	sum := terms[0]
	for _, x := range terms[1:] {
		exact := float64(sum) + float64(x)
		r := float32(exact)
		if truncate && math.Abs(float64(r)) > math.Abs(exact) {
			r = math.Nextafter32(r, 0)
		}
		sum = r
	}
	return sum
}

func (g *simulatedGPU) ex2(x float32) float32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := Ex2(x)
	if r == 0 || math.IsInf(float64(r), 0) {
		return r
	}
	steps := g.rng.IntN(5) - 2 // −2 to 2 ulp
	toward := float32(math.Inf(1))
	if steps < 0 {
		steps, toward = -steps, 0
	}
	for range steps {
		r = math.Nextafter32(r, toward)
	}
	if r < 0x1p-126 {
		return 0
	}
	return r
}

// TestFlash2FastBoundHoldsForOtherArithmetic runs the mirror and the
// simulated GPU on the same fresh random runs and holds every element of
// the simulated trace to kernelstest's bound, as the GPU suite will hold
// the GPU's; the worst ratio says how much room the bound leaves.
func TestFlash2FastBoundHoldsForOtherArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	worst := map[string]float64{}
	for n := range 60 {
		c := kernelstest.RandomGPUConfig(rng, 300)
		c.Variant = instrument.VariantFlash2Fast
		if n%2 == 0 { // the mirror's other shapes: ragged d, Bc, toy sizes
			c.N = 1 + rng.IntN(90)
			c.D, c.Br, c.Bc = 1+rng.IntN(40), 1+rng.IntN(min(c.N, 20)), 1+rng.IntN(min(c.N, 20))
			c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
		} else {
			f := launch.Flash2FastInstances[rng.IntN(len(launch.Flash2FastInstances))]
			c.Br, c.Bc, c.D = f.Br, f.Bc, f.D
			c.N = max(c.Br, c.Bc) + rng.IntN(200)
			c.Batch, c.Heads, c.TraceBH, c.TraceQ = 1, 1, instrument.Range{}, instrument.Range{}
		}
		c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		h := c.Header(instrument.SourceGPU, "")
		h.NumSMs = 1
		var mirror []*instrument.Record
		if err := RunMirror(context.Background(), c, func(r *instrument.Record) error { mirror = append(mirror, r); return nil }); err != nil {
			t.Fatal(err)
		}
		g := &simulatedGPU{rng: rand.New(rand.NewPCG(rng.Uint64(), 1))}
		sim := MirrorFlash2FastWith(c, g.mma, g.ex2)
		if len(sim) != len(mirror) {
			t.Fatalf("%+v: %d simulated records, %d mirror records", c, len(sim), len(mirror))
		}
		bnd := kernelstest.NewBounds(&h)
		differ := 0
		for k := range mirror {
			if sim[k].Kind != instrument.KindInputs {
				sim[k].TStart, sim[k].TEnd = 1, 2
			}
			if err := kernelstest.CompareRecords(&h, sim[k], mirror[k], bnd.Of(mirror[k]), worst); err != nil {
				t.Fatalf("%+v record %d: %v", c, k, err)
			}
			for x := range sim[k].O {
				if sim[k].O[x] != mirror[k].O[x] {
					differ++
				}
			}
		}
		if differ == 0 && c.N*c.D > 64 {
			t.Fatalf("%+v: the simulated GPU changed nothing: the test tries no bound", c)
		}
	}
	for name, w := range worst {
		t.Logf("%-6s worst difference/bound %.3g", name, w)
	}
}
