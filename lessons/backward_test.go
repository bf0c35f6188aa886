package lessons_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/lessons"
	"flashstep/runner"
)

// The backward lesson's asks on fresh backward runs of the CPU mirror:
// each ask's answer held to the same quantity worked out a second way
// (from attention's exact gradient in float64 on the run's own inputs, or
// by counting the blocks' walks row by row), graded at the edges of its
// tolerance, against junk and NaN, and its hints checked for leaks. The
// runs come from testrand's seed, which a failure prints.

// randomBackward draws a backward run the mirror takes: ragged tiles,
// either mask, every input pattern.
func randomBackward(rng *rand.Rand) kernels.Config {
	patterns := []string{"normal", "large", "peaked"}
	n := 4 + rng.IntN(21)
	q := fmt.Sprintf("variant=flash2_bwd&n=%d&d=%d&br=%d&bc=%d&causal=%d&pattern=%s&seed=%d",
		n, 2*(1+rng.IntN(4)), 1+rng.IntN(min(6, n)), 1+rng.IntN(min(6, n)), rng.IntN(2), patterns[rng.IntN(3)], rng.Uint64N(1<<40))
	c, err := lessons.Preset{Query: q}.Config()
	if err != nil {
		panic(fmt.Sprintf("%s: %v", q, err))
	}
	return c
}

// backwardBase is a checkpoint of ask as a lesson writes it, on the
// course's backward preset of the same mask: fresh runs take its copy.
func backwardBase(t *testing.T, ask string, causal bool) *lessons.Checkpoint {
	t.Helper()
	preset := "bwd-16"
	if causal {
		preset = "bwd-causal-16"
	}
	attrs := map[string]string{
		lessons.AskPLeft:     "row=13 kv=1",
		lessons.AskDS:        "row=13 key=9",
		lessons.AskDQ:        "row=13 col=3",
		lessons.AskFirstLoad: "kv=2",
	}[ask]
	return loadCheckpoint(t, fmt.Sprintf("::: checkpoint id=c preset=%s ask=%s %s\nThe question.\n:::\n", preset, ask, attrs))
}

// firstQTile is the first q-tile whose rows see key j·Bc, found row by
// row: under the causal mask row r sees key k when k ≤ r.
func firstQTile(c kernels.Config, j int) int {
	if !c.Causal {
		return 0
	}
	for r := 0; r < c.N; r++ {
		if r >= j*c.Bc {
			return r / c.Br
		}
	}
	return c.Tr()
}

// exact is what the float64 forward and gradient of a run's own inputs
// say of one row: its weights P on every key and its D, dP on every key,
// and its dQ.
type exact struct {
	p, dp, dq []float64
	d         float64
	maxAbsS   float64 // the run's largest finite score, for the mirror's bound
	dqSize    float64 // the size the mirror's dQ is held to the gradient in
}

func exactRow(c kernels.Config, row int) exact {
	in := kernels.InputsFor(&c, 0)
	n, d := c.N, c.D
	scale := 1 / math.Sqrt(float64(d))
	g := kernelstest.ReferenceGrad(in, in.DO, n, d, c.Causal)
	e := exact{p: make([]float64, n), dp: make([]float64, n), d: g.D[row], dq: g.DQ[row*d : (row+1)*d]}
	s := make([]float64, n)
	m := math.Inf(-1)
	for r := 0; r < n; r++ {
		for k := 0; k < n; k++ {
			var dot float64
			for x := 0; x < d; x++ {
				dot += float64(in.Q[r*d+x]) * float64(in.K[k*d+x])
			}
			e.maxAbsS = max(e.maxAbsS, math.Abs(dot*scale))
			if r == row {
				s[k] = dot * scale
				if c.Causal && k > row {
					s[k] = math.Inf(-1)
				}
				m = max(m, s[k])
			}
		}
	}
	var sum float64
	for k := range s {
		sum += math.Exp(s[k] - m)
	}
	for k := range s {
		e.p[k] = math.Exp(s[k] - m - math.Log(sum))
		for x := 0; x < d; x++ {
			e.dp[k] += float64(in.DO[row*d+x]) * float64(in.V[k*d+x])
		}
	}
	e.dqSize, _, _ = kernelstest.GradSizes(in, in.DO, n, d, c.Causal)
	return e
}

// mirrorTrace is run c's trace from the CPU mirror.
func mirrorTrace(t *testing.T, c kernels.Config) *lessons.Trace {
	t.Helper()
	c.Engine = instrument.SourceCPUMirror
	return traceOf(t, runner.Mirror{}, c)
}

var backwardAsks = []string{lessons.AskPLeft, lessons.AskDS, lessons.AskDQ, lessons.AskFirstLoad}

// drawBackward puts on cc what ask asks about in its run, where the run
// has it: a row with a kv-tile left after kv, a key the row sees, a column,
// a kv-tile.
func drawBackward(rng *rand.Rand, ask string, cc *lessons.Checkpoint) bool {
	c := cc.Run
	cc.Row = rng.IntN(c.N)
	switch ask {
	case lessons.AskPLeft:
		var js []int // the kv-tiles that visit the row's q-tile
		for j := 0; j < c.Tc(); j++ {
			if firstQTile(c, j) <= cc.Row/c.Br {
				js = append(js, j)
			}
		}
		if len(js) < 2 {
			return false
		}
		cc.KV = js[rng.IntN(len(js)-1)]
	case lessons.AskDS:
		hi := c.N
		if c.Causal {
			hi = cc.Row + 1
		}
		cc.Key = rng.IntN(hi)
	case lessons.AskDQ:
		cc.Col = rng.IntN(c.D)
	case lessons.AskFirstLoad:
		cc.KV = rng.IntN(c.Tc())
	}
	return true
}

// backwardTruth is ask's answer worked out the second way, and how far
// from it the kernel's float32 answer may lie.
func backwardTruth(ask string, cc *lessons.Checkpoint) (want, within float64) {
	c := cc.Run
	switch ask {
	case lessons.AskFirstLoad:
		step := c.Tr() // the preprocessing, one step per q-tile
		for j := 0; j < cc.KV; j++ {
			step += c.Tr() - firstQTile(c, j)
		}
		return float64(step + 1), 0
	}
	e := exactRow(c, cc.Row)
	// The mirror's float32 rounding grows with the scores, as its own
	// bound against the gradient does (kernelstest.BackwardTolerance).
	grow := math.Max(1, e.maxAbsS/16)
	switch ask {
	case lessons.AskPLeft:
		var left float64
		for k := (cc.KV + 1) * c.Bc; k < c.N; k++ {
			left += e.p[k]
		}
		return left, 1e-5 * grow * float64(c.N)
	case lessons.AskDS:
		k := cc.Key
		return e.p[k] * (e.dp[k] - e.d), 1e-5 * grow * (1 + e.p[k]*(math.Abs(e.dp[k])+math.Abs(e.d)))
	case lessons.AskDQ:
		return e.dq[cc.Col], kernelstest.BackwardTolerance(e.maxAbsS) * e.dqSize
	}
	panic(ask)
}

func TestBackwardAsksOnFreshRuns(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	draws := 24
	if testing.Short() {
		draws = 8
	}
	base := map[string]*lessons.Checkpoint{}
	for _, ask := range backwardAsks {
		for _, causal := range []bool{false, true} {
			base[fmt.Sprint(ask, causal)] = backwardBase(t, ask, causal)
		}
	}
	checked := map[string]int{}
	for range draws {
		cfg := randomBackward(rng)
		tr := mirrorTrace(t, cfg)
		for _, ask := range backwardAsks {
			cc := *base[fmt.Sprint(ask, cfg.Causal)]
			cc.Run = cfg
			if !drawBackward(rng, ask, &cc) {
				continue
			}
			name := fmt.Sprintf("%s row %d kv %d key %d col %d on %s", ask, cc.Row, cc.KV, cc.Key, cc.Col, cfg.Key())
			if !cc.NeedsTrace() || cc.Source() != "" {
				t.Fatalf("%s: answered without the trace", name)
			}
			s, err := cc.Solve(tr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s.Explain == "" || s.Display == "" || math.IsNaN(s.Number) || s.Number < s.Lo || s.Number > s.Hi {
				t.Fatalf("%s: solution %+v", name, s)
			}
			want, within := backwardTruth(ask, &cc)
			if !(math.Abs(s.Number-want) <= within) {
				t.Errorf("%s: the trace says %g, the exact gradient %g (more than %g apart)", name, s.Number, want, within)
			}
			checkEdges(t, rng, name, &cc, s, askRules[ask])
			for _, a := range junk {
				if v := cc.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" {
					t.Errorf("%s: %q graded %+v", name, a, v)
				}
			}
			tol := cc.Allowed(s.Number)
			for _, k := range []float64{3, 10, -3, -10} {
				a := num(s.Number + k*math.Max(tol, 1e-3))
				v := cc.Grade(a, false, s)
				if v.Correct {
					t.Errorf("%s: %s, %g tolerances off, graded right", name, a, k)
				}
				if what := leaks(&cc, s, tol, a, v.Hint); what != "" {
					t.Errorf("%s: the hint to %s gives away %s: %q", name, a, what, v.Hint)
				}
			}
			checked[ask]++
		}
	}
	for _, ask := range backwardAsks {
		if checked[ask] == 0 {
			t.Errorf("no fresh run checked ask %s", ask)
		}
	}
}

// A trace whose numbers are NaN (a broken kernel) gives no answer that any
// typed answer matches: NaN is never accepted, not even "NaN".
func TestBackwardAsksNeverAcceptNaN(t *testing.T) {
	t.Parallel()
	for _, ask := range []string{lessons.AskPLeft, lessons.AskDS, lessons.AskDQ} {
		c := backwardBase(t, ask, false)
		tr := mirrorTrace(t, c.Run)
		nan := float32(math.NaN())
		poisoned := &lessons.Trace{H: tr.H}
		for _, st := range tr.Steps {
			cp := *st
			for _, arr := range []*[]float32{&cp.P, &cp.DS, &cp.DQ, &cp.Delta} {
				*arr = slices.Clone(*arr)
				for k := range *arr {
					(*arr)[k] = nan
				}
			}
			poisoned.Steps = append(poisoned.Steps, &cp)
		}
		s, err := c.Solve(poisoned)
		if err != nil {
			continue // refusing to answer is as good
		}
		for _, a := range []string{"NaN", "nan", "0", "1", "-1", "0.5", s.Display, num(s.Number)} {
			if v := c.Grade(a, false, s); v.Correct {
				t.Errorf("%s on a NaN trace: %q graded right (%+v)", ask, a, v)
			}
		}
	}
}

// The causal backward skips exactly the forward's tiles, and the skipped
// ask reads them from a backward trace as from a forward one.
func TestBackwardSkipsTheForwardsTiles(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	c := loadCheckpoint(t, "::: checkpoint id=c preset=bwd-causal-16 ask=skipped\nq\n:::\n")
	for range 6 {
		cfg := randomBackward(rng)
		cfg.Causal = rng.IntN(4) > 0
		fwd := cfg
		fwd.Variant = instrument.VariantFlash2
		cb, cf := *c, *c
		cb.Run, cf.Run = cfg, fwd
		sb, err := cb.Solve(mirrorTrace(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		sf, err := cf.Solve(mirrorTrace(t, fwd))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sb.Tiles, sf.Tiles) {
			t.Errorf("%s: the backward skips %v, the forward %v", cfg.Key(), sb.Tiles, sf.Tiles)
		}
		if !cfg.Causal && len(sb.Tiles) > 0 {
			t.Errorf("%s: without a mask, skips %v", cfg.Key(), sb.Tiles)
		}
	}
}

// A backward ask refuses what it cannot answer, in words that say why.
func TestBackwardDirectivesFail(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	for body, want := range map[string]string{
		"::: checkpoint id=c preset=toy ask=p-left row=1 kv=0\nq\n:::\n":                   "reads a backward run's steps",
		"::: checkpoint id=c preset=bwd-16 ask=p-left row=5 kv=3\nq\n:::\n":                "is the last to visit row 5",
		"::: checkpoint id=c preset=bwd-causal-16 ask=p-left row=1 kv=2\nq\n:::\n":         "never visits row 1's q-tile",
		"::: checkpoint id=c preset=bwd-16 ask=p-left row=5\nq\n:::\n":                     "needs kv=",
		"::: checkpoint id=c preset=bwd-causal-16 ask=ds row=2 key=5\nq\n:::\n":            "key 5 comes after row 2",
		"::: checkpoint id=c preset=bwd-16 ask=ds row=2\nq\n:::\n":                         "needs key=",
		"::: checkpoint id=c preset=bwd-16 ask=dq row=5 col=8\nq\n:::\n":                   "col must be a whole number from 0 to 7",
		"::: checkpoint id=c preset=loop-order ask=dq row=5 col=0\nq\n:::\n":               "reads a backward run's steps",
		"::: checkpoint id=c preset=bwd-16 ask=first-load\nq\n:::\n":                       "needs kv=",
		"::: checkpoint id=c preset=bwd-16 ask=first-load kv=1 row=3\nq\n:::\n":            `unknown attribute "row"`,
		"::: checkpoint id=c preset=bwd-16 ask=m row=1 kv=0\nq\n:::\n":                     "reads FlashAttention steps",
		"::: checkpoint id=c preset=bwd-16 ask=loop-l row=1 kv=0 slip=no-divide\nq\n:::\n": "reads FlashAttention steps",
	} {
		_, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + body)}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", body, err, want)
		}
	}
}

// TestBackwardAnswerableFromTheWidget: the course's dS, Σp and dQ
// checkpoints, worked out from the numbers their widgets print (P at the
// widget's digits, the block's panes at the stepper's three, the rows
// table at six), are graded right with at least half the tolerance to
// spare: a careful student is never wrong for the page's rounding.
func TestBackwardAnswerableFromTheWidget(t *testing.T) {
	t.Parallel()
	course := course(t)
	r := engines(t)
	checked := 0
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		if c.Ask != lessons.AskDS && c.Ask != lessons.AskPLeft && c.Ask != lessons.AskDQ {
			continue
		}
		l, _ := course.Lesson(c.Lesson)
		w := widgetByID(l, c.Widget)
		if w == nil || w.Run.Key() != c.Run.Key() {
			t.Errorf("%s: no widget on its page steps its run", sc.name)
			continue
		}
		digits := w.Digits
		if digits == 0 {
			digits = 3
		}
		tr := traceOf(t, r, c.Run)
		h := tr.H
		i, row := c.Row/h.Br, c.Row%h.Br
		var got float64
		switch c.Ask {
		case lessons.AskDS:
			var p, dp, delta float32
			for _, st := range tr.Steps {
				switch {
				case st.Kind == instrument.KindBwdPre && st.I == i:
					delta = st.Delta[row]
				case st.Kind == instrument.KindBwdStep && st.I == i && st.J == c.Key/h.Bc:
					p, dp = st.P[row*h.Bc+c.Key%h.Bc], st.DP[row*h.Bc+c.Key%h.Bc]
				}
			}
			got = shownAt(p, digits) * (shownAt(dp, 3) - shownAt(delta, rowsDigits))
		case lessons.AskPLeft:
			var soFar float64
			for _, st := range tr.Steps {
				if st.Kind == instrument.KindBwdStep && st.I == i && st.J <= c.KV {
					for col := range st.ColsValid {
						soFar += float64(st.P[row*h.Bc+col])
					}
				}
			}
			got = 1 - shownAt(float32(soFar), rowsDigits)
		case lessons.AskDQ:
			var sum float64
			for _, st := range tr.Steps {
				if st.Kind == instrument.KindBwdStep && st.I == i {
					sum += shownAt(st.DQ[row*h.D+c.Col], 3)
				}
			}
			got = sum / math.Sqrt(float64(h.D))
		}
		answer := strconv.FormatFloat(got, 'g', 6, 64)
		if v := c.Grade(answer, false, s); !v.Correct {
			t.Errorf("%s: %s, worked out from what the widget shows, graded %s (the kernel's %s): %s", sc.name, answer, v.Status, s.Display, v.Hint)
		}
		if off, room := math.Abs(got-s.Number), c.Allowed(s.Number)/2; off > room {
			t.Errorf("%s: the page's digits alone put %s %.3g from the kernel's %s, more than half its tolerance (%.3g)", sc.name, answer, off, s.Display, 2*room)
		}
		checked++
	}
	if checked < 3 {
		t.Fatalf("%d backward checkpoints checked", checked)
	}
}

// TestBackwardHintsSendToThePage: each backward ask's hint names where on
// the page its numbers are, and the rule, never a number of the run.
func TestBackwardHintsSendToThePage(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		lessons.AskPLeft:     {"Σp so far", "add up to exactly one"},
		lessons.AskDS:        {"P tile", "dP pane", "rows table", "subtract D from dP"},
		lessons.AskDQ:        {"hover", "add the parts up", "one over √d"},
		lessons.AskFirstLoad: {"preprocessing step for each q-tile", "causal mask"},
	}
	for _, ask := range backwardAsks {
		c := backwardBase(t, ask, true)
		s, err := c.Solve(mirrorTrace(t, c.Run))
		if err != nil {
			t.Fatal(err)
		}
		wrong := num(s.Number + 1)
		if c.Format == grading.FormatNumber && c.Unit() != "a whole number, exactly" {
			wrong = num(s.Number + 5*c.Allowed(s.Number) + 0.05)
		}
		v := c.Grade(wrong, false, s)
		if v.Status != "wrong" {
			t.Fatalf("%s: %s graded %+v", ask, wrong, v)
		}
		for _, w := range want[ask] {
			if !strings.Contains(v.Hint, w) {
				t.Errorf("%s: the hint does not say %q: %s", ask, w, v.Hint)
			}
		}
	}
}

// A glossary word inside display math is TeX, not prose: the formula is
// left whole, and the link goes to the word's first mention in the text.
func TestGlossaryLeavesDisplayMathAlone(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	c, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + "$$\ndS = P \\circ (dP - D)\n$$\n\nThe result, dS, is the scores' gradient.\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var html strings.Builder
	for _, p := range c.Lessons[0].Parts {
		html.WriteString(p.HTML)
	}
	h := html.String()
	display, _, _ := strings.Cut(h[strings.Index(h, `<div class="math display">`):], "</div>")
	if strings.Contains(display, "<a") || !strings.Contains(h, `>dS</a>, is the scores`) {
		t.Errorf("the glossary linked inside the formula, or not in the text: %s", h)
	}
}
