package lessons_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/recordings"
	"flashstep/runner"
)

// The grading of every checkpoint of the course at the edges of its
// tolerance, its hints against leaks, and its answers against junk. The
// random answers come from testrand's seed, which a failure prints: replay
// it with -seed.

// tolSpec is a tolerance rule, written here apart from the grader's own, so
// that a grader whose tolerance moves fails these tests.
type tolSpec struct {
	rule     string // exact, abs (±abs), rel (rel × |answer|), small (the smaller of abs and rel × |answer|)
	abs, rel float64
}

// askRules is the rule of each numeric ask with no tol= in its directive:
// grading.Tolerance's comment says why each, and each ask's type names its
// rule.
var askRules = map[string]tolSpec{
	lessons.AskCount:           {rule: "exact"},
	lessons.AskSM:              {rule: "exact"},
	lessons.AskHidden:          {rule: "abs", abs: 10},
	lessons.AskM:               {rule: "abs", abs: 0.01},
	lessons.AskL:               {rule: "abs", abs: 0.01},
	lessons.AskAlpha:           {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskP:               {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskWeight:          {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskLoopL:           {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskWritten:         {rule: "rel", rel: 0.01},
	lessons.AskLadderSpeedup:   {rule: "rel", rel: 0.02},
	lessons.AskLadderFloor:     {rule: "rel", rel: 0.02},
	lessons.AskBackwardSpeedup: {rule: "rel", rel: 0.02},
	lessons.AskTriedWorth:      {rule: "rel", rel: 0.02},
	lessons.AskTxBytes:         {rule: "exact"},
	lessons.AskStageBytes:      {rule: "exact"},
	lessons.AskTMACopies:       {rule: "exact"},
	lessons.AskSetmaxnreg:      {rule: "exact"},
	lessons.AskPLeft:           {rule: "abs", abs: 0.01},
	lessons.AskDS:              {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskDQ:              {rule: "small", abs: 0.01, rel: 0.02},
	lessons.AskFirstLoad:       {rule: "exact"},
	lessons.AskKVCache:         {rule: "rel", rel: 0.01},
	lessons.AskDecodeIntensity: {rule: "rel", rel: 0.01},
	lessons.AskDecodeSplits:    {rule: "exact"},
	lessons.AskMerge:           {rule: "small", abs: 0.01, rel: 0.02},
}

// allowed is how far from x an answer may lie by the rule: a value that is
// 0 in float32 takes whatever rounds to 0 in float32, 2^−150 and less.
func (sp tolSpec) allowed(x float64) float64 {
	switch sp.rule {
	case "abs":
		return sp.abs
	case "rel":
		return sp.rel * math.Abs(x)
	case "small":
		if x == 0 {
			return 0x1p-150
		}
		return min(sp.abs, sp.rel*math.Abs(x))
	}
	return 0
}

// directiveTols reads the tol= and rel= of every checkpoint directive of
// the course from the Markdown itself, not through the parser under test:
// id's tol under id, its rel under id+" rel".
var directiveTols = sync.OnceValues(func() (map[string]float64, error) {
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^::: checkpoint .*$`)
	err := fs.WalkDir(lessons.CourseFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(lessons.CourseFiles, path)
		if err != nil {
			return err
		}
		for _, line := range re.FindAllString(string(raw), -1) {
			var id, tol, rel string
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "id="); ok {
					id = v
				}
				if v, ok := strings.CutPrefix(f, "tol="); ok {
					tol = v
				}
				if v, ok := strings.CutPrefix(f, "rel="); ok {
					rel = v
				}
			}
			for key, v := range map[string]string{id: tol, id + " rel": rel} {
				if v == "" {
					continue
				}
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("%s: %s: %v", path, id, err)
				}
				out[key] = x
			}
		}
		return nil
	})
	return out, err
})

// specOf is the rule a checkpoint is held to: its ask's, with its
// directive's tol= in place of the default.
func specOf(t *testing.T, c *lessons.Checkpoint) tolSpec {
	t.Helper()
	sp, ok := askRules[c.Ask]
	if !ok {
		t.Fatalf("%s: ask %s has no tolerance rule in askRules: state one", c.ID, c.Ask)
	}
	tols, err := directiveTols()
	if err != nil {
		t.Fatal(err)
	}
	if tol, ok := tols[c.ID]; ok {
		switch sp.rule {
		case "abs", "small":
			sp.abs = tol
		case "rel":
			sp.rel = tol
		}
	}
	if rel, ok := tols[c.ID+" rel"]; ok {
		if sp.rule != "small" {
			t.Fatalf("%s: rel= on ask %s, whose rule (%s) has no relative bound of its own", c.ID, c.Ask, sp.rule)
		}
		sp.rel = rel
	}
	return sp
}

// solved is a checkpoint of the course with its answer from its run's trace.
type solved struct {
	name string // lesson/id
	c    *lessons.Checkpoint
	s    grading.Solution
}

func runTrace(r runner.Runner, c kernels.Config) (*lessons.Trace, error) {
	run, err := c.Check()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", c.Key(), err)
	}
	var buf bytes.Buffer
	if err := r.Run(context.Background(), run, func(b []byte) error { buf.Write(b); return nil }); err != nil {
		return nil, fmt.Errorf("run %s: %w", c.Key(), err)
	}
	h, recs, err := instrument.ReadAll(&buf)
	if err != nil {
		return nil, err
	}
	return lessons.NewTrace(h, recs), nil
}

// solvedCourse solves every checkpoint of the course once, on the path a
// server without a GPU takes (the recording, else the CPU mirror).
var solvedCourse = sync.OnceValues(func() ([]solved, error) {
	course, err := lessons.Default()
	if err != nil {
		return nil, err
	}
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		return nil, err
	}
	r := &runner.Router{Recordings: recs, Mirror: runner.Mirror{}}
	var out []solved
	for _, l := range course.Lessons {
		for _, c := range l.Checkpoints {
			var tr *lessons.Trace
			if c.NeedsTrace() {
				if tr, err = runTrace(r, c.Run); err != nil {
					return nil, err
				}
			}
			s, err := c.Solve(tr)
			if err != nil {
				return nil, err
			}
			out = append(out, solved{l.Slug + "/" + c.ID, c, s})
		}
	}
	return out, nil
})

func courseSolved(t *testing.T) []solved {
	t.Helper()
	all, err := solvedCourse()
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// displayed is the number a revealed answer shows, its unit taken off.
func displayed(d string) (float64, error) {
	d = strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(d, " bytes"), " ns"), "×"), "%"), "SM ")
	return strconv.ParseFloat(d, 64)
}

// probe is an answer and whether it must pass.
type probe struct {
	answer string
	pass   bool
	why    string
}

// edgeProbes are answers around x under the rule sp: just inside and just
// outside the tolerance on both sides, and fresh random ones inside and
// outside (within three tolerances, so that a tripled tolerance takes
// them).
func edgeProbes(rng *rand.Rand, sp tolSpec, x float64) []probe {
	tol := sp.allowed(x)
	var ps []probe
	if sp.rule == "exact" {
		ps = append(ps, probe{num(x), true, "exact"}, probe{strconv.FormatFloat(x, 'f', 1, 64), true, "exact, with a decimal"})
		for _, d := range []float64{1, -1, float64(1 + rng.IntN(5)), -float64(1 + rng.IntN(5))} {
			ps = append(ps, probe{num(x + d), false, fmt.Sprintf("%+g off a whole number", d)})
		}
		return ps
	}
	for _, sign := range []float64{1, -1} {
		ps = append(ps,
			probe{num(x + sign*tol*(1-1e-6)), true, fmt.Sprintf("%+.6f tolerances", sign*(1-1e-6))},
			probe{num(x + sign*tol*(1+1e-6)), false, fmt.Sprintf("%+.6f tolerances", sign*(1+1e-6))})
		for range 4 {
			in := rng.Float64() * 0.999
			out := 1.001 + 1.9*rng.Float64()
			ps = append(ps,
				probe{num(x + sign*tol*in), true, fmt.Sprintf("%+.4f tolerances", sign*in)},
				probe{num(x + sign*tol*out), false, fmt.Sprintf("%+.4f tolerances", sign*out)})
		}
	}
	return ps
}

// TestToleranceRules: every numeric checkpoint is graded by its ask's rule
// (the directive's tol= in place of the default), and its Unit says that
// rule in words.
func TestToleranceRules(t *testing.T) {
	t.Parallel()
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		if c.Format != grading.FormatNumber {
			if c.Unit() != "" || c.Allowed(s.Number) != 0 {
				t.Errorf("%s: a %s checkpoint has a unit %q or a tolerance", sc.name, c.Format, c.Unit())
			}
			continue
		}
		sp := specOf(t, c)
		want := sp.allowed(s.Number)
		if got := c.Allowed(s.Number); math.Abs(got-want) > 1e-12*want {
			t.Errorf("%s: the tolerance at %s is %g, the rule (%+v) says %g", sc.name, s.Display, got, sp, want)
		}
		unit := c.Unit()
		pct := func(f float64) string { return num(f*100) + "%" }
		var says []string
		switch sp.rule {
		case "exact":
			says = []string{"whole number", "exactly"}
		case "abs":
			says = []string{"±" + num(sp.abs)}
		case "small":
			says = []string{pct(sp.rel), "±" + num(sp.abs)}
		case "rel":
			says = []string{pct(sp.rel)}
		}
		for _, w := range says {
			if !strings.Contains(unit, w) {
				t.Errorf("%s: Unit() %q does not say %q of its rule %+v", sc.name, unit, w, sp)
			}
		}
	}
}

// TestGradingAtTheToleranceEdges: for every numeric checkpoint, an answer
// just inside its tolerance passes and one just outside fails, on both
// sides, and so do fresh random ones; the revealed answer, typed back,
// passes, and shows the answer to the precision its tolerance needs.
func TestGradingAtTheToleranceEdges(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		if c.Format != grading.FormatNumber {
			continue
		}
		sp := specOf(t, c)
		checkEdges(t, rng, sc.name, c, s, sp)
	}
}

func checkEdges(t *testing.T, rng *rand.Rand, name string, c *lessons.Checkpoint, s grading.Solution, sp tolSpec) {
	t.Helper()
	tol := sp.allowed(s.Number)
	for _, p := range edgeProbes(rng, sp, s.Number) {
		v := c.Grade(p.answer, false, s)
		if v.Correct != p.pass || (p.pass && v.Status != "correct") || (!p.pass && v.Status == "correct") {
			t.Errorf("%s: %q (%s from %s, rule %+v, ±%g) graded %s %q, want pass=%v", name, p.answer, p.why, num(s.Number), sp, tol, v.Status, v.Hint, p.pass)
		}
		if !p.pass && v.Hint == "" {
			t.Errorf("%s: %q graded %s with no hint", name, p.answer, v.Status)
		}
	}
	// The revealed answer is right when typed back, and shows x to within
	// a quarter of the tolerance: enough digits to check it by.
	d, err := displayed(s.Display)
	if err != nil {
		t.Errorf("%s: the revealed answer %q is not a number: %v", name, s.Display, err)
		return
	}
	if v := c.Grade(s.Display, false, s); !v.Correct {
		t.Errorf("%s: the revealed answer %q typed back graded %+v", name, s.Display, v)
	}
	if math.Abs(d-s.Number) > tol/4*(1+1e-9) {
		t.Errorf("%s: the revealed answer %q is %g from %s, more than a quarter of the tolerance %g", name, s.Display, math.Abs(d-s.Number), num(s.Number), tol)
	}
	if sp.rule != "exact" && s.Number != 0 && significant(s.Display) < 3 {
		t.Errorf("%s: the revealed answer %q shows fewer than 3 significant digits", name, s.Display)
	}
}

// significant counts the significant digits a number is written with.
func significant(d string) int {
	d = strings.TrimLeft(strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(d, " ns"), "×"), "%"), "-"), "0.")
	if m, _, ok := strings.Cut(d, "e"); ok {
		d = m
	}
	return len(strings.ReplaceAll(d, ".", ""))
}

// TestLargeAlphaIsTiny is the case: α = exp(m_old − m_new) after a
// jump of about 85 is about 1.6e-37, not 0, and it shows as such.
func TestLargeAlphaIsTiny(t *testing.T) {
	t.Parallel()
	for _, sc := range courseSolved(t) {
		if sc.c.ID != "large-alpha" {
			continue
		}
		c, s := sc.c, sc.s
		if !(s.Number > 0 && s.Number < 1e-30) || !strings.Contains(s.Display, "e-") || !strings.Contains(s.Explain, s.Display) {
			t.Errorf("large-alpha: %g shown as %q, explained %q", s.Number, s.Display, s.Explain)
		}
		for _, a := range []string{"0", "0.000", "1e-36", "0.009", "1e-38", num(s.Number * 1.03), num(s.Number * 0.97)} {
			if v := c.Grade(a, false, s); v.Correct {
				t.Errorf("large-alpha: %q graded right against %s", a, s.Display)
			}
		}
		for _, a := range []string{s.Display, num(s.Number * 1.015), num(s.Number * 0.985)} {
			if v := c.Grade(a, false, s); !v.Correct {
				t.Errorf("large-alpha: %q graded %+v against %s", a, v, s.Display)
			}
		}
		return
	}
	t.Skip("the course has no checkpoint large-alpha")
}

// A value that is 0 in float32 (α past a jump of about 104, the weight of a
// masked key) takes whatever rounds to 0 in float32 and nothing else, for
// every ask whose value is float32 in [0, 1] or near it (grading's tests
// hold the rule itself to its edge).
func TestZeroInFloat32(t *testing.T) {
	t.Parallel()
	for _, ask := range []string{lessons.AskAlpha, lessons.AskP, lessons.AskWeight, lessons.AskLoopL} {
		c := &lessons.Checkpoint{ID: "zero", Ask: ask, Format: grading.FormatNumber, Tol: 0.01}
		if got := c.Allowed(0); got != 0x1p-150 {
			t.Errorf("%s of 0 allows %g, want 2^−150, what rounds to 0 in float32", ask, got)
		}
		s := grading.Solution{Number: 0, Display: "0", Lo: 0, Hi: 1, Why: "between 0 and 1"}
		for a, pass := range map[string]bool{"0": true, "7e-46": true, "2e-45": false} {
			if v := c.Grade(a, false, s); v.Correct != pass {
				t.Errorf("%s of 0: %q graded %+v, want pass=%v", ask, a, v, pass)
			}
		}
	}
}

// junk is never an answer, to any checkpoint.
var junk = []string{"", "   ", "NaN", "nan", "-NaN", "Inf", "+Inf", "-Inf", "inf", "−inf", "Infinity", "-infinity",
	"1e999", "-1e999", "banana", "12,5,3", "1..2", "--1", "1/2", "e", "∞", "−∞", "🙂", "½", "1e", "NaN%", "inf×", "×", "%", "SM"}

// TestJunkNeverPasses: NaN, ±Inf, empty and junk are invalid, with a hint,
// for every checkpoint; a reveal shows the answer whatever was typed.
func TestJunkNeverPasses(t *testing.T) {
	t.Parallel()
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		for _, a := range junk {
			if v := c.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" || v.Answer != "" || v.Explanation != "" {
				t.Errorf("%s: %q graded %+v, want invalid with a hint and no answer", sc.name, a, v)
			}
		}
		if v := c.Grade("banana", true, s); v.Status != "revealed" || v.Correct || v.Answer != s.Display || v.Explanation == "" {
			t.Errorf("%s: a reveal %+v", sc.name, v)
		}
	}
}

// TestChoicesAndTiles: the right option passes and every other fails with a
// hint that teaches; the right tiles pass in any spelling, and one tile
// more or less fails, every wrong set with the same hint.
func TestChoicesAndTiles(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		switch c.Format {
		case grading.FormatChoice:
			if v := c.Grade(s.Choice, false, s); !v.Correct || v.Answer != s.Display {
				t.Errorf("%s: the right option %q graded %+v", sc.name, s.Choice, v)
			}
			if v := c.Grade("  "+s.Choice+" ", false, s); !v.Correct {
				t.Errorf("%s: the right option with spaces graded %+v", sc.name, v)
			}
			for _, o := range c.Choices {
				if o.Value == s.Choice {
					continue
				}
				v := c.Grade(o.Value, false, s)
				if v.Correct || v.Status != "wrong" || v.Answer != "" || v.Explanation != "" {
					t.Errorf("%s: the wrong option %q graded %+v", sc.name, o.Value, v)
				}
				if !strings.HasPrefix(v.Hint, "Not that one.") || len(v.Hint) < len("Not that one.")+40 {
					t.Errorf("%s: the wrong option %q gets no teaching hint: %q", sc.name, o.Value, v.Hint)
				}
			}
		case grading.FormatTiles:
			right := slices.Clone(s.Tiles)
			spell := func(ts []string) string {
				if len(ts) == 0 {
					return "none"
				}
				ts = slices.Clone(ts)
				rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
				if len(ts) > 0 && rng.IntN(2) == 0 {
					ts = append(ts, ts[0]) // a tile twice
				}
				return strings.Join(ts, []string{";", "; ", " ", " ; "}[rng.IntN(4)])
			}
			for range 4 {
				if a := spell(right); !c.Grade(a, false, s).Correct {
					t.Errorf("%s: the right tiles as %q graded wrong", sc.name, a)
				}
			}
			var hint string
			wrongs := []string{}
			if len(right) > 0 {
				wrongs = append(wrongs, "none")
			}
			for _, o := range c.Choices {
				var ts []string
				if slices.Contains(right, o.Value) {
					ts = slices.DeleteFunc(slices.Clone(right), func(x string) bool { return x == o.Value })
				} else {
					ts = append(slices.Clone(right), o.Value)
				}
				wrongs = append(wrongs, spell(ts))
			}
			for _, a := range wrongs {
				v := c.Grade(a, false, s)
				if v.Correct || v.Status != "wrong" || v.Hint == "" || v.Answer != "" {
					t.Errorf("%s: %q (one tile more or less, or none) graded %+v", sc.name, a, v)
				}
				if hint == "" {
					hint = v.Hint
				} else if v.Hint != hint {
					t.Errorf("%s: two wrong sets of tiles get different hints, which tell tiles apart:\n%q\n%q", sc.name, hint, v.Hint)
				}
			}
		}
	}
}

// directional words a hint must not use of a wrong number.
var directional = []string{"higher", "lower", "too high", "too low", "too large", "too small", "too big",
	"greater than", "less than", "smaller than", "larger than", "bigger than", "overshoot", "undershoot"}

var numberToken = regexp.MustCompile(`\d+(?:\.\d+)?(?:[eE][-+−]?\d+)?`)

// publicNumbers are the numbers a student knows before answering: those of
// the question and of the checkpoint's own parameters (its row, kv-tile,
// key, batch-head, the run's tile sizes, a Hopper ask's sizes).
func publicNumbers(c *lessons.Checkpoint) []float64 {
	var out []float64
	for _, tok := range numberToken.FindAllString(c.Question, -1) {
		if x, err := strconv.ParseFloat(strings.ReplaceAll(tok, "−", "-"), 64); err == nil {
			out = append(out, x)
		}
	}
	br, bc, heads := max(c.Run.Br, 1), max(c.Run.Bc, 1), max(c.Run.Heads, 1)
	// The grid's size is on the page (a tiles question's picker has its
	// rows and columns), and so are the run's sizes.
	sizes := []int{c.Run.N, c.Run.D}
	if c.Run.Br > 0 && c.Run.Bc > 0 {
		sizes = append(sizes, c.Run.Tr(), c.Run.Tc())
	}
	h := c.Hopper
	sizes = append(sizes, h.Rows, h.D, h.N, h.Stages, h.Producer, h.Consumers)
	for _, n := range append([]int{c.Row, c.KV, c.Key, c.BH, c.Q, c.Consumer, 1 - c.Consumer, c.Row % br, c.Row / br, c.Key % bc, c.Key / bc, c.Run.Br, c.Run.Bc, c.BH / heads, c.BH % heads, c.Ladder.Shape.D}, sizes...) {
		out = append(out, float64(n))
	}
	return out
}

// leaks says what in the hint to an answer gives away the right one: the
// revealed answer as written (or its value as a choice or tile), or a
// number that would be graded right and is not one the student knew or
// typed.
func leaks(c *lessons.Checkpoint, s grading.Solution, tol float64, answer, hint string) string {
	bounded := func(needle string) bool {
		re := regexp.MustCompile(`(^|[^\w.,])` + regexp.QuoteMeta(needle) + `($|[^\w,]|\.(\s|$))`)
		return re.MatchString(hint)
	}
	// A number is caught below by its value, whatever its spelling.
	if c.Format != grading.FormatNumber && bounded(s.Display) {
		return "the revealed answer " + s.Display
	}
	switch c.Format {
	case grading.FormatChoice:
		for _, o := range c.Choices {
			if o.Value == s.Choice && (bounded(o.Label) || (!isNumber(o.Value) && bounded(o.Value))) {
				return "the right option " + o.Label
			}
		}
	case grading.FormatTiles:
		for _, tile := range s.Tiles {
			if bounded(tile) {
				return "the skipped tile " + tile
			}
		}
		public := publicNumbers(c)
		for _, n := range []int{len(s.Tiles), c.Run.Tr()*c.Run.Tc() - len(s.Tiles)} {
			if !slices.Contains(public, float64(n)) && bounded(strconv.Itoa(n)) {
				return fmt.Sprintf("the count %d of skipped or computed tiles", n)
			}
		}
	case grading.FormatNumber:
		public := publicNumbers(c)
		for _, tok := range numberToken.FindAllString(strings.ReplaceAll(answer, ",", ".")+" "+answer, -1) {
			if x, err := strconv.ParseFloat(tok, 64); err == nil {
				public = append(public, x)
			}
		}
		for _, tok := range numberToken.FindAllString(hint, -1) {
			x, err := strconv.ParseFloat(strings.ReplaceAll(tok, "−", "-"), 64)
			if err != nil || slices.Contains(public, x) {
				continue
			}
			for _, v := range []float64{x, -x} {
				if math.Abs(v-s.Number) <= max(tol, 1e-300) {
					return "the number " + tok + ", within the tolerance of the answer"
				}
			}
		}
	}
	return ""
}

func isNumber(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

// TestHintsTeachWithoutTelling: no hint of a wrong or invalid answer, for
// any checkpoint, holds the answer as revealed, a number that would be
// graded right, or which side of the answer the student is on; the hint of
// a wrong answer is the same on either side and whatever the answer is,
// so that trying answers tells nothing but wrong.
func TestHintsTeachWithoutTelling(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		var answers []string
		tol := 0.0
		switch c.Format {
		case grading.FormatNumber:
			sp := specOf(t, c)
			tol = sp.allowed(s.Number)
			for _, p := range edgeProbes(rng, sp, s.Number) {
				if !p.pass {
					answers = append(answers, p.answer)
				}
			}
			step := max(tol, 1)
			for _, k := range []float64{10, 1e3, 1e6, 1e12} {
				answers = append(answers, num(s.Number+k*step), num(s.Number-k*step))
			}
			answers = append(answers, "0", "1", "-1", "0.5", num(s.Hi*10+1e6), num(s.Lo-1e6))
		case grading.FormatChoice:
			for _, o := range c.Choices {
				answers = append(answers, o.Value)
			}
		case grading.FormatTiles:
			answers = append(answers, "none")
			for _, o := range c.Choices {
				answers = append(answers, o.Value)
			}
		}
		answers = append(answers, junk...)
		sideHints := map[string]string{} // wrong numbers' hints, by side
		for _, a := range answers {
			v := c.Grade(a, false, s)
			if v.Correct {
				continue
			}
			if what := leaks(c, s, tol, a, v.Hint); what != "" {
				t.Errorf("%s: the hint to %q gives away %s: %q", sc.name, a, what, v.Hint)
			}
			if v.Status != "wrong" {
				continue // an invalid answer's hint may say which bound it passed
			}
			for _, w := range directional {
				if strings.Contains(strings.ToLower(v.Hint), w) {
					t.Errorf("%s: the hint to %q says which way (%q): %q", sc.name, a, w, v.Hint)
				}
			}
			if c.Format != grading.FormatNumber {
				continue
			}
			x, _ := strconv.ParseFloat(a, 64)
			side := map[bool]string{true: "above", false: "below"}[x > s.Number]
			if x == 0 || x == 1 { // α's hint on 0 and 1 answers what was typed
				continue
			}
			sideHints[side] = v.Hint
		}
		if above, below := sideHints["above"], sideHints["below"]; above != "" && below != "" && above != below {
			t.Errorf("%s: a wrong number above the answer and one below get different hints:\n%q\n%q", sc.name, above, below)
		}
		// The same wrong answer against another solution: the same hint.
		other := s
		var a string
		switch c.Format {
		case grading.FormatNumber:
			a = num(s.Number + 5*max(tol, 1))
			other.Number = s.Number + 50*max(tol, 1)
			other.Hi = math.Inf(1)
		case grading.FormatChoice:
			for _, o := range c.Choices {
				if o.Value != s.Choice {
					if a == "" {
						a = o.Value
					} else {
						other.Choice = o.Value
					}
				}
			}
		case grading.FormatTiles:
			a = c.Choices[0].Value
			other.Tiles = []string{c.Choices[len(c.Choices)-1].Value}
		}
		if v1, v2 := c.Grade(a, false, s), c.Grade(a, false, other); v1.Status == "wrong" && v2.Status == "wrong" && v1.Hint != v2.Hint {
			t.Errorf("%s: the hint to %q depends on the answer:\n%q\n%q", sc.name, a, v1.Hint, v2.Hint)
		}
	}
}

// TestGradingOnFreshRuns: the same edges and displays on fresh inputs, on
// the CPU mirror, with every input pattern: values of every size, tiny α
// from large logits and α = 1 where the max stays.
func TestGradingOnFreshRuns(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	patterns := []instrument.Pattern{instrument.PatternNormal, instrument.PatternLarge, instrument.PatternPeaked}
	for _, sc := range courseSolved(t) {
		c := sc.c
		switch c.Ask {
		case lessons.AskM, lessons.AskL, lessons.AskAlpha, lessons.AskP, lessons.AskWeight, lessons.AskLoopL:
		default:
			continue
		}
		sp := specOf(t, c)
		for try := range 3 {
			cc := *c
			cc.Run.Engine = instrument.SourceCPUMirror
			cc.Run.Seed = rng.Uint64N(1 << 40)
			cc.Run.Pattern = patterns[try]
			var tr *lessons.Trace
			if cc.NeedsTrace() {
				var err error
				if tr, err = runTrace(runner.Mirror{}, cc.Run); err != nil {
					t.Fatal(err)
				}
			}
			s, err := cc.Solve(tr)
			if err != nil {
				t.Fatalf("%s: %v", sc.name, err)
			}
			name := fmt.Sprintf("%s on seed %d, %s", sc.name, cc.Run.Seed, cc.Run.Pattern)
			checkEdges(t, rng, name, &cc, s, sp)
			for _, a := range []string{num(s.Number + 3*sp.allowed(s.Number) + 1e-3), num(s.Number - 3*sp.allowed(s.Number) - 1e-3)} {
				if v := cc.Grade(a, false, s); !v.Correct {
					if what := leaks(&cc, s, sp.allowed(s.Number), a, v.Hint); what != "" {
						t.Errorf("%s: the hint to %q gives away %s: %q", name, a, what, v.Hint)
					}
				}
			}
		}
	}
}
