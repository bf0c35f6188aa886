package kernels

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

const eps32 = 1.0 / (1 << 24) // unit roundoff of float32

// randomConfig draws a configuration weighted toward toy and ragged sizes:
// N rarely a multiple of the tiles, Br ≠ Bc, causal or not, any pattern, and
// sometimes a partial trace selection.
func randomConfig(rng *rand.Rand) Config {
	c := Config{
		Variant: instrument.Variants[rng.IntN(len(instrument.Variants))],
		Batch:   1 + rng.IntN(2),
		Heads:   1 + rng.IntN(3),
		Causal:  rng.IntN(2) == 0,
		Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))],
		Seed:    rng.Uint64(),
	}
	switch rng.IntN(4) {
	case 0: // toy, every number legible
		c.N, c.D, c.Br, c.Bc = 4+rng.IntN(13), 2+rng.IntN(7), 1+rng.IntN(4), 1+rng.IntN(4)
	case 1, 2: // small and ragged; now and then a tile larger than N
		c.N, c.D = 1+rng.IntN(100), 1+rng.IntN(48)
		c.Br, c.Bc = 1+rng.IntN(min(c.N, 24)), 1+rng.IntN(min(c.N, 24))
		if rng.IntN(4) == 0 {
			c.Br, c.Bc = c.N+rng.IntN(24), 1+rng.IntN(c.N+24)
		}
	default: // real tile sizes
		c.N, c.D = 64+rng.IntN(260), []int{32, 64, 128}[rng.IntN(3)]
		c.Br, c.Bc = []int{16, 32, 64}[rng.IntN(3)], []int{16, 32, 64}[rng.IntN(3)]
		c.Batch, c.Heads = 1, 1
	}
	if rng.IntN(4) == 0 {
		bh := c.Batch * c.Heads
		lo := rng.IntN(bh)
		c.TraceBH = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(bh-lo)}
		lo = rng.IntN(c.Tr())
		c.TraceQ = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(c.Tr()-lo)}
	}
	return c
}

// edgeShapes are the shapes that catch a wrong kernel where a random draw
// finds one only now and then, each for the reason beside it. Every random
// test of the mirrors runs all of them (edgeConfigs), under -short as in a
// full run, before its random draws; their seeds, and so their inputs, are
// fresh on every run.
var edgeShapes = []struct {
	why string
	c   Config
}{
	{"N = 1: one row, one key, one tile", Config{N: 1, D: 1, Br: 1, Bc: 1, Pattern: instrument.PatternNormal}},
	{"N = 1, causal, large logits, d odd", Config{N: 1, D: 7, Br: 1, Bc: 1, Causal: true, Pattern: instrument.PatternLarge}},
	{"N divisible by neither tile: both last tiles ragged; d odd; causal", Config{N: 13, D: 5, Br: 4, Bc: 5, Causal: true, Pattern: instrument.PatternLarge}},
	{"Br = N: one q-tile; the last kv-tile ragged", Config{N: 12, D: 3, Br: 12, Bc: 5, Causal: true, Pattern: instrument.PatternPeaked}},
	{"Br = Bc = N: one tile", Config{N: 20, D: 4, Br: 20, Bc: 20, Causal: true, Pattern: instrument.PatternNormal}},
	{"both tiles larger than N: one ragged tile each way, causal", Config{N: 5, D: 6, Br: 8, Bc: 16, Causal: true, Pattern: instrument.PatternPeaked}},
	{"N = 1 in tiles of 4 by 8: one row, the rest padding", Config{N: 1, D: 3, Br: 4, Bc: 8, Pattern: instrument.PatternLarge}},
	{"d at its limit", Config{N: 9, D: MaxD, Br: 4, Bc: 2, Pattern: instrument.PatternNormal}},
	{"Bc > Br, causal; d one past a 16-wide mma chunk", Config{N: 23, D: 17, Br: 3, Bc: 8, Causal: true, Pattern: instrument.PatternNormal}},
	{"Bc < Br, causal, large logits; d two chunks and one", Config{N: 23, D: 33, Br: 8, Bc: 3, Causal: true, Pattern: instrument.PatternLarge}},
	{"causal, the last q-tile ragged (5 of 8 rows) on the diagonal", Config{N: 37, D: 8, Br: 8, Bc: 8, Causal: true, Pattern: instrument.PatternPeaked}},
	{"Bc one and a quarter mma chunks, not whole 8-column atoms", Config{N: 41, D: 20, Br: 6, Bc: 20, Pattern: instrument.PatternPeaked}},
	{"several batch-heads, a partial trace ending on the ragged last q-tile", Config{N: 19, D: 9, Br: 4, Bc: 9, Batch: 2, Heads: 2, Causal: true,
		Pattern: instrument.PatternLarge, TraceBH: instrument.Range{Lo: 1, Hi: 3}, TraceQ: instrument.Range{Lo: 2, Hi: 5}}},
}

// compiledTiles are the tiles (Br, Bc, d) the GPU runs each variant at,
// its registry entry's; naive, which runs any tiles, takes the float32
// rungs'.
var compiledTiles = func() map[instrument.Variant][][3]int {
	out := map[instrument.Variant][][3]int{}
	for _, info := range rungs {
		tiles := info.Tiles
		if tiles == nil {
			tiles = Float32Tiles
		}
		for _, t := range tiles {
			out[info.Variant] = append(out[info.Variant], [3]int{t.Br, t.Bc, t.D})
		}
	}
	return out
}()

// compiledConfig is a run of v at compiled tile k (compiledTiles) with N
// ragged: a few whole tiles of the larger side and part of one more.
func compiledConfig(rng *rand.Rand, v instrument.Variant, k int, causal bool, p instrument.Pattern) Config {
	tile := compiledTiles[v][k]
	c := Config{Variant: v, Br: tile[0], Bc: tile[1], D: tile[2], Batch: 1, Heads: 1, Causal: causal, Pattern: p, Seed: rng.Uint64()}
	big := max(c.Br, c.Bc)
	c.N = max(1, 16/big)*big + 1 + rng.IntN(big)
	return c
}

// edgeConfigs is every edge shape as a run of v (shapeConfigs), and each
// of v's compiled tiles with a ragged N twice, causal and not, in two input
// patterns.
func edgeConfigs(rng *rand.Rand, v instrument.Variant) []Config {
	cs := shapeConfigs(rng, v)
	for k := range compiledTiles[v] {
		ps := instrument.Patterns
		cs = append(cs, compiledConfig(rng, v, k, true, ps[k%len(ps)]), compiledConfig(rng, v, k, false, ps[(k+1)%len(ps)]))
	}
	return cs
}

// shapeConfigs is every edge shape as a run of v.
func shapeConfigs(rng *rand.Rand, v instrument.Variant) []Config {
	var cs []Config
	for _, e := range edgeShapes {
		c := e.c
		c.Variant, c.Seed = v, rng.Uint64()
		c.Batch, c.Heads = max(1, c.Batch), max(1, c.Heads)
		cs = append(cs, c)
	}
	return cs
}

// runsOf is a random test's runs: the edge configurations of every
// variant in vs, then testrand.Runs(full, least) random draws (a tenth
// under -short).
func runsOf(rng *rand.Rand, vs []instrument.Variant, full, least int, draw func(*rand.Rand) Config) []Config {
	var cs []Config
	for _, v := range vs {
		cs = append(cs, edgeConfigs(rng, v)...)
	}
	for range testrand.Runs(full, least) {
		cs = append(cs, draw(rng))
	}
	return cs
}

// forwardVariants are the kernels of attention's forward pass; forwardConfig
// draws randomConfig's runs of them alone. The backward's kernels have
// tests of their own (flash2_bwd_test.go).
func forwardVariants() []instrument.Variant {
	var out []instrument.Variant
	for _, v := range instrument.Variants {
		if !Info(v).Backward {
			out = append(out, v)
		}
	}
	return out
}

func forwardConfig(rng *rand.Rand) Config {
	c := randomConfig(rng)
	for Info(c.Variant).Backward {
		c.Variant = instrument.Variants[rng.IntN(len(instrument.Variants))]
	}
	return c
}

// withVariant draws randomConfig's runs of v alone.
func withVariant(v instrument.Variant) func(*rand.Rand) Config {
	return func(rng *rand.Rand) Config {
		c := randomConfig(rng)
		c.Variant = v
		return c
	}
}

// runTrace runs the mirror, encodes what it emits and decodes it again, so
// that every check below looks at the trace as a consumer sees it.
func runTrace(t testing.TB, c Config) (*instrument.Header, []*instrument.Record) {
	t.Helper()
	h := c.Header(instrument.SourceCPUMirror, MirrorLabel)
	want := c.TraceBytes() + int64(h.HeaderBytes()-96)
	// The buffer is made at the predicted size (appends past it still
	// grow it; a prediction past any valid run's is not trusted): growing
	// it from nothing copied each trace about twice.
	buf, err := instrument.AppendHeader(make([]byte, 0, max(0, min(want, 2*MaxTraceBytes))), &h)
	if err != nil {
		t.Fatal(err)
	}
	err = RunMirror(context.Background(), mustRun(t, c), func(r *instrument.Record) error {
		buf, err = instrument.AppendRecord(buf, &h, r)
		return err
	})
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	if got := int64(len(buf)); got != want {
		t.Fatalf("%+v: trace is %d bytes, TraceBytes predicted %d", c, got, want)
	}
	dh, recs, err := instrument.ReadAll(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("%+v: decode: %v", c, err)
	}
	return dh, recs
}

// noNaN fails on any NaN in any array of any record, padding included.
func noNaN(t *testing.T, c Config, recs []*instrument.Record) {
	t.Helper()
	for _, r := range recs {
		for name, a := range map[string][]float32{"q": r.Q, "k": r.K, "v": r.V, "m_old": r.MOld, "m_new": r.MNew,
			"alpha": r.Alpha, "l": r.L, "s": r.S, "p": r.P, "o": r.O, "lse": r.LSE} {
			for x, v := range a {
				if v != v {
					t.Fatalf("%+v: NaN in %s[%d] of %s record (bh %d, i %d, j %d)", c, name, x, r.Kind, r.BH, r.I, r.J)
				}
			}
		}
	}
}

// tolerance is the bound on ‖O − ref‖/‖ref‖: 1e-5, widened in
// proportion to the largest logit once it passes 100.
func tolerance(maxAbsS float64) float64 { return 1e-5 * math.Max(1, maxAbsS/100) }

func maxAbsScore(in *Inputs, n, d int, causal bool) float64 {
	var m float64
	scale := 1 / math.Sqrt(float64(d))
	for r := 0; r < n; r++ {
		for c := 0; c < n; c++ {
			if causal && c > r {
				continue
			}
			var dot float64
			for x := 0; x < d; x++ {
				dot += float64(in.Q[r*d+x]) * float64(in.K[c*d+x])
			}
			m = math.Max(m, math.Abs(dot*scale))
		}
	}
	return m
}

func TestMirrorsMatchReference(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	worst := map[instrument.Pattern]float64{}
	for _, c := range runsOf(rng, forwardVariants(), 300, 30, forwardConfig) {
		h, recs := runTrace(t, c)
		noNaN(t, c, recs)
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			in := InputsFor(&c, bh) // bf16 kernels: the reference takes the same rounded inputs
			ref, refLSE := Reference(in, c.N, c.D, c.Causal)
			// Poisoned outputs: every element a traced epilogue does not
			// write stays NaN and fails the comparison.
			rows := instrument.Range{Lo: qs.Lo * c.Br, Hi: min(c.N, qs.Hi*c.Br)}
			o, lse := epilogueOutputs(&c, recs, bh)
			var diff2, ref2 float64
			for x := rows.Lo * c.D; x < rows.Hi*c.D; x++ {
				diff2 += sq(float64(o[x]) - ref[x])
				ref2 += sq(ref[x])
			}
			rel := math.Sqrt(diff2) / math.Sqrt(ref2)
			mScore := maxAbsScore(in, c.N, c.D, c.Causal)
			tol := tolerance(mScore)
			if Info(c.Variant).DType == instrument.DTypeBF16 {
				tol = 1e-2 // P is rounded to bf16 for P·V: 2⁻⁹ relative per weight
			}
			if !(rel <= tol) { // NaN fails too
				t.Fatalf("%+v bh %d: ‖O−ref‖/‖ref‖ = %.3g, bound %.3g", c, bh, rel, tol)
			}
			worst[c.Pattern] = math.Max(worst[c.Pattern], rel/tol)
			for g := rows.Lo; g < rows.Hi; g++ {
				// LSE = m + log l rounds relative to its operands, and m can
				// be hundreds (large logits) where the LSE is near 0.
				if d := math.Abs(float64(lse[g]) - refLSE[g]); !(d <= tol*math.Max(1, math.Max(math.Abs(refLSE[g]), mScore))) {
					t.Fatalf("%+v bh %d row %d: LSE %v, reference %v", c, bh, g, lse[g], refLSE[g])
				}
			}
		}
		if h.Records != len(recs) {
			t.Fatalf("%+v: header promises %d records, trace has %d", c, h.Records, len(recs))
		}
	}
	for p, w := range worst {
		t.Logf("pattern %-6s worst error/bound %.3f", p, w)
	}
}

func sq(x float64) float64 { return x * x }

// epilogueOutputs is batch-head bh's O (N×d) and LSE as the epilogues of
// recs write them. They start as NaN, so that every element no epilogue
// writes fails any comparison.
func epilogueOutputs(c *Config, recs []*instrument.Record, bh int) (o, lse []float32) {
	o, lse = fill(c.N*c.D, float32(math.NaN())), fill(c.N, float32(math.NaN()))
	for _, r := range recs {
		if r.Kind != instrument.KindEpilogue || r.BH != bh {
			continue
		}
		for row := range r.RowsValid {
			g := r.I*c.Br + row
			copy(o[g*c.D:(g+1)*c.D], r.O[row*c.D:(row+1)*c.D])
			lse[g] = r.LSE[row]
		}
	}
	return o, lse
}

// expBound is how far float32 exp(x) may be from the exact value when x is
// itself the float32 difference of two numbers: |x|·u from rounding x, one u
// from rounding the result, and a denormal's absolute error.
func expBound(x float64) float64 {
	if math.IsInf(x, -1) {
		return 0 // a masked score: exactly 0
	}
	return (math.Abs(x)+2)*eps32*math.Exp(x) + 0.71e-45 // half the least denormal
}

// outputBounds is, per element of O, how far a float32 kernel's output may
// lie from the exact one, to first order (firstOrderBounds): the float32
// exp, sums, rescales and the final division round (n + 2·Tc + 2·88 + 4)
// times.
func outputBounds(in *Inputs, n, d, tc int, causal bool) []float64 {
	bound, _ := firstOrderBounds(in, n, d, causal, n+2*tc+2*88+4, n+2*tc+2*88+4)
	return bound
}

// firstOrderBounds is, per element of O and per row's LSE, how far a float32
// kernel's output may lie from the exact one, to first order. A score
// computed in float32 is off by at most δ = (d+2)·u·scale·Σ|q_k·k_k| +
// 2u·|s|; perturbing every score of a row by up to δ moves each softmax
// weight by a factor within e^{±2δ}, so O moves by at most 2δ·Σ p_c|v_c|.
// The kernel's own roundings (its exp, sums, rescales, divisions) add
// oRoundings·u relative to that same Σ p_c|v_c|. The LSE, log Σ exp(s),
// moves by at most δ with the scores, by l's relative error (lRoundings·u)
// through log l, and by the roundings of log l and of m + log l.
func firstOrderBounds(in *Inputs, n, d int, causal bool, oRoundings, lRoundings int) (bound, lse []float64) {
	bound, lse = make([]float64, n*d), make([]float64, n)
	scale := 1 / math.Sqrt(float64(d))
	s := make([]float64, n)
	for r := 0; r < n; r++ {
		m, delta := math.Inf(-1), 0.0
		cols := n
		if causal {
			cols = r + 1
		}
		for c := 0; c < cols; c++ {
			var dot, abs float64
			for x := 0; x < d; x++ {
				p := float64(in.Q[r*d+x]) * float64(in.K[c*d+x])
				dot += p
				abs += math.Abs(p)
			}
			s[c] = dot * scale
			m = math.Max(m, s[c])
			delta = math.Max(delta, float64(d+2)*eps32*scale*abs+2*eps32*math.Abs(s[c]))
		}
		var l float64
		for c := 0; c < cols; c++ {
			l += math.Exp(s[c] - m)
		}
		lse[r] = delta + float64(lRoundings)*eps32 + 2*eps32*math.Abs(math.Log(l)) + 2*eps32*math.Abs(m+math.Log(l)) + 1e-30
		rel := 2*delta + float64(oRoundings)*eps32
		for c := 0; c < cols; c++ {
			p := math.Exp(s[c]-m) / l
			for x := 0; x < d; x++ {
				bound[r*d+x] += rel * p * math.Abs(float64(in.V[c*d+x]))
			}
		}
		for x := 0; x < d; x++ {
			bound[r*d+x] += 1e-30
		}
	}
	return bound, lse
}

// seenScores tracks, per row of a q-tile, the valid scores seen so far.
type seenScores [][]float64

// TestFlash2OnlineSoftmaxInvariants checks every step of every flash2 trace:
// m never decreases and carries over between steps, alpha = exp(m_old −
// m_new), l = Σ exp(S − m_new) over every valid column seen so far, P =
// exp(S − m_new), and O/l after the last step is the reference row.
func TestFlash2OnlineSoftmaxInvariants(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantFlash2}, 200, 20, withVariant(instrument.VariantFlash2)) {
		_, recs := runTrace(t, c)
		inputs := map[int]*Inputs{}
		refs := map[int][]float64{}
		bounds := map[int][]float64{}
		var mPrev []float32
		var seen seenScores
		var last *instrument.Record
		for _, r := range recs {
			switch r.Kind {
			case instrument.KindInputs:
				inputs[r.BH] = &Inputs{Q: r.Q, K: r.K, V: r.V}
				refs[r.BH], _ = Reference(inputs[r.BH], c.N, c.D, c.Causal)
				bounds[r.BH] = outputBounds(inputs[r.BH], c.N, c.D, c.Tc(), c.Causal)
			case instrument.KindFlashStep:
				if r.J == 0 {
					mPrev = fill(c.Br, negInf)
					seen = make(seenScores, c.Br)
				}
				for row := range r.RowsValid {
					ctx := fmt.Sprintf("%+v bh %d tile (%d,%d) row %d", c, r.BH, r.I, r.J, row)
					if r.MOld[row] != mPrev[row] {
						t.Fatalf("%s: m_old %v is not the previous m_new %v", ctx, r.MOld[row], mPrev[row])
					}
					if r.MNew[row] < r.MOld[row] {
						t.Fatalf("%s: m decreased from %v to %v", ctx, r.MOld[row], r.MNew[row])
					}
					mNew := float64(r.MNew[row])
					base := mNew
					if math.IsInf(base, -1) {
						base = 0
					}
					wantAlpha := math.Exp(float64(r.MOld[row]) - base)
					if math.Abs(float64(r.Alpha[row])-wantAlpha) > expBound(float64(r.MOld[row])-base) {
						t.Fatalf("%s: alpha %v, exp(m_old − m_new) = %v", ctx, r.Alpha[row], wantAlpha)
					}
					tileMax := math.Inf(-1)
					for col := range r.ColsValid {
						s := float64(r.S[row*c.Bc+col])
						tileMax = math.Max(tileMax, s)
						if !math.IsInf(s, -1) {
							seen[row] = append(seen[row], s)
						}
						wantP := math.Exp(s - base)
						if math.Abs(float64(r.P[row*c.Bc+col])-wantP) > expBound(s-base) {
							t.Fatalf("%s col %d: P %v, exp(S − m) = %v", ctx, col, r.P[row*c.Bc+col], wantP)
						}
					}
					if want := math.Max(float64(r.MOld[row]), tileMax); mNew != want {
						t.Fatalf("%s: m_new %v, max(m_old, rowmax S) = %v", ctx, mNew, want)
					}
					var wantL float64
					for _, s := range seen[row] {
						wantL += math.Exp(s - base)
					}
					// A float32 sum of k positive terms is within k·u of
					// exact; each rescale by alpha adds 2u; each term's exp
					// argument, rounded in float32, adds |x|·u, at most 88u
					// for the terms that are not lost beside the row's max.
					bound := float64(len(seen[row])+2*(r.J+1)+2+2*88) * eps32 * wantL
					if d := math.Abs(float64(r.L[row]) - wantL); !(d <= bound) {
						t.Fatalf("%s: l = %v, Σ exp(S − m_new) over %d columns = %v (bound %.3g)", ctx, r.L[row], len(seen[row]), wantL, bound)
					}
				}
				copy(mPrev, r.MNew)
				last = r
			case instrument.KindEpilogue:
				if last == nil || last.I != r.I || last.BH != r.BH {
					t.Fatalf("%+v: epilogue of (%d, %d) without its steps", c, r.BH, r.I)
				}
				ref, bound := refs[r.BH], bounds[r.BH]
				for row := range r.RowsValid {
					g := r.I*c.Br + row
					for x := range c.D {
						got := float64(last.O[row*c.D+x]) / float64(last.L[row])
						if d := math.Abs(got - ref[g*c.D+x]); !(d <= bound[g*c.D+x]) {
							t.Fatalf("%+v bh %d row %d col %d: O/l after the last step %v, reference %v, bound %.3g",
								c, r.BH, g, x, got, ref[g*c.D+x], bound[g*c.D+x])
						}
					}
				}
			}
		}
	}
}

// TestTraceStructure checks what a kernel's trace must hold, derived here
// from the definition rather than the mirror's own formulas: flash2 visits a
// kv-tile iff some valid (row, column) of it is unmasked, in order; naive
// visits every tile in every phase; valid extents follow the tiling.
func TestTraceStructure(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, forwardVariants(), 300, 30, forwardConfig) {
		h, recs := runTrace(t, c)
		type tile struct{ bh, i, j int }
		got := map[instrument.Kind][]tile{}
		for _, r := range recs {
			got[r.Kind] = append(got[r.Kind], tile{r.BH, r.I, r.J})
		}
		var wantSteps, wantEpi []tile
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			for i := qs.Lo; i < qs.Hi; i++ {
				for j := range h.Tc() {
					if materialises(c.Variant) || !tileFullyMasked(&c, i, j) {
						wantSteps = append(wantSteps, tile{bh, i, j})
					}
				}
				wantEpi = append(wantEpi, tile{bh, i, -1})
			}
		}
		if c.Variant == instrument.VariantFlash1 { // kv-tile-major: TestFlash1RecordsLeaveInKVTileOrder checks the order
			for _, k := range []instrument.Kind{instrument.KindFlashStep, instrument.KindEpilogue} {
				slices.SortStableFunc(got[k], func(a, b tile) int {
					return cmp.Or(cmp.Compare(a.bh, b.bh), cmp.Compare(a.i, b.i), cmp.Compare(a.j, b.j))
				})
			}
		}
		if c.Variant == instrument.VariantNaiveRow && fmt.Sprint(got[instrument.KindScores]) != fmt.Sprint(wantSteps) {
			// Pass 1 visits the tiles pass 2 does, each q-tile's before its steps.
			t.Fatalf("%+v: pass-1 scores tiles %v, want %v", c, got[instrument.KindScores], wantSteps)
		}
		stepKind := instrument.KindFlashStep
		if materialises(c.Variant) {
			stepKind = instrument.KindPV
			if fmt.Sprint(got[instrument.KindScores]) != fmt.Sprint(wantSteps) {
				t.Fatalf("%+v: scores tiles %v, want %v", c, got[instrument.KindScores], wantSteps)
			}
			// The three phases follow each other over the whole grid.
			lastPhase := 0
			for _, r := range recs {
				phase := map[instrument.Kind]int{instrument.KindScores: 1, instrument.KindSoftmax: 2, instrument.KindPV: 3, instrument.KindEpilogue: 3}[r.Kind]
				if phase < lastPhase {
					t.Fatalf("%+v: a %s record after phase %d", c, r.Kind, lastPhase)
				}
				lastPhase = max(lastPhase, phase)
			}
		}
		if fmt.Sprint(got[stepKind]) != fmt.Sprint(wantSteps) {
			t.Fatalf("%+v: %s tiles %v, want %v", c, stepKind, got[stepKind], wantSteps)
		}
		if fmt.Sprint(got[instrument.KindEpilogue]) != fmt.Sprint(wantEpi) {
			t.Fatalf("%+v: epilogues %v, want %v", c, got[instrument.KindEpilogue], wantEpi)
		}
		if len(got[instrument.KindInputs]) != bhs.Len() {
			t.Fatalf("%+v: %d inputs records for %d traced batch-heads", c, len(got[instrument.KindInputs]), bhs.Len())
		}
	}
}

func tileFullyMasked(c *Config, i, j int) bool {
	if !c.Causal {
		return false
	}
	for r := i * c.Br; r < min(c.N, (i+1)*c.Br); r++ {
		for col := j * c.Bc; col < min(c.N, (j+1)*c.Bc); col++ {
			if col <= r {
				return false
			}
		}
	}
	return true
}

// TestNaivePhases checks the naive trace against its definition: the softmax
// record's m is the row max of the S tiles written, l the row sum of
// exp(S − m), and the P tiles read back are exp(S − m)/l.
func TestNaivePhases(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantNaive}, 100, 20, withVariant(instrument.VariantNaive)) {
		_, recs := runTrace(t, c)
		type key struct{ bh, row int }
		rowS := map[key][]float64{}
		stats := map[key][2]float64{}
		for _, r := range recs {
			for row := range r.RowsValid {
				k := key{r.BH, r.I*c.Br + row}
				switch r.Kind {
				case instrument.KindScores:
					for col := range r.ColsValid {
						rowS[k] = append(rowS[k], float64(r.S[row*c.Bc+col]))
					}
				case instrument.KindSoftmax:
					m := math.Inf(-1)
					for _, s := range rowS[k] {
						m = math.Max(m, s)
					}
					var l float64
					for _, s := range rowS[k] {
						l += math.Exp(s - m)
					}
					if float64(r.MNew[row]) != m {
						t.Fatalf("%+v row %v: softmax m %v, row max %v", c, k, r.MNew[row], m)
					}
					if d := math.Abs(float64(r.L[row]) - l); !(d <= float64(c.N+2+88)*eps32*l) {
						t.Fatalf("%+v row %v: softmax l %v, Σ exp(S − m) %v", c, k, r.L[row], l)
					}
					stats[k] = [2]float64{m, l}
				case instrument.KindPV:
					st := stats[k]
					for col := range r.ColsValid {
						x := rowS[k][r.J*c.Bc+col] - st[0]
						want := math.Exp(x) / st[1]
						if d := math.Abs(float64(r.P[row*c.Bc+col]) - want); !(d <= float64(c.N+4+88)*eps32*want+expBound(x)/st[1]+0.71e-45) {
							t.Fatalf("%+v row %v col %d: P %v, want %v", c, k, r.J*c.Bc+col, r.P[row*c.Bc+col], want)
						}
					}
				}
			}
		}
	}
}

// TestTraffic checks the access models against totals worked out by hand,
// one per family (a rung that joins a family moves its family's bytes):
// flash2 loads Q once and K, V once per visited tile; naive writes S and P
// once and reads S three times and P once.
func TestTraffic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, instrument.Variants, 50, 10, randomConfig) {
		c.Causal, c.TraceBH, c.TraceQ, c.Batch, c.Heads = false, instrument.Range{}, instrument.Range{}, 1, 1
		_, recs := runTrace(t, c)
		var read, written uint64
		for _, r := range recs {
			read += r.BytesRead
			written += r.BytesWritten
		}
		N, d, tr := uint64(c.N), uint64(c.D), uint64(c.Tr())
		var wantR, wantW uint64
		switch Info(c.Variant).Family {
		case FamilyFlash2:
			wantR = 4 * (N*d + 2*tr*N*d)
			wantW = 4 * (N*d + N)
		case FamilyNaiveRow: // per q-tile, Q once, K twice and V once
			wantR = 4 * (N*d + 3*tr*N*d)
			wantW = 4 * (N*d + N)
		case FamilyFlash1: // Q every step, O, m, l after the first kv-tile, K and V once
			tc := uint64(c.Tc())
			wantR = 4 * (tc*N*d + (tc-1)*(N*d+2*N) + 2*N*d)
			wantW = 4 * (tc*(N*d+2*N) + N)
		case FamilyFlash2Fast, FamilyFlash2MMA: // Q, K, V and O in bf16, the LSE in float32
			wantR = 2 * (N*d + 2*tr*N*d)
			wantW = 2*N*d + 4*N
		case FamilyDecodeSplit: // flash2_fast's, Q read by each split; each split's partial written, and read back by the merge
			sp, _ := DecodeSplits(&c)
			splits := uint64(sp)
			wantR = 2*(splits*N*d+2*tr*N*d) + splits*(4*N*d+4*N)
			wantW = splits*(4*N*d+4*N) + 2*N*d + 4*N
		case FamilyFlash2Bwd:
			// pre: dO, O and L read, D and the zeroed dQ written. A step
			// reads Q_i, dO_i, L_i and D_i and adds into dQ_i; each block
			// reads K_j, V_j once and writes dK_j, dV_j once. dq: dQ read
			// and written.
			tc := uint64(c.Tc())
			wantR = 4*(2*N*d+N) + 4*tc*(2*N*d+2*N) + 4*2*N*d + 4*N*d
			wantW = 4*(N+N*d) + 4*tc*N*d + 4*2*N*d + 4*N*d
		case FamilyFlash2BwdMMA: // flash2_bwd's, with Q, K, V, dO and O in bf16
			tc := uint64(c.Tc())
			wantR = 2*2*N*d + 4*N + tc*(2*2*N*d+2*4*N) + 2*2*N*d + 4*N*d
			wantW = 4*(N+N*d) + 4*tc*N*d + 4*2*N*d + 4*N*d
		case FamilyNaiveBwd:
			// dp reads dO_i and V_j per tile and writes dP; ds reads rows of
			// P and dP twice and writes dS; dq reads dS's rows and all of K
			// per q-tile; dkv reads the P and dS tiles with Q_i and dO_i and
			// writes dK_j, dV_j once.
			tc := uint64(c.Tc())
			wantR = 4 * (N*d*(tc+tr) + 4*N*N + N*N + tr*N*d + 2*N*N + 2*tc*N*d)
			wantW = 4 * (N*N + N*N + N*d + 2*N*d)
		case FamilyNaiveMMA: // Q, K, V, P and O in bf16; S, the LSE in float32
			tc := uint64(c.Tc())
			wantR = 2*(N*d*tc+N*d*tr) + 4*3*N*N + 2*N*N + 2*tr*N*d
			wantW = 4*N*N + 2*N*N + 4*N + 2*N*d
		case FamilyNaive:
			tc := uint64(c.Tc())
			wantR = 4 * (N*d*tc + N*d*tr + 3*N*N + N*N + tr*N*d)
			wantW = 4 * (N*N + N*N + N + N*d)
		default:
			t.Fatalf("%v: family %s has no traffic worked out by hand here", c.Variant, Info(c.Variant).Family.Name)
		}
		if read != wantR || written != wantW {
			t.Fatalf("%+v: read %d written %d, want %d and %d", c, read, written, wantR, wantW)
		}
	}
}

func TestMirrorToySizeEveryNumberLegible(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Seed = testrand.New(t).Uint64()
	h, recs := runTrace(t, c)
	if h.N != 8 || h.D != 4 || h.Br != 2 || h.Bc != 2 {
		t.Fatalf("default config is not the toy size: %+v", h)
	}
	// 4 q-tiles × 4 kv-tiles + 4 epilogues + 1 inputs record.
	if len(recs) != 21 {
		t.Fatalf("%d records, want 21", len(recs))
	}
}

func TestMirrorDeterministic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(20, 5) {
		c := randomConfig(rng)
		_, a := runTrace(t, c)
		_, b := runTrace(t, c)
		for k := range a {
			if !instrument.SameBits(a[k], b[k]) {
				t.Fatalf("%+v: record %d differs between two runs", c, k)
			}
		}
	}
}

func TestRunMirrorStopsOnSinkErrorAndCancel(t *testing.T) {
	t.Parallel()
	c := Config{Variant: instrument.VariantFlash2, N: 512, D: 64, Br: 16, Bc: 16, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal}
	boom := errors.New("client went away")
	calls := 0
	run := mustRun(t, c)
	err := RunMirror(context.Background(), run, func(*instrument.Record) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("got %v after %d records", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = RunMirror(ctx, run, func(*instrument.Record) error {
		if calls++; calls == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run returned %v", err)
	}
}

func TestLargePatternOverflowsWithoutMax(t *testing.T) {
	// The large pattern must be large enough that exp(S) overflows float32
	// (S > 88.7), or it would not show why the max is subtracted.
	t.Parallel()
	rng := testrand.New(t)
	c := Config{N: 16, D: 4, Br: 2, Bc: 2, Batch: 1, Heads: 1, Pattern: instrument.PatternLarge}
	for range 20 {
		c.Seed = rng.Uint64()
		in := GenerateInputs(&c, 0)
		if m := maxAbsScore(in, c.N, c.D, false); m < 89 || m > 1000 {
			t.Fatalf("seed %d: max |S| = %.1f, want well past 88.7", c.Seed, m)
		}
	}
}

func materialises(v instrument.Variant) bool { return Info(v).Materialised }
