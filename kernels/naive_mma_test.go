package kernels_test

import (
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
)

// naiveMMABoundConfig draws a run of naive_mma for its bound's test: on
// even n one of the mirror's other shapes (ragged d and tiles, toy sizes),
// on odd n one at its compiled tiles, N ragged (compiledN).
func naiveMMABoundConfig(rng *rand.Rand, n int) Config {
	c := gpuConfig(rng, instrument.VariantNaiveMMA)
	if n%2 == 0 {
		c.N = 1 + rng.IntN(90)
		c.D, c.Br, c.Bc = 1+rng.IntN(40), 1+rng.IntN(min(c.N, 20)), 1+rng.IntN(min(c.N, 20))
	} else {
		tiles := Info(instrument.VariantNaiveMMA).Tiles
		f := tiles[rng.IntN(len(tiles))]
		c.Br, c.Bc, c.D = f.Br, f.Bc, f.D
		c.N = compiledN(rng, max(c.Br, c.Bc))
	}
	c.Batch, c.Heads, c.TraceBH, c.TraceQ = 1, 1, instrument.Range{}, instrument.Range{}
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	return c
}

// TestNaiveMMABoundHoldsForOtherArithmetic: naive_mma's mirror against the
// same runs with every mma summed in another order (simulatedGPU), each
// element held to the bound the GPU suite holds the GPU's trace to: the
// edges (boundEdges), then 40 fresh random runs, or 8 under -short.
func TestNaiveMMABoundHoldsForOtherArithmetic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	runs := boundEdges(rng, instrument.VariantNaiveMMA)
	for n := range testrand.Runs(40, 8) {
		runs = append(runs, naiveMMABoundConfig(rng, n))
	}
	boundHolds(t, rng, runs, func(c Config, g *simulatedGPU) []*instrument.Record {
		return MirrorNaiveMMAWith(c, g.mma)
	})
}
