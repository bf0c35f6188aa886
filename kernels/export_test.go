package kernels

import "flashstep/instrument"

// BF16FlashVariants are the bf16 flash kernels, one block walk
// (fastArith.block) in two softmax forms: flash2_fast's exp2 with the scale
// folded in, flash2_mma's natural units and expf. Their tests run for both.
var BF16FlashVariants = []instrument.Variant{instrument.VariantFlash2Fast, instrument.VariantFlash2MMA}

// MirrorBF16FlashWith runs the mirror of v, a bf16 flash kernel, over c with
// other choices of the arithmetic the kernel leaves unspecified (the sum
// inside one mma, and its exponential: flash2_fast's ex2.approx, flash2_mma's
// expf), and returns its whole trace in order: a stand-in for the GPU that
// tests hold to the GPU bound.
func MirrorBF16FlashWith(v instrument.Variant, c Config, mma func(acc float32, a, b []float32, stride int) float32, exp func(float32) float32) []*instrument.Record {
	c.Variant = v
	a := fastArith{mma: mma}
	switch v {
	case instrument.VariantFlash2Fast:
		a.ex2 = exp
	case instrument.VariantFlash2MMA:
		a.exp = exp
	default:
		panic("MirrorBF16FlashWith: " + v.String() + " is no bf16 flash kernel")
	}
	recs, ins := inputsRecords(&c)
	bhs, qs := c.TracedBH(), c.TracedQ()
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			a.block(&c, ins[bh], bh, i, func(_ int, r *instrument.Record) { recs = append(recs, r) })
		}
	}
	return recs
}

// MirrorFlash2BwdWith runs flash2_bwd's mirror over c with another expf,
// another order of the blocks' adds into dQ and another add, and returns
// its whole trace in order: a stand-in for the GPU.
func MirrorFlash2BwdWith(c Config, exp func(float32) float32, blockOrder func(tc int) []int, dqAdd func(dq, part float32) float32) []*instrument.Record {
	c.Variant = instrument.VariantFlash2Bwd
	a := bwdArith{exp: exp, blockOrder: blockOrder, dqAdd: dqAdd}
	return backwardTrace(&c, func(in *Inputs, bh int) *bwdHead { return a.head(&c, in, bh) })
}

// MirrorFlash2BwdMMAWith runs flash2_bwd_mma's mirror over c with another
// mma sum, ex2, order of the blocks' adds into dQ and add: a stand-in for
// the GPU, its whole trace in order.
func MirrorFlash2BwdMMAWith(c Config, mma func(acc float32, a, b []float32, stride int) float32, ex2 func(float32) float32,
	blockOrder func(tc int) []int, dqAdd func(dq, part float32) float32) []*instrument.Record {
	c.Variant = instrument.VariantFlash2BwdMMA
	a := mmaBwdArith{mma: mma, ex2: ex2, blockOrder: blockOrder, dqAdd: dqAdd}
	return backwardTrace(&c, func(in *Inputs, bh int) *bwdHead { return a.head(&c, in, bh) })
}

// backwardTrace is a backward mirror's whole trace in order, from the
// batch-heads' walks that head makes.
func backwardTrace(c *Config, head func(in *Inputs, bh int) *bwdHead) []*instrument.Record {
	recs, ins := inputsRecords(c)
	heads := map[int]*bwdHead{}
	for bh := range ins {
		heads[bh] = head(ins[bh], bh)
	}
	for _, s := range Schedule(c) {
		h := heads[s.BH]
		if s.J >= 0 {
			recs = append(recs, h.tiles[[3]int{int(s.Kind), s.I, s.J}])
		} else {
			recs = append(recs, h.q[[2]int{int(s.Kind), s.I}])
		}
	}
	return recs
}

// inputsRecords is a trace's opening, the inputs record of every traced
// batch-head, and those inputs by batch-head.
func inputsRecords(c *Config) ([]*instrument.Record, map[int]*Inputs) {
	var recs []*instrument.Record
	ins := map[int]*Inputs{}
	for bh := c.TracedBH().Lo; bh < c.TracedBH().Hi; bh++ {
		ins[bh] = InputsFor(c, bh)
		recs = append(recs, &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: ins[bh].Q, K: ins[bh].K, V: ins[bh].V})
	}
	return recs, ins
}

// Ex2 and MMAChunk are the mirror's own choices, for tests to perturb.
// RandomConfig, EpilogueOutputs, FirstOrderBounds, RunsOf, EdgeConfigs,
// ShapeConfigs, CompiledConfig and CompiledTiles are mirror_test.go's
// randomConfig, epilogueOutputs, firstOrderBounds, runsOf, edgeConfigs,
// shapeConfigs, compiledConfig and compiledTiles. RunTrace, NoNaN and
// MaxAbsScore (mirror_test.go's runTrace, noNaN and maxAbsScore) and
// BackwardConfig (flash2_bwd_test.go's backwardConfig) are what
// flash2_bwd_grad_test.go, outside the package to reach kernelstest's
// gradient oracle, shares with the package's own tests.
var (
	Ex2              = ex2
	MMAChunk         = mmaChunk
	RandomConfig     = randomConfig
	EpilogueOutputs  = epilogueOutputs
	FirstOrderBounds = firstOrderBounds
	RunsOf           = runsOf
	EdgeConfigs      = edgeConfigs
	ShapeConfigs     = shapeConfigs
	CompiledConfig   = compiledConfig
	CompiledTiles    = compiledTiles
	RunTrace         = runTrace
	NoNaN            = noNaN
	MaxAbsScore      = maxAbsScore
	BackwardConfig   = backwardConfig
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
	recs, ins := inputsRecords(&c)
	bhs, qs := c.TracedBH(), c.TracedQ()
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
