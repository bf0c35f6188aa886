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

// Ex2 and MMAChunk are the mirror's own choices, for tests to perturb.
var (
	Ex2      = ex2
	MMAChunk = mmaChunk
)
