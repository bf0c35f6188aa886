package kernels_test

import (
	"math"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

// decode_split: its splits' walks are flash2_fast's (held by the family
// tests through decode_group's shapes); what is its own is the rule that
// cuts the keys, the partials, the merge, and the merge's GPU bound.

// TestDecodeSplitsFillTheGPU: the splits cover every kv-tile, none empty;
// split, the grid is one wave of DecodeSMs·DecodeBlocksPerSM blocks at
// most, and its splits at least half of those one wave holds.
func TestDecodeSplitsFillTheGPU(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 200 {
		c := Config{Variant: instrument.VariantDecodeSplit, N: 1 + rng.IntN(1<<17), D: 128, Br: 1, Bc: 64, Batch: 1 + rng.IntN(64), Heads: 32}
		c.KVHeads = []int{1, 8, 32}[rng.IntN(3)]
		splits, per := DecodeSplits(&c)
		if splits*per < c.Tc() || (splits-1)*per >= c.Tc() {
			t.Fatalf("%+v: %d splits of %d do not cut %d kv-tiles into non-empty splits", c, splits, per, c.Tc())
		}
		wave := DecodeSMs * DecodeBlocksPerSM
		blocks := c.Batch * c.KVHeadCount() * c.Tr() * splits
		if splits > 1 && blocks > wave {
			t.Fatalf("%+v: %d splits make %d blocks, more than one wave of %d", c, splits, blocks, wave)
		}
		if want := min(c.Tc(), wave/(c.Batch*c.KVHeadCount()*c.Tr())); 2*splits < want {
			t.Fatalf("%+v: %d splits (%d blocks), under half the %d one wave of %d holds", c, splits, blocks, want, wave)
		}
	}
	c := Config{Variant: instrument.VariantDecodeSplit, N: 4096, Nq: 1, D: 128, Br: 1, Bc: 64, Batch: 1, Heads: 32, KVHeads: 8}
	if s, p := DecodeSplits(&c); s != 32 || p != 2 {
		t.Fatalf("batch 1, 8 K/V heads, 4096 keys: %d splits of %d kv-tiles, want 32 of 2 (the doc's example)", s, p)
	}
}

// TestSplitPartialsAndMergeMatchFloat64: each split's partial is exact
// attention over its keys alone (O_s and LSE_s), the weights are
// exp(LSE_s − LSE) and sum to 1, and the merged row is exact attention over
// all the keys, every element, on every shape decode_split takes.
func TestSplitPartialsAndMergeMatchFloat64(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	tiles := Info(instrument.VariantDecodeSplit).Tiles
	for range testrand.Runs(30, 6) {
		tile := tiles[rng.IntN(len(tiles))]
		c := Config{Variant: instrument.VariantDecodeSplit, N: 1 + rng.IntN(400), D: tile.D, Br: tile.Br, Bc: tile.Bc, Batch: 1,
			Heads: 1 << rng.IntN(3), Causal: rng.IntN(2) == 0, Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))], Seed: rng.Uint64()}
		c.Nq = []int{1, 1 + rng.IntN(c.N)}[rng.IntN(2)]
		c.KVHeads = max(1, c.Heads>>rng.IntN(3))
		recs, err := mirrorRecords(c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		_, per := DecodeSplits(&c)
		type exact struct {
			in     *Inputs
			o, lse []float64
		}
		refs := map[int]*exact{}
		for _, r := range recs {
			ref := refs[r.BH]
			if ref == nil {
				ref = &exact{in: InputsFor(&c, r.BH)}
				ref.o, ref.lse = ReferenceOf(&c, ref.in)
				refs[r.BH] = ref
			}
			in := ref.in
			switch r.Kind {
			case instrument.KindSplitEnd:
				// Exact attention over the split's keys: K and V cut to
				// [0, last), the rows' own mask past their positions.
				lo, hi := r.J*per*c.Bc, min(c.N, (r.J+1)*per*c.Bc)
				for row := range r.RowsValid {
					q := r.I*c.Br + row
					lse, o := splitAttention64(&c, in, q, lo, hi)
					if math.IsInf(lse, -1) {
						if !math.IsInf(float64(r.LSE[row]), -1) {
							t.Fatalf("%+v: split %d of query %d sees no key, but its LSE is %v", c, r.J, q, r.LSE[row])
						}
						continue
					}
					if d := math.Abs(float64(r.LSE[row]) - lse); !(d <= 1e-3*math.Max(1, math.Abs(lse))) {
						t.Fatalf("%+v: split %d query %d: LSE_s %v, float64 %v", c, r.J, q, r.LSE[row], lse)
					}
					holdClose(t, c, "split's O_s", r.O[row*c.D:(row+1)*c.D], o)
				}
			case instrument.KindMerge:
				for row := range r.RowsValid {
					q := r.I*c.Br + row
					lse := ref.lse
					if d := math.Abs(float64(r.LSE[row]) - lse[q]); !(d <= 1e-3*math.Max(1, math.Abs(lse[q]))) {
						t.Fatalf("%+v: merge of query %d: LSE %v, float64 %v", c, q, r.LSE[row], lse[q])
					}
				}
			case instrument.KindEpilogue:
				o := ref.o
				for row := range r.RowsValid {
					q := r.I*c.Br + row
					holdClose(t, c, "merged O", r.O[row*c.D:(row+1)*c.D], o[q*c.D:(q+1)*c.D])
				}
			}
		}
		// The weights of a row sum to 1, to within the float32 rounding of
		// the LSEs they are made from: each weight is exp(LSE_s − LSE), so
		// an LSE off by half its ulp moves every weight of the row by that
		// fraction (large scores give LSEs in the hundreds, whose ulp is
		// above 1e-5).
		sums := map[[3]int]float64{}
		ulps := map[[3]int]float64{}
		for _, r := range recs {
			if r.Kind == instrument.KindMerge {
				for row := range r.RowsValid {
					k := [3]int{r.BH, r.I, row}
					sums[k] += float64(r.Alpha[row])
					ulps[k] = max(ulps[k], ulpOf(r.LSE[row]))
				}
			}
		}
		for k, s := range sums {
			if bound := 1e-5 + 4*ulps[k]; !(math.Abs(s-1) <= bound) {
				t.Fatalf("%+v: the weights of batch-head %d q-tile %d row %d sum to %v (bound 1 ± %.3g)", c, k[0], k[1], k[2], s, bound)
			}
		}
	}
}

// splitAttention64 is exact attention of query row q over keys [lo, hi)
// under c's mask: the row's LSE over them and O (−Inf and zeros where it
// sees none).
func splitAttention64(c *Config, in *Inputs, q, lo, hi int) (float64, []float64) {
	d := c.D
	pos := c.QueryOffset() + q
	scale := 1 / math.Sqrt(float64(d))
	var s []float64
	var keys []int
	mx := math.Inf(-1)
	for k := lo; k < hi; k++ {
		if c.Causal && k > pos {
			break
		}
		var dot float64
		for x := range d {
			dot += float64(in.Q[q*d+x]) * float64(in.K[k*d+x])
		}
		s, keys = append(s, dot*scale), append(keys, k)
		mx = math.Max(mx, dot*scale)
	}
	o := make([]float64, d)
	if len(s) == 0 {
		return mx, o
	}
	var l float64
	for n, k := range keys {
		p := math.Exp(s[n] - mx)
		l += p
		for x := range d {
			o[x] += p * float64(in.V[k*d+x])
		}
	}
	for x := range o {
		o[x] /= l
	}
	return mx + math.Log(l), o
}

// holdClose holds a row of O to float64 at the bf16 kernels' tolerance:
// relative error under 1e-2, no NaN.
func holdClose(t *testing.T, c Config, what string, got []float32, want []float64) {
	t.Helper()
	var diff2, ref2 float64
	for x := range want {
		if math.IsNaN(float64(got[x])) {
			t.Fatalf("%+v: %s[%d] is NaN", c, what, x)
		}
		diff2 += (float64(got[x]) - want[x]) * (float64(got[x]) - want[x])
		ref2 += want[x] * want[x]
	}
	if rel := math.Sqrt(diff2 / math.Max(ref2, 1e-300)); !(rel <= 1e-2) {
		t.Fatalf("%+v: %s off float64 by %.3g relative", c, what, rel)
	}
}

// TestMergeBoundCatchesWrongMerges: the merge's GPU bound (kernelstest's
// DecodeSplitStep) lets through a merge whose expf and logf are 2 ulp off
// the mirror's, the GPU's allowance, and catches merges with a plausible
// mistake: weights against the largest split's LSE instead of the row's
// (the partials not rescaled to a common sum), weights that forget the
// split's own l (exp of the max, not of the LSE, differences), and a merge
// in bf16.
func TestMergeBoundCatchesWrongMerges(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	type merge func(c *Config, parts []*instrument.Record) []*instrument.Record
	offBy2 := func(f func(float32) float32) func(float32) float32 {
		return func(x float32) float32 {
			y := f(x)
			for range 2 {
				y = math.Nextafter32(y, float32(math.Inf(1)))
			}
			return y
		}
	}
	exp := func(x float32) float32 { return float32(math.Exp(float64(x))) }
	log := func(x float32) float32 { return float32(math.Log(float64(x))) }
	wrong := map[string]merge{
		"weights against the largest split": func(c *Config, parts []*instrument.Record) []*instrument.Record {
			out := DecodeMerge(c, parts, exp, log)
			for k, r := range out[:len(parts)] {
				reweigh(c, r, parts, k, func(row int) float32 {
					mx := float32(math.Inf(-1))
					for _, p := range parts {
						mx = max(mx, p.LSE[row])
					}
					return mx
				})
			}
			return out
		},
		"merge in bf16": func(c *Config, parts []*instrument.Record) []*instrument.Record {
			out := DecodeMerge(c, parts, exp, log)
			for _, r := range out {
				for x := range r.O {
					r.O[x] = RoundBF16(r.O[x])
				}
			}
			return out
		},
	}
	right := func(c *Config, parts []*instrument.Record) []*instrument.Record {
		return DecodeMerge(c, parts, offBy2(exp), offBy2(log))
	}
	caught := map[string]int{}
	runs := testrand.Runs(20, 4)
	for range runs {
		c := Config{Variant: instrument.VariantDecodeSplit, N: 150 + rng.IntN(300), Nq: 1 + rng.IntN(3), D: 64, Br: 4, Bc: 64, Batch: 1, Heads: 2,
			Pattern: instrument.PatternNormal, Seed: rng.Uint64()}
		recs, err := mirrorRecords(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := holdMerge(c, recs, right); err != nil {
			t.Fatalf("%+v: a merge 2 ulp off in expf and logf fails the bound: %v", c, err)
		}
		for name, m := range wrong {
			if holdMerge(c, recs, m) != nil {
				caught[name]++
			}
		}
	}
	for name := range wrong {
		if caught[name] != runs {
			t.Errorf("the bound caught %q in %d of %d runs", name, caught[name], runs)
		}
	}
}

// reweigh redoes merge record k's O with split weights against base(row)
// instead of the row's LSE: the O so far recomputed from the partials.
func reweigh(c *Config, r *instrument.Record, parts []*instrument.Record, k int, base func(row int) float32) {
	for row := range c.Br {
		for x := range c.D {
			var o float32
			for s := 0; s <= k; s++ {
				w := float32(math.Exp(float64(parts[s].LSE[row] - base(row))))
				o = float32(math.FMA(float64(w), float64(parts[s].O[row*c.D+x]), float64(o)))
			}
			r.O[row*c.D+x] = o
		}
	}
}

// holdMerge replaces the mirror's merge records (and epilogue) of every
// q-tile with merge's, from the mirror's split ends, and holds them to the
// bound around the mirror's: the first error.
func holdMerge(c Config, recs []*instrument.Record, merge func(c *Config, parts []*instrument.Record) []*instrument.Record) error {
	h := c.Header(instrument.SourceGPU, "")
	h.NumSMs = 132
	b := kernelstest.NewBounds(&h)
	parts := map[[2]int][]*instrument.Record{}
	var gpu map[[2]int][]*instrument.Record
	worst := map[string]float64{}
	for _, m := range recs {
		bnd := b.Of(m)
		g := m
		switch m.Kind {
		case instrument.KindSplitEnd:
			k := [2]int{m.BH, m.I}
			parts[k] = append(parts[k], m)
		case instrument.KindMerge, instrument.KindEpilogue:
			k := [2]int{m.BH, m.I}
			if gpu == nil {
				gpu = map[[2]int][]*instrument.Record{}
			}
			if gpu[k] == nil {
				gpu[k] = merge(&c, parts[k])
			}
			idx := m.J
			if m.Kind == instrument.KindEpilogue {
				idx = len(parts[k])
			}
			g = gpu[k][idx]
		}
		if m.Kind == instrument.KindInputs {
			continue
		}
		gc := *g
		gc.SM, gc.TStart, gc.TEnd = 0, 1, 1
		if err := kernelstest.CompareRecords(&h, &gc, m, bnd, worst); err != nil {
			if strings.Contains(err.Error(), "structure") {
				panic(err)
			}
			return err
		}
	}
	return nil
}

// ulpOf is the gap from |x| to the next float32 above it.
func ulpOf(x float32) float64 {
	a := float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}
