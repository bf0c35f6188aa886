package loop

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

func randomConfig(rng *rand.Rand, pattern instrument.Pattern, causal bool) kernels.Config {
	c := kernels.DefaultConfig()
	c.Variant = instrument.VariantFlash2
	c.N, c.D = 2+rng.IntN(40), 1+rng.IntN(16)
	c.Br, c.Bc = 1+rng.IntN(min(8, c.N)), 1+rng.IntN(min(8, c.N))
	c.Causal, c.Pattern, c.Seed = causal, pattern, rng.Uint64()
	c.Batch, c.Heads = 1, 1
	return c
}

// mirrorSteps runs the CPU mirror and keeps q-tile q's flash steps and its
// epilogue.
func mirrorSteps(t *testing.T, c kernels.Config, q int) (steps []*instrument.Record, epi *instrument.Record) {
	t.Helper()
	err := kernels.RunMirror(context.Background(), kernelstest.MustRun(t, c), func(r *instrument.Record) error {
		if r.BH == 0 && r.I == q {
			switch r.Kind {
			case instrument.KindFlashStep:
				steps = append(steps, r)
			case instrument.KindEpilogue:
				epi = r
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return steps, epi
}

// close32 allows float32 rounding: a few units in the last place of the
// larger magnitude. NaN is never close to anything.
func close32(a, b float32) bool {
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) {
		return a == b
	}
	tol := 4 * math.Ldexp(1, -23) * max(1, math.Abs(float64(a)), math.Abs(float64(b)))
	return math.Abs(float64(a)-float64(b)) <= tol
}

// With no slips the loop is the mirror's FlashAttention-2 block: every m,
// l and O of every valid row after every kv-tile, and the output, for
// random runs, causal or not, of every input pattern.
func TestNoSlipsMatchesMirror(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	patterns := []instrument.Pattern{instrument.PatternNormal, instrument.PatternLarge, instrument.PatternPeaked}
	for range 60 {
		c := randomConfig(rng, patterns[rng.IntN(len(patterns))], rng.IntN(2) == 0)
		if err := Validate(kernelstest.MustRun(t, c), 0, 0); err != nil {
			t.Fatal(err)
		}
		for q := range c.Tr() {
			steps, epi := mirrorSteps(t, c, q)
			got := Run(&c, 0, q, nil)
			if len(got.Steps) != len(steps) || epi == nil {
				t.Fatalf("%s q=%d: %d steps, the mirror %d", c.Key(), q, len(got.Steps), len(steps))
			}
			rows := min(c.Br, c.N-q*c.Br)
			for k, want := range steps {
				g := got.Steps[k]
				for r := range rows {
					if g.KV != want.J || !close32(g.M[r], want.MNew[r]) || !close32(g.L[r], want.L[r]) || !close32(g.Alpha[r], want.Alpha[r]) {
						t.Fatalf("%s q=%d kv=%d row %d: m %g l %g α %g; mirror %g %g %g", c.Key(), q, want.J, r, g.M[r], g.L[r], g.Alpha[r], want.MNew[r], want.L[r], want.Alpha[r])
					}
					for x := range c.D {
						if i := r*c.D + x; !close32(g.O[i], want.O[i]) {
							t.Fatalf("%s q=%d kv=%d O[%d][%d] = %g, mirror %g", c.Key(), q, want.J, r, x, g.O[i], want.O[i])
						}
					}
				}
			}
			for i := range rows * c.D {
				if !close32(got.Out[i], epi.O[i]) {
					t.Fatalf("%s q=%d: output %d = %g, mirror %g", c.Key(), q, i, got.Out[i], epi.O[i])
				}
			}
		}
	}
}

// Each slip parts from the correct loop where the debugging lesson says: (a) in O at
// the first kv-tile, m and l untouched; (b) in l at the second kv-tile, m
// untouched, α = 0 throughout; (c) nowhere in the loop, only in the output.
// (With one key in the first tile, (a) cannot show there: that key's p is
// 1, and so is the row sum; the lesson's runs have tiles of several keys.)
func TestSlipsPartWhereTheLessonSays(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 60 {
		c := randomConfig(rng, instrument.PatternNormal, false)
		c.N = max(c.N, 4)
		c.Bc = 2 + rng.IntN(c.N/2-1) // at least two keys a tile, at least two tiles
		c.Br = min(c.Br, c.N)
		q := rng.IntN(c.Tr())
		correct := Run(&c, 0, q, nil)
		rows := min(c.Br, c.N-q*c.Br)
		for _, slip := range Slips {
			slipped := Run(&c, 0, q, []Slip{slip})
			for r := range rows {
				p := Part(correct, slipped, r, c.D)
				want := map[Slip]Parting{
					POverwrite: {Row: r, KV: 0, Output: true, What: "O"},
					StaleMax:   {Row: r, KV: 1, Output: true, What: "l"},
					NoDivide:   {Row: r, KV: -1, Output: true},
				}[slip]
				if p != want {
					t.Fatalf("%s q=%d row %d, slip %s: parts at %+v, want %+v", c.Key(), q, r, slip, p, want)
				}
				for k, st := range slipped.Steps {
					if st.M[r] != correct.Steps[k].M[r] {
						t.Fatalf("%s: slip %s changed m", c.Key(), slip)
					}
					if slip == POverwrite && st.L[r] != correct.Steps[k].L[r] {
						t.Fatalf("%s: slip (a) changed l", c.Key())
					}
					if slip == StaleMax && st.Alpha[r] != 0 {
						t.Fatalf("%s: slip (b) has α = %g at kv-tile %d, want 0", c.Key(), st.Alpha[r], k)
					}
				}
			}
		}
		// All three at once, as printed: parts at once, in O.
		all := Run(&c, 0, q, Slips)
		if p := Part(correct, all, 0, c.D); p.KV != 0 || !p.Output {
			t.Fatalf("%s: every slip at once parts at %+v", c.Key(), p)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	c := kernels.DefaultConfig()
	c.N, c.D, c.Br, c.Bc = 16, 8, 4, 4
	if err := Validate(kernelstest.MustRun(t, c), 0, 3); err != nil {
		t.Fatal(err)
	}
	// A run whose trace is within the stepper's limit (one q-tile traced)
	// but whose loop, 2048 kv-tiles of 64 rows, is not.
	big := c
	big.N, big.D, big.Br, big.Bc = 2048, 32, 64, 1
	big.TraceQ = instrument.Range{Lo: 0, Hi: 1}
	naive := c
	naive.Variant = instrument.VariantNaive
	for name, tc := range map[string]struct {
		c      kernels.Config
		bh, q  int
		field  string
		saying string
	}{
		"q past the end": {c, 0, 4, "q", "from 0 to 3"},
		"negative q":     {c, 0, -1, "q", "from 0 to 3"},
		"bh":             {c, 1, 0, "bh", "from 0 to 0"},
		"naive":          {naive, 0, 0, kernels.FieldVariant, "flash2"},
		"too many":       {big, 0, 0, kernels.FieldN, "at most 262144"},
	} {
		err := Validate(kernelstest.MustRun(t, tc.c), tc.bh, tc.q)
		fe, ok := err.(kernels.FieldErrors)
		if !ok || fe.ByField()[tc.field] == "" || !strings.Contains(fe.ByField()[tc.field], tc.saying) {
			t.Errorf("%s: %v, want field %s saying %q", name, err, tc.field, tc.saying)
		}
	}
	if _, err := ParseSlips("stale-max,bogus"); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("an unknown slip: %v", err)
	}
	if s, err := ParseSlips("no-divide, p-overwrite,no-divide"); err != nil || len(s) != 2 || s[0] != NoDivide {
		t.Errorf("ParseSlips: %v %v", s, err)
	}
}

func TestFloatsJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Floats{float32(math.Inf(-1)), 1.5, float32(math.NaN()), float32(math.Inf(1)), 0.1})
	if err != nil || string(b) != `["-Infinity",1.5,"NaN","Infinity",0.1]` {
		t.Errorf("%s %v", b, err)
	}
}
