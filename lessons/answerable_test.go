package lessons_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/lessons"
)

// A checkpoint that asks for a row's m, α or l at a kv-tile must be
// answerable from what its widget shows at that step, to the digits it
// shows them: the stepper holds back the row's m_new, α and l there ("?"),
// and prints the rest. These tests work each such answer out the way a
// student must, from the numbers as the page writes them, and hold it to
// the checkpoint's grading.

// shownAt is v as the stepper writes it with d significant digits
// (static/js/format.js fmt: toPrecision(d)); ±∞ stay.
func shownAt(v float32, d int) float64 {
	x := float64(v)
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	y, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', d, 64), 64)
	return y
}

// rowsDigits is how many significant digits the rows table prints
// (stepper_rows.js: fmt(v, 6)).
const rowsDigits = 6

// widgetByID is the widget of lesson l called id.
func widgetByID(l *lessons.Lesson, id string) *lessons.Widget {
	for _, w := range l.Widgets {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// fromThePage is what a student computes for checkpoint c from what its
// widget w shows at the step c asks about (t is the run's trace): the
// rows table's m_old and, a step before, l; the row's largest score and
// Σp of the tile, from the rows table where the tile is too wide to print
// (lessons: more than 8 columns) and else from the S and P tiles' cells,
// to the digits they print.
func fromThePage(t *testing.T, c *lessons.Checkpoint, w *lessons.Widget, tr *lessons.Trace) (m, alpha, l float64) {
	t.Helper()
	h := tr.H
	q, row := c.Row/h.Br, c.Row%h.Br
	var rec, prev *instrument.Record
	for _, r := range tr.Steps {
		if r.Kind != instrument.KindFlashStep || r.BH != c.BH || r.I != q {
			continue
		}
		if r.J == c.KV {
			rec = r
		}
		if r.J == c.KV-1 {
			prev = r
		}
	}
	if rec == nil || (c.KV > 0 && prev == nil) {
		t.Fatalf("%s: no flash step of q-tile %d at kv-tile %d", c.ID, q, c.KV)
	}
	digits := w.Digits
	if digits == 0 {
		digits = 3
	}
	mOld := shownAt(rec.MOld[row], rowsDigits)
	tileMax, sumP := math.Inf(-1), 0.0
	if h.Bc > 8 {
		var s32 float32 = float32(math.Inf(-1))
		var p64 float64
		for col := 0; col < rec.ColsValid; col++ {
			s32 = max(s32, rec.S[row*h.Bc+col])
			p64 += float64(rec.P[row*h.Bc+col])
		}
		tileMax, sumP = shownAt(s32, rowsDigits), shownAt(float32(p64), rowsDigits)
	} else {
		for col := 0; col < rec.ColsValid; col++ {
			tileMax = max(tileMax, shownAt(rec.S[row*h.Bc+col], digits))
			sumP += shownAt(rec.P[row*h.Bc+col], digits)
		}
	}
	m = max(mOld, tileMax)
	alpha = math.Exp(mOld - m)
	lOld := 0.0
	if prev != nil {
		lOld = shownAt(prev.L[row], rowsDigits)
	}
	return m, alpha, alpha*lOld + sumP
}

// TestAnswerableFromTheWidget: every m, α and l checkpoint about a
// stepper widget's run, worked out from the numbers the widget prints at
// the step it asks about, is graded right, with at least half the
// tolerance to spare for the student's own rounding: the digits the page
// shows are never what makes a careful answer wrong. (Lesson 6's α after a
// jump of 85 needs the S tile's five digits: at three, 50.022 prints as
// 50, and α from it is 2.2% off.)
func TestAnswerableFromTheWidget(t *testing.T) {
	t.Parallel()
	c := course(t)
	r := engines(t)
	checked := 0
	for _, l := range c.Lessons {
		for _, cp := range l.Checkpoints {
			if cp.Ask != lessons.AskM && cp.Ask != lessons.AskAlpha && cp.Ask != lessons.AskL {
				continue
			}
			w := widgetByID(l, cp.Widget)
			if w == nil || w.Kind != lessons.WidgetStepper || w.Run.Key() != cp.Run.Key() {
				t.Errorf("%s/%s: asks about a row of a run no stepper on its page shows", l.Slug, cp.ID)
				continue
			}
			tr := traceOf(t, r, cp.Run)
			sol, err := cp.Solve(tr)
			if err != nil {
				t.Fatal(err)
			}
			m, alpha, lsum := fromThePage(t, cp, w, tr)
			got := map[string]float64{lessons.AskM: m, lessons.AskAlpha: alpha, lessons.AskL: lsum}[cp.Ask]
			answer := strconv.FormatFloat(got, 'g', 6, 64)
			if v := cp.Grade(answer, false, sol); !v.Correct {
				t.Errorf("%s/%s: %s, worked out from what the widget shows, graded %s (the kernel's %s): %s", l.Slug, cp.ID, answer, v.Status, sol.Display, v.Hint)
			}
			if off, room := math.Abs(got-sol.Number), cp.Allowed(sol.Number)/2; off > room {
				t.Errorf("%s/%s: the page's digits alone put %s %.3g from the kernel's %s, more than half its tolerance (%.3g)", l.Slug, cp.ID, answer, off, sol.Display, 2*room)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no m, α or l checkpoint checked")
	}
}

// TestLargeAlphaTolerance: lesson 6's α after row 4's max jumps by about
// 85 is tiny, and its relative tolerance is what grades it. Answers from
// the digits the page shows pass, whether a student keeps two
// significant digits or five (more digits are never punished); answers
// that say something else about the jump (0: past 104, 1e-36: a jump 2
// smaller, 0.009: a jump of 5) fail; and the edge of the rule is where the
// lesson says, 3% of the value.
func TestLargeAlphaTolerance(t *testing.T) {
	t.Parallel()
	for _, sc := range courseSolved(t) {
		if sc.name != "stability/large-alpha" {
			continue
		}
		c, s := sc.c, sc.s
		x := s.Number
		if x <= 0 || x > 1e-30 {
			t.Fatalf("the lesson's α is %g, no longer tiny: reread lesson 6", x)
		}
		for d := 2; d <= 6; d++ {
			a := strconv.FormatFloat(x, 'e', d-1, 64)
			if v := c.Grade(a, false, s); !v.Correct {
				t.Errorf("%s (the answer to %d significant digits) graded %s", a, d, v.Status)
			}
		}
		// What the student of the review computed from "50", the S tile's
		// three digits, and what more digits of the same gave: both right.
		for _, a := range []string{"1.68e-37", "1.684e-37", "1.6846e-37"} {
			if v := c.Grade(a, false, s); !v.Correct {
				t.Errorf("%s graded %s", a, v.Status)
			}
		}
		for _, a := range []string{"0", "1e-36", "0.009", "1"} {
			if v := c.Grade(a, false, s); v.Correct {
				t.Errorf("%s graded right", a)
			}
		}
		const rel = 0.03
		for _, sign := range []float64{1, -1} {
			in, out := x*(1+sign*rel*(1-1e-6)), x*(1+sign*rel*(1+1e-6))
			if v := c.Grade(strconv.FormatFloat(in, 'g', -1, 64), false, s); !v.Correct {
				t.Errorf("just inside 3%% (%g) graded %s", in, v.Status)
			}
			if v := c.Grade(strconv.FormatFloat(out, 'g', -1, 64), false, s); v.Correct {
				t.Errorf("just outside 3%% (%g) graded right", out)
			}
		}
		if u := c.Unit(); !strings.Contains(u, "3%") {
			t.Errorf("the rule in words, %q, does not say 3%%", u)
		}
		return
	}
	t.Fatal("no checkpoint stability/large-alpha")
}

// TestLastRiseHintNeedsNoHeldNumber: the rows table of a widget that
// also asks for a row's m at a kv-tile holds that row's m back from there
// on, so the hint of a wrong last-raise sends the student to the scores,
// not to m_old and m_new.
func TestLastRiseHintNeedsNoHeldNumber(t *testing.T) {
	t.Parallel()
	seen := false
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		if c.Ask != lessons.AskLastRise {
			continue
		}
		seen = true
		var other string
		for _, o := range c.Choices {
			if o.Value != s.Choice {
				other = o.Value
				break
			}
		}
		v := c.Grade(other, false, s)
		if v.Status != "wrong" {
			t.Fatalf("%s: %s graded %s", sc.name, other, v.Status)
		}
		if strings.Contains(v.Hint, "read m_old and m_new") || !strings.Contains(v.Hint, "largest score") {
			t.Errorf("%s: the hint sends the student to held numbers, or not to the scores: %s", sc.name, v.Hint)
		}
	}
	if !seen {
		t.Fatal("the course has no last-raise checkpoint")
	}
}

// TestHintsPointAtWhatIsShown: the hint of a wrong m, α or l says where
// each number it needs is on the page. At the step asked about the rows
// table holds back the row's m_new, α and l: an α or l hint says so and
// sends the student to m_old and the tile's largest score instead, never
// to read m_new or α in the table; where a tile is too wide to print its
// numbers (lessons 9 and 10), it names the rows table's columns that give
// the row's largest score and its Σp.
func TestHintsPointAtWhatIsShown(t *testing.T) {
	t.Parallel()
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		if (c.Ask != lessons.AskM && c.Ask != lessons.AskAlpha && c.Ask != lessons.AskL) || c.KV == 0 || c.Widget == "" {
			continue
		}
		wrong := s.Number + 0.5
		if c.Ask == lessons.AskAlpha {
			wrong = s.Number / 2
		}
		v := c.Grade(strconv.FormatFloat(wrong, 'g', -1, 64), false, s)
		if v.Status != "wrong" {
			t.Fatalf("%s: %g graded %s", sc.name, wrong, v.Status)
		}
		h := v.Hint
		for _, bad := range []string{"read m_old and m_new in the rows table", "from the rows table at kv-tile", "m_new from the rows table"} {
			if strings.Contains(h, bad) {
				t.Errorf("%s: the hint sends the student to a held number (%q): %s", sc.name, bad, h)
			}
		}
		if c.Ask != lessons.AskM && !strings.Contains(h, "holds back") {
			t.Errorf("%s: the hint does not say the rows table holds m_new back: %s", sc.name, h)
		}
		if c.Run.Bc > 8 {
			want := []string{"max S (this tile)"}
			if c.Ask == lessons.AskL {
				want = append(want, "Σp (this tile)")
			}
			for _, w := range want {
				if !strings.Contains(h, w) {
					t.Errorf("%s: a tile of %d columns prints no numbers, and the hint does not name the rows table's %q: %s", sc.name, c.Run.Bc, w, h)
				}
			}
		}
	}
}

// TestWidgetDigitsReachTheStepper: a stepper widget's digits= is in the
// address its frame loads (the stepper reads it there), and lesson 6's
// large-logits widget asks for the five digits its α checkpoint needs.
func TestWidgetDigitsReachTheStepper(t *testing.T) {
	t.Parallel()
	c := course(t)
	found := false
	for _, l := range c.Lessons {
		for _, w := range l.Widgets {
			if w.Digits > 0 && !strings.Contains(w.Src(), "digits="+strconv.Itoa(w.Digits)) {
				t.Errorf("%s/%s: digits=%d is not in its frame's address %s", l.Slug, w.ID, w.Digits, w.Src())
			}
			if l.Slug == "stability" && w.ID == "large-run" {
				found = true
				if w.Digits < 5 {
					t.Errorf("stability/large-run prints %d digits; its α checkpoint needs 5", w.Digits)
				}
			}
		}
	}
	if !found {
		t.Fatal("no widget stability/large-run")
	}
}
