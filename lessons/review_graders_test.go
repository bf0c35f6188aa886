package lessons_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
)

// The graders a review of lessons 11, 13 and 14 found grading the wrong
// thing, each held at its edge: the right answer passes, an answer just
// past the tolerance fails, and every classic slip lands well outside it.

// gradeCourse is the course's checkpoint id, solved from its run as a
// student's page solves it.
func gradeCourse(t *testing.T, id string) solved {
	t.Helper()
	for _, sc := range courseSolved(t) {
		if sc.c.ID == id {
			return sc
		}
	}
	t.Fatalf("the course has no checkpoint %s", id)
	return solved{}
}

// slip is a wrong way to the answer and what it gives.
type slip struct {
	what string
	x    float64
}

// checkRightAndSlips grades the right answer and the answers just inside
// and just outside its tolerance on both sides, then each slip: wrong,
// and more than three tolerances from the answer, so that no rounding of
// the page's digits brings it in.
func checkRightAndSlips(t *testing.T, sc solved, slips []slip) {
	t.Helper()
	c, s := sc.c, sc.s
	tol := c.Allowed(s.Number)
	for _, p := range []struct {
		x    float64
		pass bool
	}{
		{s.Number, true},
		{s.Number + tol*(1-1e-6), true}, {s.Number - tol*(1-1e-6), true},
		{s.Number + tol*(1+1e-6), false}, {s.Number - tol*(1+1e-6), false},
	} {
		if v := c.Grade(num(p.x), false, s); v.Correct != p.pass {
			t.Errorf("%s: %s (answer %s, ±%.3g) graded %s, want correct %v", sc.name, num(p.x), s.Display, tol, v.Status, p.pass)
		}
	}
	for _, sl := range slips {
		if off := math.Abs(sl.x - s.Number); off <= 3*tol {
			t.Errorf("%s: %s gives %.4g, only %.2g tolerances from the answer %s: pick a question where that slip shows", sc.name, sl.what, sl.x, off/tol, s.Display)
		}
		if v := c.Grade(num(sl.x), false, s); v.Correct || v.Hint == "" {
			t.Errorf("%s: %s, %.4g, graded %s (hint %q), want wrong with a hint", sc.name, sl.what, sl.x, v.Status, v.Hint)
		}
	}
}

// TestDSNeedsD: lesson 13's one question about D needs D. Every ds
// checkpoint of the course is asked where leaving D out (p·dP, dO·V with
// nothing subtracted), adding it instead of subtracting it, flipping the
// sign, or leaving p out all land outside the tolerance.
func TestDSNeedsD(t *testing.T) {
	t.Parallel()
	r := engines(t)
	n := 0
	for _, sc := range courseSolved(t) {
		c := sc.c
		if c.Ask != lessons.AskDS {
			continue
		}
		n++
		tr := traceOf(t, r, c.Run)
		h := tr.H
		i, row, j, col := c.Row/h.Br, c.Row%h.Br, c.Key/h.Bc, c.Key%h.Bc
		var p, dp, d float64
		found := 0
		for _, st := range tr.Steps {
			switch {
			case st.Kind == instrument.KindBwdPre && st.BH == c.BH && st.I == i:
				d = float64(st.Delta[row])
				found++
			case st.Kind == instrument.KindBwdStep && st.BH == c.BH && st.I == i && st.J == j:
				p, dp = float64(st.P[row*h.Bc+col]), float64(st.DP[row*h.Bc+col])
				found++
			}
		}
		if found != 2 {
			t.Fatalf("%s: the trace has no preprocessing or step for row %d, key %d", sc.name, c.Row, c.Key)
		}
		if want := p * (dp - d); math.Abs(want-sc.s.Number) > 1e-6*max(1, math.Abs(want)) {
			t.Errorf("%s: the answer %s is not p·(dP − D) = %.6g", sc.name, sc.s.Display, want)
		}
		checkRightAndSlips(t, sc, []slip{
			{"p·dP, D left out (dO·V with nothing subtracted)", p * dp},
			{"p·(dP + D), D added", p * (dp + d)},
			{"p·(D − dP), the sign flipped", p * (d - dp)},
			{"dP − D, p left out", dp - d},
			{"dP alone", dp},
		})
	}
	if n == 0 {
		t.Fatal("the course asks for no dS")
	}
}

// TestSpeedupsTellTheirDirection: every speed-up the course asks for is
// far enough from 1 that its inverse (the slower over the faster, the
// ratio taken the wrong way up) and 1 itself (the two equal) are graded
// wrong; lesson 11's float32 one is graded at its edges and against both.
func TestSpeedupsTellTheirDirection(t *testing.T) {
	t.Parallel()
	n := 0
	for _, sc := range courseSolved(t) {
		if sc.c.Ask != lessons.AskLadderSpeedup {
			continue
		}
		n++
		x := sc.s.Number
		checkRightAndSlips(t, sc, []slip{
			{"the ratio inverted", 1 / x},
			{"no speed-up, 1", 1},
		})
	}
	if n == 0 {
		t.Fatal("the course asks for no speed-up")
	}
	// The float32 one, with the mask: flash2 skips half the work, naive
	// only the products of its masked scores, so the answer is neither 1
	// nor the 2 that the work alone would give.
	sc := gradeCourse(t, "f32-speedup")
	if !sc.c.Ladder.Shape.Causal {
		t.Errorf("f32-speedup asks without a mask, where flash2 and naive are within a few percent of each other")
	}
	checkRightAndSlips(t, sc, []slip{{"the work's ratio, 2", 2}})
}

// TestBackwardWidgetsHoldTheirAnswers: lesson 13's Σp and dQ questions
// are held in every stepper of their run on the page: the row's p and
// sums after the kv-tile the question names (held in the URL as
// psum.bh.row.step.id, from the step after that kv-tile's, which the
// answer's last step comes after), and its finished dQ from the step that
// writes it (dq.bh.row.step.id, the answer's own step), until the
// checkpoint (id) is answered.
func TestBackwardWidgetsHoldTheirAnswers(t *testing.T) {
	t.Parallel()
	course := course(t)
	n := 0
	for _, sc := range courseSolved(t) {
		c, s := sc.c, sc.s
		var of string
		switch c.Ask {
		case lessons.AskPLeft:
			of = lessons.HoldPSum
		case lessons.AskDQ:
			of = lessons.HoldDQ
		default:
			continue
		}
		n++
		// The step the hold starts from, from the run's schedule.
		i, from := c.Row/c.Run.Br, 0
		for k, st := range kernels.Schedule(&c.Run) {
			if st.BH != c.BH || st.I != i {
				continue
			}
			if of == lessons.HoldPSum && st.Kind == instrument.KindBwdStep && st.J == c.KV ||
				of == lessons.HoldDQ && st.Kind == instrument.KindBwdDQ {
				from = k + 1
			}
		}
		switch {
		case from == 0:
			t.Fatalf("%s: no step of its run to hold from", sc.name)
		case of == lessons.HoldPSum && s.Step <= from:
			t.Errorf("%s: the answer's step %d is not after the held kv-tile's step %d", sc.name, s.Step, from)
		case of == lessons.HoldDQ && s.Step != from:
			t.Errorf("%s: the answer's step %d is not the step %d that writes the finished dQ", sc.name, s.Step, from)
		}
		want := lessons.Hold{BH: c.BH, Row: c.Row, Step: from, Of: of, By: c.ID}
		if want.String() != fmt.Sprintf("%s.%d.%d.%d.%s", of, c.BH, c.Row, from, c.ID) || strings.ContainsAny(c.ID, ".,") {
			t.Errorf("%s: the hold is written %q", sc.name, want.String())
		}
		l, _ := course.Lesson(c.Lesson)
		steppers := 0
		for _, w := range l.Widgets {
			if w.Kind != lessons.WidgetStepper || w.Run.Key() != c.Run.Key() {
				continue
			}
			steppers++
			if !slices.Contains(w.Holds, want) || !strings.Contains(w.Src(), "hold=") || !strings.Contains(w.Src(), want.String()) {
				t.Errorf("%s: widget %s holds %v (%s), want %v", sc.name, w.ID, w.Holds, w.Src(), want)
			}
			if !slices.Contains(w.AskedBy, c.ID) {
				t.Errorf("%s: widget %s is not released by it (asked by %v)", sc.name, w.ID, w.AskedBy)
			}
			if w.ID == c.Widget && w.Step > from && of == lessons.HoldPSum {
				t.Errorf("%s: its widget opens at step %d, past the step %d the question is asked at", sc.name, w.Step, from)
			}
		}
		if steppers == 0 || c.Widget == "" {
			t.Errorf("%s: no stepper of its run on its page", sc.name)
		}
	}
	if n < 2 {
		t.Fatalf("%d backward checkpoints held", n)
	}
}
