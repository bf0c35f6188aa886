package kernels_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

// TestFlash2BwdBoundHolds tries the GPU comparison's bound for flash2_bwd
// on the CPU: a stand-in for the GPU (expf 2 ulp either side, the blocks'
// adds into dQ in a random order, each flushing subnormal numbers to zero
// as atom.add.f32 does) must lie within kernelstest's bound of the mirror,
// every element; and one whose expf is 64 ulp off must not.
func TestFlash2BwdBoundHolds(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	v := instrument.VariantFlash2Bwd
	var runs []Config
	for _, c := range append(kernelstest.EdgeGPUConfigs(rng), boundEdges(rng, v)...) {
		if c.Variant == v {
			runs = append(runs, c)
		}
	}
	for n := range testrand.Runs(60, 12) {
		c := gpuConfig(rng, v)
		if n%2 == 0 { // an odd shape of the mirror's
			c.N = 1 + rng.IntN(60)
			c.D, c.Br, c.Bc = 1+rng.IntN(24), 1+rng.IntN(min(c.N, 12)), 1+rng.IntN(min(c.N, 12))
		}
		c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
		runs = append(runs, c)
	}
	for k := range runs {
		runs[k].TraceQ = instrument.Range{} // the bound walks every step of a block
	}
	trials := bwdTrials(rng, runs, func(c Config, g *simulatedGPU) []*instrument.Record {
		return MirrorFlash2BwdWith(c, g.expf, shuffled(g.rng), atomicAddF32)
	}, func(c Config, g *simulatedGPU) []*instrument.Record {
		// A wrong GPU: expf 64 ulp off. Where it moves some gradient, the
		// bound must see it.
		return MirrorFlash2BwdWith(c, func(x float32) float32 { return farOff(exactExp(x)) }, shuffled(g.rng), atomicAddF32)
	})
	changed, caught, tried, worst := tallyBwd(t, runs, trials)
	if changed < len(runs)*3/4 {
		t.Fatalf("the simulated GPU changed a gradient in only %d of %d runs", changed, len(runs))
	}
	if caught < tried*3/4 || tried < len(runs)/2 {
		t.Fatalf("a 64-ulp expf was caught in %d of %d runs it changed (of %d)", caught, tried, len(runs))
	}
	for name, w := range worst {
		t.Logf("%-5s worst difference/bound %.3g (%d runs)", name, w, len(runs))
	}
}

// bwdTrial is what one run of a backward bound test found: how many
// gradient elements the stand-in for the GPU moved and the first element
// outside the bound (or why the run could not be made), the same of the
// wrong stand-in, and the worst difference/bound of each array.
type bwdTrial struct {
	differ, badDiffer int
	err, badErr       error
	worst             map[string]float64
}

// bwdTrials holds the traces of sim (a stand-in for the GPU) and bad (a
// wrong one) to the bound around the mirror's, for each of runs. Both draw
// on one simulatedGPU a run, seeded from rng: one draw a run, in runs'
// order, as a loop over them would draw. The runs share nothing else, so
// they run side by side, GOMAXPROCS at a time, and find what one after
// another would (the mirror's own blocks run side by side in any case).
func bwdTrials(rng *rand.Rand, runs []Config, sim, bad func(c Config, g *simulatedGPU) []*instrument.Record) []bwdTrial {
	seeds := make([]uint64, len(runs))
	for k := range seeds {
		seeds[k] = rng.Uint64()
	}
	trials := make([]bwdTrial, len(runs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(runs), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(runs); k = int(next.Add(1) - 1) {
				c, tr := runs[k], &trials[k]
				mirror, err := mirrorRecords(c)
				if err != nil {
					tr.err = err
					continue
				}
				bnd := bwdBounds(c, mirror)
				g := &simulatedGPU{rng: rand.New(rand.NewPCG(seeds[k], 1))}
				tr.worst = map[string]float64{}
				tr.differ, tr.err = compareBwd(bnd, sim(c, g), mirror, tr.worst)
				tr.badDiffer, tr.badErr = compareBwd(bnd, bad(c, g), mirror, map[string]float64{})
			}
		})
	}
	wg.Wait()
	return trials
}

// tallyBwd fails the test at the first of runs whose stand-in left the
// bound, and counts the runs whose stand-in moved a gradient (changed),
// those whose wrong stand-in did (tried) and was caught (caught), with the
// worst difference/bound of each array over them all.
func tallyBwd(t *testing.T, runs []Config, trials []bwdTrial) (changed, caught, tried int, worst map[string]float64) {
	t.Helper()
	worst = map[string]float64{}
	for k, tr := range trials {
		if tr.err != nil {
			t.Fatalf("%+v: %v", runs[k], tr.err)
		}
		if tr.differ > 0 {
			changed++
		}
		if tr.badDiffer > 0 {
			tried++
			if tr.badErr != nil {
				caught++
			}
		}
		for name, w := range tr.worst {
			worst[name] = max(worst[name], w)
		}
	}
	return changed, caught, tried, worst
}

// bwdTraceBounds is kernelstest's bound around each record of a backward
// mirror's trace, walked once for every trace held to it.
type bwdTraceBounds struct {
	h   *instrument.Header
	rec []map[string][]float64
}

// bwdBounds walks kernelstest's bounds over mirror, the trace of c.
func bwdBounds(c Config, mirror []*instrument.Record) bwdTraceBounds {
	h := c.Header(instrument.SourceGPU, "")
	h.NumSMs = 1 // the stand-in's records claim SM 0 and a moment
	walk := kernelstest.NewBounds(&h)
	b := bwdTraceBounds{h: &h, rec: make([]map[string][]float64, len(mirror))}
	for k, m := range mirror {
		b.rec[k] = walk.Of(m)
	}
	return b
}

// compareBwd holds sim to kernelstest's bound around mirror (bnd, its
// bwdBounds), record by record, and counts the gradient elements (dQ, dK,
// dV) the two differ in.
func compareBwd(bnd bwdTraceBounds, sim, mirror []*instrument.Record, worst map[string]float64) (int, error) {
	differ := 0
	var first error
	for k := range mirror {
		if mirror[k].Kind != instrument.KindInputs {
			sim[k].TStart, sim[k].TEnd = 1, 2
		}
		if err := kernelstest.CompareRecords(bnd.h, sim[k], mirror[k], bnd.rec[k], worst); err != nil && first == nil {
			first = err
		}
		for _, pair := range [][2][]float32{{sim[k].DQ, mirror[k].DQ}, {sim[k].DK, mirror[k].DK}, {sim[k].DV, mirror[k].DV}} {
			for x := range pair[0] {
				if pair[0][x] != pair[1][x] {
					differ++
				}
			}
		}
	}
	return differ, first
}

// farOff moves r 64 ulp away from itself, up or down by its low bit.
func farOff(r float32) float32 {
	if r == 0 {
		return r
	}
	toward := float32(0)
	if math.Float32bits(r)&1 == 0 {
		toward = float32(math.Inf(1))
	}
	for range 64 {
		r = math.Nextafter32(r, toward)
	}
	return r
}

// TestFlash2BwdMMABoundHolds tries flash2_bwd_mma's GPU bound on the CPU: a
// stand-in for the GPU (each mma summed in another order, rounding or
// truncating; ex2 2 ulp either side; the blocks' adds into dQ in a random
// order, flushing subnormals) must lie within the bound of the mirror,
// every element; one whose ex2 is 2⁻¹⁰ off must not. (64 ulp, what
// flash2_bwd's test tries, is below what the mma sums' slack lets S move,
// and so P, by: some hundreds of ulp at d = 64.)
func TestFlash2BwdMMABoundHolds(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	v := instrument.VariantFlash2BwdMMA
	var runs []Config
	for _, c := range append(kernelstest.EdgeGPUConfigs(rng), boundEdges(rng, v)...) {
		if c.Variant == v {
			runs = append(runs, c)
		}
	}
	if testing.Short() && len(runs) > 4 {
		// Four of the edges, drawn afresh each run (the seed replays
		// them); make test-long tries every one.
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		runs = runs[:4]
	}
	for n := range testrand.Runs(30, 6) {
		runs = append(runs, bf16BoundConfig(rng, n, v))
	}
	for k := range runs {
		runs[k].TraceQ = instrument.Range{}
		if testing.Short() {
			// Every batch-head is the same arithmetic to the bound; the
			// edges' extra heads (three mirrors each at up to 64×128,
			// d = 128) were half this test's time.
			runs[k].Batch, runs[k].Heads, runs[k].TraceBH = 1, 1, instrument.Range{}
		}
	}
	trials := bwdTrials(rng, runs, func(c Config, g *simulatedGPU) []*instrument.Record {
		return MirrorFlash2BwdMMAWith(c, g.mma, g.ex2, shuffled(g.rng), atomicAddF32)
	}, func(c Config, g *simulatedGPU) []*instrument.Record {
		far := func(x float32) float32 { return float32(float64(Ex2(x)) * (1 + 0x1p-10)) }
		return MirrorFlash2BwdMMAWith(c, g.mma, far, shuffled(g.rng), atomicAddF32)
	})
	changed, caught, tried, worst := tallyBwd(t, runs, trials)
	if changed < len(runs)*3/4 {
		t.Fatalf("the simulated GPU changed a gradient in only %d of %d runs", changed, len(runs))
	}
	if caught < tried*3/4 || tried < len(runs)/2 {
		t.Fatalf("an ex2 2⁻¹⁰ off was caught in %d of %d runs it changed (of %d)", caught, tried, len(runs))
	}
	for name, w := range worst {
		t.Logf("%-5s worst difference/bound %.3g (%d runs)", name, w, len(runs))
	}
}

// shuffled is a random order of the kv-tiles' blocks: the GPU's order of
// their adds into dQ is not fixed.
func shuffled(g *rand.Rand) func(int) []int { return func(tc int) []int { return g.Perm(tc) } }

// atomicAddF32 is atom.add.f32: round to nearest even, subnormal inputs
// and results flushed to zero (with their sign).
func atomicAddF32(dq, part float32) float32 { return ftz(float32(ftz(dq) + ftz(part))) }

func ftz(x float32) float32 {
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}
