package grading_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"flashstep/grading"
	"flashstep/internal/testrand"
)

// The tolerance rules at their edges. Each rule is restated here apart
// from the grader's own (rule), so that a grader whose tolerance moves
// fails. The random values come from testrand's seed, which a failure
// prints: replay it with -seed.

// rule is a tolerance restated: exact, abs (±abs), rel (rel × |x|), small
// (the smaller of abs and rel × |x|, and what rounds to 0 in float32 at 0).
type rule struct {
	name     string
	abs, rel float64
	tol      grading.Tolerance
}

func (r rule) allowed(x float64) float64 {
	switch r.name {
	case "abs":
		return r.abs
	case "rel":
		return r.rel * math.Abs(x)
	case "small":
		if x == 0 {
			return 0x1p-150
		}
		return min(r.abs, r.rel*math.Abs(x))
	}
	return 0
}

var rules = []rule{
	{name: "exact", tol: grading.Whole()},
	{name: "abs", abs: 0.01, tol: grading.Absolute(0.01)},
	{name: "abs", abs: 0.05, tol: grading.Absolute(0.05)},
	{name: "abs", abs: 10, tol: grading.Absolute(10)}, // ns read off a timeline
	{name: "rel", rel: 0.01, tol: grading.Relative(0.01)},
	{name: "rel", rel: 0.02, tol: grading.Relative(0.02)},
	{name: "small", abs: 0.01, rel: 0.02, tol: grading.SmallValue(0.01)},
	{name: "small", abs: 0.005, rel: 0.02, tol: grading.SmallValue(0.005)},
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// valueFor is a fresh value of the kind a rule is for: a count, a logit of
// any size, bytes or a ratio, a value in [0, 1] down to 1e-40.
func valueFor(rng *rand.Rand, r rule) float64 {
	switch r.name {
	case "exact":
		return float64(rng.IntN(100_000))
	case "abs":
		return (rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(6)-2))
	case "rel":
		return rng.Float64() * math.Pow(10, float64(rng.IntN(12)-2))
	}
	return math.Pow(10, -40*rng.Float64())
}

func numberOf(tol grading.Tolerance, x float64) *grading.Number {
	return &grading.Number{Tolerance: tol, Key: grading.Solution{Number: x, Display: tol.Shown(x), Explain: "because", Lo: math.Inf(-1), Hi: math.Inf(1)}}
}

// TestToleranceEdges: just inside a rule's tolerance passes and just
// outside fails, on both sides, and so do fresh random answers inside and
// outside (within three tolerances, so that a tripled tolerance takes
// them); Allowed is the rule's.
func TestToleranceEdges(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, r := range rules {
		for range testrand.Runs(200, 40) {
			x := valueFor(rng, r)
			if rng.IntN(10) == 0 {
				x = 0
			}
			tol := r.allowed(x)
			if got := r.tol.Allowed(x); got != tol {
				t.Errorf("%+v at %s allows %g, the rule says %g", r, num(x), got, tol)
			}
			q := numberOf(r.tol, x)
			check := func(answer string, pass bool, why string) {
				t.Helper()
				v := q.Grade(answer, false)
				if v.Correct != pass || (v.Status == grading.StatusCorrect) != pass {
					t.Errorf("%+v: %q (%s from %s, ±%g) graded %+v, want pass=%v", r, answer, why, num(x), tol, v, pass)
				}
				if !pass && v.Hint == "" {
					t.Errorf("%+v: %q graded %s with no hint", r, answer, v.Status)
				}
			}
			if r.name == "exact" {
				check(num(x), true, "exact")
				check(strconv.FormatFloat(x, 'f', 1, 64), true, "exact, with a decimal")
				check(num(x+1), false, "+1")
				check(num(x-1), false, "-1")
				check(num(x+0.5), false, "+0.5, not a whole number")
				continue
			}
			if tol == 0 { // a relative rule at 0: exactly 0
				check("0", true, "exact")
				check("1e-300", false, "past 0")
				continue
			}
			for _, sign := range []float64{1, -1} {
				check(num(x+sign*tol*(1-1e-6)), true, fmt.Sprintf("%+.6f tolerances", sign*(1-1e-6)))
				check(num(x+sign*tol*(1+1e-6)), false, fmt.Sprintf("%+.6f tolerances", sign*(1+1e-6)))
				in, out := rng.Float64()*0.999, 1.001+1.9*rng.Float64()
				check(num(x+sign*tol*in), true, fmt.Sprintf("%+.4f tolerances", sign*in))
				check(num(x+sign*tol*out), false, fmt.Sprintf("%+.4f tolerances", sign*out))
			}
		}
	}
}

// A value that is 0 in float32 (α past a jump of about 104, the weight of a
// masked key) takes 0 and whatever rounds to it, 2^−150 and less, nothing
// else; a rule for values that are not float32 takes 0 alone.
func TestZeroInFloat32(t *testing.T) {
	t.Parallel()
	q := numberOf(grading.SmallValue(0.01), 0)
	q.Key.Lo, q.Key.Hi = 0, 1
	for a, pass := range map[string]bool{"0": true, "0.0": true, "-0": true, "1.7e-48": true, "7e-46": true, num(0x1p-150): true,
		num(math.Nextafter(0x1p-150, 1)): false, "2e-45": false, "1e-40": false, "1e-30": false, "0.001": false} {
		if v := q.Grade(a, false); v.Correct != pass {
			t.Errorf("SmallValue of 0: %q graded %+v, want pass=%v", a, v, pass)
		}
	}
	for _, tol := range []grading.Tolerance{grading.Relative(0.02), grading.Whole()} {
		if v := numberOf(tol, 0).Grade("1e-46", false); v.Correct {
			t.Errorf("%+v of 0 takes 1e-46: %+v", tol, v)
		}
	}
}

// TestShownTypedBack: the revealed answer, typed back, is right, lies within
// a quarter of the tolerance of the value, and shows at least three
// significant digits; a tiny value is written with its exponent.
func TestShownTypedBack(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, r := range rules {
		for range testrand.Runs(200, 40) {
			x := valueFor(rng, r)
			if rng.IntN(2) == 0 {
				x = -x
			}
			shown := r.tol.Shown(x)
			d, err := strconv.ParseFloat(shown, 64)
			if err != nil {
				t.Fatalf("%+v: %s shown as %q, not a number", r, num(x), shown)
			}
			if v := numberOf(r.tol, x).Grade(shown, false); !v.Correct {
				t.Errorf("%+v: %s shown as %q, typed back graded %+v", r, num(x), shown, v)
			}
			if tol := r.allowed(x); math.Abs(d-x) > tol/4*(1+1e-9) {
				t.Errorf("%+v: %s shown as %q is %g from it, more than a quarter of ±%g", r, num(x), shown, math.Abs(d-x), tol)
			}
			if r.name != "exact" && x != 0 && significant(shown) < 3 {
				t.Errorf("%+v: %s shown as %q, fewer than 3 significant digits", r, num(x), shown)
			}
		}
	}
	if got := grading.SmallValue(0.01).Shown(1.6475e-37); got != "1.6475e-37" {
		t.Errorf("α = 1.6475e-37 shown as %q", got)
	}
	for x, want := range map[float64]string{0: "0", math.Inf(1): "inf", math.Inf(-1): "−inf", math.NaN(): "NaN"} {
		if got := grading.Absolute(0.01).Shown(x); got != want {
			t.Errorf("%g shown as %q, want %q", x, got, want)
		}
	}
}

// significant counts the significant digits a number is written with.
func significant(d string) int {
	d = strings.TrimLeft(strings.TrimPrefix(d, "-"), "0.")
	if m, _, ok := strings.Cut(d, "e"); ok {
		d = m
	}
	return len(strings.ReplaceAll(d, ".", ""))
}

// TestSays: each rule in the words the page shows beside the answer's box.
func TestSays(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tol  grading.Tolerance
		unit grading.Unit
		want string
	}{
		{grading.Whole(), grading.Plain, "a whole number, exactly"},
		{grading.Whole(), grading.SM, "a whole number, exactly"},
		{grading.Absolute(0.01), grading.Plain, "within ±0.01"},
		{grading.Absolute(10), grading.Nanoseconds, "in ns, within ±10 ns"},
		{grading.SmallValue(0.01), grading.Plain, "within 2% of the kernel's value and at most ±0.01 from it (write a tiny value with its exponent, as 3.2e-9)"},
		{grading.Relative(0.01), grading.Bytes, "in bytes, within 1%"},
		{grading.Relative(0.02), grading.Percent, "in percent, within 2% of the answer (2% of its value, not 2 percentage points)"},
		{grading.Relative(0.02), grading.Times, "within 2% of the answer"},
	} {
		if got := c.tol.Says(c.unit); got != c.want {
			t.Errorf("%+v in %q says %q, want %q", c.tol, c.unit, got, c.want)
		}
	}
}
