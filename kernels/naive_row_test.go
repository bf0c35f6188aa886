package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// naive_row.cu's phases and the code each must hold (TestSourcePhases).
func init() {
	phaseCode["naive_row.cu"] = map[string][]string{
		"load-q":   {"q[x] = live ? __ldg(&Q["},
		"scores":   {"m = fmaxf(m, s)", "fs_scores_s(BR, BC, D, N)"},
		"pv":       {"expf(__fsub_rn(s, mBase))", "l = __fadd_rn(l, p)", "o[x] = __fadd_rn(o[x], __fmul_rn(p, __ldg(&v[x])))"},
		"epilogue": {"__fdiv_rn(o[x], l)", "LSE[(size_t)bh * N + row] = lse"},
	}
}

// naiveRowConfig is a random configuration run by naive_row.
func naiveRowConfig(rng *rand.Rand) Config {
	c := randomConfig(rng)
	c.Variant = instrument.VariantNaiveRow
	return c
}

// naiveRowBlocks groups a trace's records by block (batch-head, q-tile),
// in trace order.
type naiveRowBlockRecs struct {
	scores, steps []*instrument.Record
	epi           *instrument.Record
}

func naiveRowBlocks(t *testing.T, c Config, recs []*instrument.Record) (map[[2]int]*naiveRowBlockRecs, map[int]*Inputs) {
	t.Helper()
	blocks := map[[2]int]*naiveRowBlockRecs{}
	inputs := map[int]*Inputs{}
	for _, r := range recs {
		if r.Kind == instrument.KindInputs {
			inputs[r.BH] = &Inputs{Q: r.Q, K: r.K, V: r.V}
			continue
		}
		k := [2]int{r.BH, r.I}
		b := blocks[k]
		if b == nil {
			b = &naiveRowBlockRecs{}
			blocks[k] = b
		}
		switch r.Kind {
		case instrument.KindScores:
			if len(b.steps) > 0 || b.epi != nil {
				t.Fatalf("%+v: a scores record of (%d, %d) after its pass 2 began", c, r.BH, r.I)
			}
			b.scores = append(b.scores, r)
		case instrument.KindFlashStep:
			if b.epi != nil {
				t.Fatalf("%+v: a flash step of (%d, %d) after its epilogue", c, r.BH, r.I)
			}
			b.steps = append(b.steps, r)
		case instrument.KindEpilogue:
			b.epi = r
		default:
			t.Fatalf("%+v: unexpected %s record", c, r.Kind)
		}
	}
	for k, b := range blocks {
		if len(b.scores) != len(b.steps) || b.epi == nil {
			t.Fatalf("%+v: block %v has %d scores records, %d flash steps, epilogue %v", c, k, len(b.scores), len(b.steps), b.epi != nil)
		}
		for j := range b.steps {
			if b.scores[j].J != j || b.steps[j].J != j {
				t.Fatalf("%+v: block %v: kv-tiles out of order at %d", c, k, j)
			}
		}
	}
	return blocks, inputs
}

// TestNaiveRowPass2 checks pass 2 against pass 1 and against the
// definition: every score is q·k·scale within float32's dot-product error,
// masked exactly where the row's keys end; m_old = m_new = the row's max
// over all its keys, α exactly 1, P = exp(S − m), and l after each step
// exactly the float32 running sum of P in key order, so that the last step's
// l is Σ p. Padding rows hold no key: S = −Inf, P = 0, m = −Inf, l = 0.
func TestNaiveRowPass2(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantNaiveRow}, 200, 20, naiveRowConfig) {
		_, recs := runTrace(t, c)
		noNaN(t, c, recs)
		blocks, inputs := naiveRowBlocks(t, c, recs)
		br, bc, d := c.Br, c.Bc, c.D
		scale := 1 / math.Sqrt(float64(d))
		for key, b := range blocks {
			in := inputs[key[0]]
			for r := range br {
				row := key[1]*br + r
				ctx := fmt.Sprintf("%+v bh %d row %d", c, key[0], row)
				// The row max over every key it sees, from the scores records.
				m := negInf
				for _, sr := range b.scores {
					for col := range bc {
						s, g := sr.S[r*bc+col], sr.J*bc+col
						sees := r < sr.RowsValid && col < sr.ColsValid && (!c.Causal || g <= row)
						if !sees {
							if s != negInf {
								t.Fatalf("%s key %d: S = %v where the row sees no key", ctx, g, s)
							}
							continue
						}
						var dot, abs float64
						for x := range d {
							p := float64(in.Q[row*d+x]) * float64(in.K[g*d+x])
							dot += p
							abs += math.Abs(p)
						}
						want := dot * scale
						bound := float64(d+2)*eps32*scale*abs + 2*eps32*math.Abs(want)
						if diff := math.Abs(float64(s) - want); !(diff <= bound) {
							t.Fatalf("%s key %d: S = %v, q·k·scale = %v (bound %.3g)", ctx, g, s, want, bound)
						}
						m = max(m, s)
					}
				}
				if r < min(br, c.N-key[1]*br) && m == negInf {
					t.Fatalf("%s: a row of data saw no key", ctx)
				}
				base := float64(softmaxBase(m))
				var l float32 // the running sum, in key order, as the kernel adds
				for _, st := range b.steps {
					if st.MOld[r] != m || st.MNew[r] != m {
						t.Fatalf("%s step %d: m_old %v, m_new %v; the row max is %v", ctx, st.J, st.MOld[r], st.MNew[r], m)
					}
					if math.Float32bits(st.Alpha[r]) != math.Float32bits(1) {
						t.Fatalf("%s step %d: alpha %v, not exactly 1", ctx, st.J, st.Alpha[r])
					}
					for col := range bc {
						s, p := float64(st.S[r*bc+col]), st.P[r*bc+col]
						want := math.Exp(s - base)
						if math.Abs(float64(p)-want) > expBound(s-base) {
							t.Fatalf("%s step %d col %d: P %v, exp(S − m) = %v", ctx, st.J, col, p, want)
						}
						if math.IsInf(s, -1) && math.Float32bits(p) != 0 {
							t.Fatalf("%s step %d col %d: P %v of a masked score, not +0", ctx, st.J, col, p)
						}
						l = float32(l + p)
					}
					if st.L[r] != l {
						t.Fatalf("%s step %d: l = %v, the running Σ p = %v", ctx, st.J, st.L[r], l)
					}
				}
				if last := b.steps[len(b.steps)-1]; r >= last.RowsValid {
					if m != negInf || last.L[r] != 0 || b.epi.LSE[r] != negInf {
						t.Fatalf("%s (padding): m %v, l %v, LSE %v; want −Inf, 0, −Inf", ctx, m, last.L[r], b.epi.LSE[r])
					}
					for x := range d {
						if math.Float32bits(last.O[r*d+x]) != 0 || math.Float32bits(b.epi.O[r*d+x]) != 0 {
							t.Fatalf("%s (padding): O[%d] = %v, epilogue %v; want +0", ctx, x, last.O[r*d+x], b.epi.O[r*d+x])
						}
					}
				}
			}
		}
	}
}

// TestNaiveRowMatchesReference holds every element of every row of data of
// the epilogue's O, and its LSE, to the float64 reference, element by element
// within the first-order float32 bound of outputBounds, on fresh random
// inputs of ragged and causal shapes. A NaN fails.
func TestNaiveRowMatchesReference(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	worst := 0.0
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantNaiveRow}, 200, 20, naiveRowConfig) {
		_, recs := runTrace(t, c)
		blocks, inputs := naiveRowBlocks(t, c, recs)
		if want := c.TracedBH().Len() * c.TracedQ().Len(); len(blocks) != want {
			t.Fatalf("%+v: %d blocks traced, want %d", c, len(blocks), want)
		}
		refs, bounds, lses := map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
		for key, b := range blocks {
			bh := key[0]
			in := inputs[bh]
			if refs[bh] == nil {
				refs[bh], lses[bh] = Reference(in, c.N, c.D, c.Causal)
				bounds[bh] = outputBounds(in, c.N, c.D, c.Tc(), c.Causal)
			}
			ref, bound, refLSE := refs[bh], bounds[bh], lses[bh]
			for r := range b.epi.RowsValid {
				g := key[1]*c.Br + r
				for x := range c.D {
					got, want := float64(b.epi.O[r*c.D+x]), ref[g*c.D+x]
					diff := math.Abs(got - want)
					if !(diff <= bound[g*c.D+x]) {
						t.Fatalf("%+v bh %d row %d col %d: O %v, reference %v, bound %.3g", c, bh, g, x, got, want, bound[g*c.D+x])
					}
					worst = math.Max(worst, diff/bound[g*c.D+x])
				}
				// LSE = m + log l: l is within (n + 2 + 2·88)·u of exact
				// relative (the same terms as O's), m is a score.
				got, want := float64(b.epi.LSE[r]), refLSE[g]
				tol := float64(c.N+8+2*88)*eps32 + 4*eps32*math.Abs(want) + float64(c.D+4)*eps32*maxAbsRowScore(in, c, g)
				if diff := math.Abs(got - want); !(diff <= tol) {
					t.Fatalf("%+v bh %d row %d: LSE %v, reference %v, bound %.3g", c, bh, g, got, want, tol)
				}
			}
		}
	}
	t.Logf("worst error/bound of O: %.3f", worst)
}

// maxAbsRowScore is the largest Σ|q_k·k_k|·scale over the keys row g sees.
func maxAbsRowScore(in *Inputs, c Config, g int) float64 {
	scale := 1 / math.Sqrt(float64(c.D))
	var out float64
	for key := range c.N {
		if c.Causal && key > g {
			break
		}
		var abs float64
		for x := range c.D {
			abs += math.Abs(float64(in.Q[g*c.D+x]) * float64(in.K[key*c.D+x]))
		}
		out = math.Max(out, abs*scale)
	}
	return out
}

// TestNaiveRowScoresAreThePass2Scores: pass 2 recomputes every score the
// way pass 1 did, so each flash step's S is its kv-tile's scores record, bit
// for bit, padding included.
func TestNaiveRowScoresAreThePass2Scores(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantNaiveRow}, 200, 20, naiveRowConfig) {
		_, recs := runTrace(t, c)
		blocks, _ := naiveRowBlocks(t, c, recs)
		for key, b := range blocks {
			for j, sr := range b.scores {
				st := b.steps[j]
				if sr.RowsValid != st.RowsValid || sr.ColsValid != st.ColsValid {
					t.Fatalf("%+v block %v tile %d: scores %d×%d valid, flash step %d×%d", c, key, j, sr.RowsValid, sr.ColsValid, st.RowsValid, st.ColsValid)
				}
				for e := range sr.S {
					if math.Float32bits(sr.S[e]) != math.Float32bits(st.S[e]) {
						t.Fatalf("%+v block %v tile %d element %d: pass 1 S %v, pass 2 S %v", c, key, j, e, sr.S[e], st.S[e])
					}
				}
			}
		}
	}
}

// TestNaiveRowTraffic adds up the access model by hand: each q-tile reads
// its Q rows once, and K twice and V once over the kv-tiles it visits; O and
// the LSE are written once.
func TestNaiveRowTraffic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, []instrument.Variant{instrument.VariantNaiveRow}, 100, 20, naiveRowConfig) {
		c.TraceBH, c.TraceQ, c.Batch, c.Heads = instrument.Range{}, instrument.Range{}, 1, 1
		_, recs := runTrace(t, c)
		var read, written uint64
		for _, r := range recs {
			read += r.BytesRead
			written += r.BytesWritten
		}
		N, d := uint64(c.N), uint64(c.D)
		wantR, wantW := 4*N*d, 4*(N*d+N)
		for i := range c.Tr() {
			keys := uint64(c.N) // the keys of the kv-tiles visited
			if c.Causal {
				keys = uint64(min(c.N, (min(c.N, (i+1)*c.Br)-1)/c.Bc*c.Bc+c.Bc))
			}
			wantR += 4 * 3 * keys * d
		}
		if read != wantR || written != wantW {
			t.Fatalf("%+v: read %d written %d, want %d and %d", c, read, written, wantR, wantW)
		}
	}
}

// TestNaiveRowInstancesAreFlash2s: naive_row.cu compiles flash2.cu's tiles
// (BR, BC, D), in the same order, so a run the GPU takes for one it takes
// for the other.
func TestNaiveRowInstancesAreFlash2s(t *testing.T) {
	t.Parallel()
	tiles := func(file, macro string) []string {
		b, err := cuSource(file)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		re := regexp.MustCompile(`(?m)^` + macro + `\((\d+), (\d+), (\d+)`)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1]+"×"+m[2]+" d="+m[3])
		}
		return out
	}
	row, flash := tiles("naive_row.cu", "NAIVE_ROW_INSTANCE"), tiles("flash2.cu", "FLASH2_INSTANCE")
	if len(row) == 0 || !slices.Equal(row, flash) {
		t.Fatalf("naive_row.cu compiles %v, flash2.cu %v", row, flash)
	}
}
