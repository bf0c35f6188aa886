package kernels_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

// The GPU comparison's bound, tried on the CPU: a kernel's mirror and a
// stand-in for the GPU (the mirror with other admissible arithmetic) run
// the same runs, and every element of the stand-in's trace must lie within
// kernelstest's bound around the mirror's, as the GPU suite holds the GPU's.
// The machinery here serves every kernel's bound tests.

// simulatedGPU is other admissible arithmetic for what the kernels leave
// unspecified: each mma adds its terms and the accumulator in a random
// order, in float32, rounding to nearest or truncating at every step; each
// ex2 is up to 2 ulp off the correctly rounded 2^x, each expf up to 2 ulp
// off e^x. It stands in for the GPU to try the bound that the GPU's trace
// will be held to.
type simulatedGPU struct {
	mu    sync.Mutex
	rng   *rand.Rand
	terms []float32 // mma's scratch, under mu
}

func (g *simulatedGPU) mma(acc float32, a, b []float32, stride int) float32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	terms := append(g.terms[:0], acc)
	for i, x := range a {
		terms = append(terms, x*b[i*stride]) // exact: bf16·bf16
	}
	g.terms = terms
	for i := len(terms) - 1; i > 0; i-- { // a uniform shuffle (Fisher–Yates)
		j := g.rng.IntN(i + 1)
		terms[i], terms[j] = terms[j], terms[i]
	}
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

// ex2 is flash2_fast's ex2.approx.ftz: 2 ulp either side, subnormal
// results flushed to 0.
func (g *simulatedGPU) ex2(x float32) float32 {
	r := g.ulpsOff(Ex2(x))
	if r < 0x1p-126 {
		return 0
	}
	return r
}

// expf is CUDA's expf (within 2 ulp of e^x): 2 ulp either side of the
// mirror's, subnormal results kept.
func (g *simulatedGPU) expf(x float32) float32 { return g.ulpsOff(exactExp(x)) }

// exp is v's exponential: ex2 for flash2_fast, expf for flash2_mma.
func (g *simulatedGPU) exp(v instrument.Variant) func(float32) float32 {
	if v == instrument.VariantFlash2Fast {
		return g.ex2
	}
	return g.expf
}

// ulpsOff moves r by −2 to 2 ulp, at random; 0 and Inf stay.
func (g *simulatedGPU) ulpsOff(r float32) float32 {
	if r == 0 || math.IsInf(float64(r), 0) {
		return r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	steps := g.rng.IntN(5) - 2
	toward := float32(math.Inf(1))
	if steps < 0 {
		steps, toward = -steps, 0
	}
	for range steps {
		r = math.Nextafter32(r, toward)
	}
	return r
}

// exactExp is the mirror's expf (kernels/float32.go): e^x in float64,
// rounded once.
func exactExp(x float32) float32 { return float32(math.Exp(float64(x))) }

// mirrorTrace is the mirror's trace of c (which must be valid), in order.
func mirrorTrace(t testing.TB, c Config) []*instrument.Record {
	t.Helper()
	recs, err := mirrorRecords(c)
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	return recs
}

// mirrorRecords is mirrorTrace for any goroutine: c's invalidity or the
// mirror's error is returned.
func mirrorRecords(c Config) ([]*instrument.Record, error) {
	r, err := c.Check()
	if err != nil {
		return nil, err
	}
	var recs []*instrument.Record
	err = RunMirror(context.Background(), r, func(r *instrument.Record) error { recs = append(recs, r); return nil })
	return recs, err
}

// gpuConfig draws a run of v that the GPU runs (kernelstest.RandomGPUConfig,
// until it draws v), N up to gpuMaxN().
func gpuConfig(rng *rand.Rand, v instrument.Variant) Config {
	for {
		if c := kernelstest.RandomGPUConfig(rng, gpuMaxN()); c.Variant == v {
			return c
		}
	}
}

// gpuMaxN is the largest N of a random GPU run: 300, or under -short,
// where a run's cost grows with its tiles squared, 160, a little past two
// of the float32 kernels' largest tiles and one of the bf16 kernels'.
func gpuMaxN() int {
	if testing.Short() {
		return 160
	}
	return 300
}

// compiledN is a ragged N for a random run at compiled tiles whose larger
// side is big: up to 200 past one tile, or under -short up to half a tile
// past it, so that every run has a ragged second tile each way and costs at
// most four steps a q-tile.
func compiledN(rng *rand.Rand, big int) int {
	if testing.Short() {
		return big + 1 + rng.IntN(big/2)
	}
	return big + rng.IntN(200)
}

// compareToBound holds the simulated trace to kernelstest's bound around the
// mirror's and returns how many elements of O the simulation changed and the
// first element outside the bound.
func compareToBound(t *testing.T, c Config, sim, mirror []*instrument.Record, worst map[string]float64) (int, error) {
	t.Helper()
	h := c.Header(instrument.SourceGPU, "")
	h.NumSMs = 1 // the stand-in's records claim SM 0 and a moment
	if len(sim) != len(mirror) {
		t.Fatalf("%+v: %d simulated records, %d mirror records", c, len(sim), len(mirror))
	}
	bnd := kernelstest.NewBounds(&h)
	differ := 0
	var first error
	for k := range mirror {
		if mirror[k].Kind != instrument.KindInputs {
			sim[k].TStart, sim[k].TEnd = 1, 2
		}
		if err := kernelstest.CompareRecords(&h, sim[k], mirror[k], bnd.Of(mirror[k]), worst); err != nil && first == nil {
			first = fmt.Errorf("record %d: %w", k, err)
		}
		for x := range sim[k].O {
			if sim[k].O[x] != mirror[k].O[x] {
				differ++
			}
		}
	}
	return differ, first
}

// boundHolds runs the mirror and a simulated GPU (sim, from g, drawn from
// rng) on each of runs and holds every element of the simulated trace to
// kernelstest's bound. A run the simulation leaves unchanged tries nothing;
// the test fails when that is more than a quarter of them. The worst ratio
// per array, and the run it came from, say how much room the bound leaves.
func boundHolds(t *testing.T, rng *rand.Rand, runs []Config, sim func(c Config, g *simulatedGPU) []*instrument.Record) {
	t.Helper()
	worst, at := map[string]float64{}, map[string]Config{}
	unchanged := 0
	for _, c := range runs {
		mirror := mirrorTrace(t, c)
		g := &simulatedGPU{rng: rand.New(rand.NewPCG(rng.Uint64(), 1))}
		ratios := map[string]float64{}
		differ, err := compareToBound(t, c, sim(c, g), mirror, ratios)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if differ == 0 {
			unchanged++ // a small or one-hot run may leave every value as it was
		}
		for name, w := range ratios {
			if w > worst[name] {
				worst[name], at[name] = w, c
			}
		}
	}
	if unchanged > len(runs)/4 {
		t.Fatalf("the simulated GPU changed nothing in %d of %d runs: the test tries too little of the bound", unchanged, len(runs))
	}
	for _, name := range slices.Sorted(maps.Keys(worst)) {
		c := at[name]
		t.Logf("%-6s worst difference/bound %.3g (N=%d d=%d %d×%d causal=%v %s, of %d runs)", name, worst[name], c.N, c.D, c.Br, c.Bc, c.Causal, c.Pattern, len(runs))
	}
}

// boundEdges is what every bound test tries first, under -short as in a
// full run: each edge shape as a run of v (ShapeConfigs), and v's compiled
// tiles with a ragged N in the two patterns whose O comes closest to the
// bounds (normal and peaked: many weights of P far from 0 and 1, so many
// bf16(P) on a rounding boundary), causal and not.
func boundEdges(rng *rand.Rand, v instrument.Variant) []Config {
	runs := ShapeConfigs(rng, v)
	for k := range CompiledTiles[v] {
		runs = append(runs, CompiledConfig(rng, v, k, k%2 == 0, instrument.PatternNormal), CompiledConfig(rng, v, k, k%2 == 1, instrument.PatternPeaked))
	}
	return runs
}

// bf16BoundConfig draws a run of the bf16 flash kernel v for the bound's
// tests: on even n one of the mirror's odd shapes (ragged d and Bc, toy
// sizes), on odd n one the GPU runs (v's compiled tiles), N ragged
// (compiledN).
func bf16BoundConfig(rng *rand.Rand, n int, v instrument.Variant) Config {
	c := gpuConfig(rng, v)
	if n%2 == 0 {
		c.N = 1 + rng.IntN(90)
		c.D, c.Br, c.Bc = 1+rng.IntN(40), 1+rng.IntN(min(c.N, 20)), 1+rng.IntN(min(c.N, 20))
	} else {
		c.N = compiledN(rng, max(c.Br, c.Bc))
		c.Batch, c.Heads = 1, 1
	}
	c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	return c
}

// TestBF16FlashBoundHoldsForOtherArithmetic runs each bf16 flash kernel's
// mirror and the simulated GPU (each mma summed in another order, rounding
// or truncating; each ex2 or expf up to 2 ulp off) on the same runs, the
// edges (boundEdges) and fresh random ones (60, or 12 under -short), and
// holds every element of the simulated trace to the kernel's bound, as the
// GPU suite holds the GPU's.
func TestBF16FlashBoundHoldsForOtherArithmetic(t *testing.T) {
	t.Parallel()
	for _, v := range BF16FlashVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			rng := testrand.New(t)
			runs := boundEdges(rng, v)
			for n := range testrand.Runs(60, 6) {
				runs = append(runs, bf16BoundConfig(rng, n, v))
			}
			boundHolds(t, rng, runs, func(c Config, g *simulatedGPU) []*instrument.Record {
				return MirrorBF16FlashWith(v, c, g.mma, g.exp(v))
			})
		})
	}
}
