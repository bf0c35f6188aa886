// Package kernelstest holds what tests of the kernels, their mirrors and the
// GPU worker share: random run configurations the compiled kernels run, and
// (bounds.go and one file per rung) how far a GPU trace may lie from its
// mirror, element by element.
package kernelstest

import (
	"math/rand/v2"

	"flashstep/instrument"
	"flashstep/kernels"
)

// RandomGPUConfig draws a configuration the compiled kernels run, weighted
// toward small and ragged sizes.
func RandomGPUConfig(rng *rand.Rand, maxN int) kernels.Config {
	c := kernels.Config{
		Variant: instrument.Variants[rng.IntN(len(instrument.Variants))],
		Batch:   1 + rng.IntN(2),
		Heads:   1 + rng.IntN(2),
		Causal:  rng.IntN(2) == 0,
		Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))],
		Seed:    rng.Uint64(),
	}
	tiles := gpuTiles(c.Variant)
	t := tiles[rng.IntN(len(tiles))]
	c.Br, c.Bc, c.D = t.Br, t.Bc, t.D
	if kernels.Info(c.Variant).Tiles == nil && rng.IntN(2) == 0 { // a rung that runs any tile
		c.Br, c.Bc, c.D = 1+rng.IntN(40), 1+rng.IntN(40), 1+rng.IntN(96)
	}
	// N: mostly small and not a multiple of the tiles, sometimes up to maxN.
	switch rng.IntN(5) {
	case 4: // below the tile: one ragged tile each way
		c.N = 1 + rng.IntN(max(c.Br, c.Bc))
	case 0:
		c.N = max(c.Br, c.Bc) + rng.IntN(4*max(c.Br, c.Bc))
	case 1:
		c.N = max(c.Br, c.Bc) * (1 + rng.IntN(6))
	case 2:
		c.N = max(c.Br, c.Bc) + rng.IntN(300)
	default: // up to maxN, which may be below the tile (-maxn 100 on a 128-row rung)
		c.N = max(c.Br, c.Bc) + rng.IntN(max(1, maxN-max(c.Br, c.Bc)+1))
	}
	c.N = min(c.N, maxN)
	if c.N*c.N*(c.Batch*c.Heads) > 1<<22 {
		c.Batch, c.Heads = 1, 1
	}
	drawShape(rng, &c)
	if rng.IntN(3) == 0 {
		bh := c.Batch * c.Heads
		lo := rng.IntN(bh)
		c.TraceBH = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(bh-lo)}
		lo = rng.IntN(c.Tr())
		c.TraceQ = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(c.Tr()-lo)}
	}
	if kernels.Info(c.Variant).Backward {
		c.TraceQ = instrument.Range{} // the bounds walk every step of a block (Flash2BwdStep)
	}
	return fit(c)
}

// EdgeGPUConfigs is, for every variant, a run at each tile the GPU runs it
// at (naive, which runs any tile, at flash2's and at a toy tile of its
// own), twice: causal with every block traced, and not causal on four
// batch-heads with a partial trace that skips the first of each and the
// first q-tile and ends on the ragged last one. N is ragged past a few
// tiles: the runs that put every kind of record at every kind of offset,
// the last partial tile's included, for the tests of where records go.
func EdgeGPUConfigs(rng *rand.Rand) []kernels.Config {
	var out []kernels.Config
	for _, v := range instrument.Variants {
		tiles := gpuTiles(v)
		if kernels.Info(v).Tiles == nil {
			tiles = append(tiles, kernels.Tile{Br: 3, Bc: 5, D: 7})
		}
		for k, tile := range tiles {
			c := kernels.Config{Variant: v, Br: tile.Br, Bc: tile.Bc, D: tile.D, Batch: 1, Heads: 2, Causal: true,
				Pattern: instrument.Patterns[k%len(instrument.Patterns)], Seed: rng.Uint64()}
			big := max(c.Br, c.Bc)
			c.N = max(1, 16/big)*big + 1 + rng.IntN(big)
			p := c
			p.Batch, p.Causal, p.Seed = 2, false, rng.Uint64()
			p.TraceBH = instrument.Range{Lo: 1, Hi: 3}
			p.TraceQ = instrument.Range{Lo: min(1, p.Tr()-1), Hi: p.Tr()}
			if kernels.Info(v).Backward {
				p.TraceQ = instrument.Range{} // its bounds walk every step of a block; the batch-heads stay a part
			}
			out = append(out, fit(c), fit(p))
		}
	}
	return out
}

// drawShape gives a rung that takes them fewer queries than keys (three
// draws in four: one query, or up to three q-tiles' worth, the last ragged)
// and grouped heads (1 to 8 query heads, 1 to all of them of K and V),
// within what its GPU kernel packs (GPULimits).
func drawShape(rng *rand.Rand, c *kernels.Config) {
	info := kernels.Info(c.Variant)
	if info.Shapes.GroupedHeads {
		c.Heads = 1 << rng.IntN(4)
		c.KVHeads = max(1, c.Heads>>rng.IntN(4))
	}
	if info.Shapes.Queries && rng.IntN(4) != 0 {
		c.Nq = 1
		if rng.IntN(2) == 0 {
			c.Nq = 1 + rng.IntN(min(c.N, 3*c.Br+1))
		}
	}
	FitShape(c)
}

// FitShape makes c's shape one its GPU kernel runs after its sizes
// changed: nq at most N, and as many heads of K and V as the kernel's
// limits need (decode_group packs a group's q-tiles into one atom); the
// defaults written as zero.
func FitShape(c *kernels.Config) {
	info := kernels.Info(c.Variant)
	c.Nq = min(c.Nq, c.N)
	for c.KVHeads != 0 && c.KVHeads < c.Heads && info.GPULimits != nil && info.GPULimits(c) != nil {
		c.KVHeads *= 2
	}
	if c.Nq == c.N {
		c.Nq = 0
	}
	if c.KVHeads == c.Heads {
		c.KVHeads = 0
	}
}

// fit narrows c's traced part until its trace is within the limit: the
// batch-heads, and the q-tiles but of a backward run, whose bounds need
// them all; a backward run too large for that gets fewer rows.
func fit(c kernels.Config) kernels.Config {
	for kernels.Info(c.Variant).Backward && c.TraceBytes() > kernels.MaxTraceBytes {
		c.TraceBH = instrument.Range{Lo: c.TracedBH().Lo, Hi: c.TracedBH().Lo + 1}
		if c.TraceBytes() > kernels.MaxTraceBytes {
			c.N = max(c.Br, c.Bc, c.N/2)
		}
	}
	for c.TraceBytes() > kernels.MaxTraceBytes {
		c.TraceQ = instrument.Range{Lo: c.TracedQ().Lo, Hi: c.TracedQ().Lo + max(1, c.TracedQ().Len()/2)}
		c.TraceBH = instrument.Range{Lo: c.TracedBH().Lo, Hi: c.TracedBH().Lo + 1}
	}
	return c
}

// gpuTiles are the tiles v is compiled at; for a rung that runs any tile
// its limits allow, the float32 rungs' (so that it steps beside them).
func gpuTiles(v instrument.Variant) []kernels.Tile {
	if t := kernels.Info(v).Tiles; t != nil {
		return t
	}
	return kernels.Float32Tiles
}
