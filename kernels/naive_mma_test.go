package kernels_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/launch"
)

// TestNaiveMMABoundHoldsForOtherArithmetic: naive_mma's mirror against the
// same runs with every mma summed in another order (simulatedGPU), each
// element held to the bound the GPU suite holds the GPU's trace to.
func TestNaiveMMABoundHoldsForOtherArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	worst := map[string]float64{}
	changed := 0
	for n := range 40 {
		c := kernelstest.RandomGPUConfig(rng, 300)
		c.Variant = instrument.VariantNaiveMMA
		if n%2 == 0 { // the mirror's other shapes: ragged d and tiles, toy sizes
			c.N = 1 + rng.IntN(90)
			c.D, c.Br, c.Bc = 1+rng.IntN(40), 1+rng.IntN(min(c.N, 20)), 1+rng.IntN(min(c.N, 20))
		} else {
			f := launch.NaiveMMAInstances[rng.IntN(len(launch.NaiveMMAInstances))]
			c.Br, c.Bc, c.D = launch.NaiveMMABr, f.Bc, f.D
			c.N = max(c.Br, c.Bc) + rng.IntN(200)
		}
		c.Batch, c.Heads, c.TraceBH, c.TraceQ = 1, 1, instrument.Range{}, instrument.Range{}
		c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		h := c.Header(instrument.SourceGPU, "")
		h.NumSMs = 1 // the stand-in's records claim SM 0 and a moment
		var mirror []*instrument.Record
		if err := RunMirror(context.Background(), c, func(r *instrument.Record) error { mirror = append(mirror, r); return nil }); err != nil {
			t.Fatal(err)
		}
		g := &simulatedGPU{rng: rand.New(rand.NewPCG(rng.Uint64(), 1))}
		sim := MirrorNaiveMMAWith(c, g.mma)
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
				t.Fatalf("%+v record %d (%s): %v", c, k, mirror[k].Kind, err)
			}
			for x := range sim[k].S {
				if sim[k].S[x] != mirror[k].S[x] {
					differ++
				}
			}
		}
		if differ > 0 {
			changed++
		}
	}
	// A small d or exact-sum inputs may leave a run unchanged; most must not.
	if changed < 20 {
		t.Fatalf("the simulated GPU changed only %d of 40 runs: the test tries too little of the bound", changed)
	}
	for name, w := range worst {
		t.Logf("%-6s worst difference/bound %.3g", name, w)
	}
}
