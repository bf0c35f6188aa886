package kernels

import "flashstep/instrument"

// MirrorFlash2FastWith runs flash2_fast's mirror over c with other choices of
// the arithmetic the kernel leaves unspecified (the sum inside one mma, and
// ex2.approx), and returns its whole trace in order: a stand-in for the GPU
// that tests hold to the GPU bound.
func MirrorFlash2FastWith(c Config, mma func(acc float32, a, b []float32, stride int) float32, ex2 func(float32) float32) []*instrument.Record {
	a := fastArith{mma: mma, ex2: ex2}
	var recs []*instrument.Record
	bhs, qs := c.TracedBH(), c.TracedQ()
	ins := map[int]*Inputs{}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		ins[bh] = InputsFor(&c, bh)
		recs = append(recs, &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: ins[bh].Q, K: ins[bh].K, V: ins[bh].V})
	}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			a.block(&c, ins[bh], bh, i, func(_ int, r *instrument.Record) { recs = append(recs, r) })
		}
	}
	return recs
}

// MirrorFlash2MMAWith runs flash2_mma's mirror over c with other choices of
// the arithmetic the kernel leaves unspecified (the sum inside one mma, and
// expf), and returns its whole trace in order: a stand-in for the GPU.
func MirrorFlash2MMAWith(c Config, mma func(acc float32, a, b []float32, stride int) float32, exp func(float32) float32) []*instrument.Record {
	c.Variant = instrument.VariantFlash2MMA
	a := fastArith{mma: mma, exp: exp}
	var recs []*instrument.Record
	bhs, qs := c.TracedBH(), c.TracedQ()
	ins := map[int]*Inputs{}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		ins[bh] = InputsFor(&c, bh)
		recs = append(recs, &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: ins[bh].Q, K: ins[bh].K, V: ins[bh].V})
	}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			a.block(&c, ins[bh], bh, i, func(_ int, r *instrument.Record) { recs = append(recs, r) })
		}
	}
	return recs
}

// Ex2 and MMAChunk are the mirror's own choices, for tests to perturb.
var (
	Ex2      = ex2
	MMAChunk = mmaChunk
)

// MirrorNaiveMMAWith runs naive_mma's mirror over c with another sum inside
// each mma, and returns its whole trace in order (phase by phase over the
// grid, as the three launches run): a stand-in for the GPU.
func MirrorNaiveMMAWith(c Config, mma func(acc float32, a, b []float32, stride int) float32) []*instrument.Record {
	a := naiveMMA
	a.score = func(q, k []float32, scale float32) float32 {
		var acc float32
		for k0 := 0; k0 < len(q); k0 += 16 {
			k1 := min(k0+16, len(q))
			acc = mma(acc, q[k0:k1], k[k0:k1], 1)
		}
		return float32(acc * scale)
	}
	a.pvTile = func(acc float32, p []float32, v []float32, stride int) float32 {
		for c0 := 0; c0 < len(p); c0 += 16 {
			c1 := min(c0+16, len(p))
			acc = mma(acc, p[c0:c1], v[c0*stride:], stride)
		}
		return acc
	}
	phases := make([][]*instrument.Record, naivePhases)
	var recs []*instrument.Record
	bhs, qs := c.TracedBH(), c.TracedQ()
	ins := map[int]*Inputs{}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		ins[bh] = InputsFor(&c, bh)
		recs = append(recs, &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: ins[bh].Q, K: ins[bh].K, V: ins[bh].V})
	}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			a.block(&c, ins[bh], bh, i, func(ph int, r *instrument.Record) { phases[ph] = append(phases[ph], r) })
		}
	}
	for _, p := range phases {
		recs = append(recs, p...)
	}
	return recs
}
