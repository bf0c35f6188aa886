package lessons_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
)

// filled says whether the stepper's panel shows something at step k of a
// run (counted from 0 over the steps, the inputs record left out), by the
// record kinds each panel draws (static/js/stepper_panels.js): a widget must not
// open on a panel that says "No S tile in this step". A panel that says
// why a phase of naive attention has no such tile ("P does not exist yet:
// phase 2 computes it", "S is gone: phase 3 reads P", "Reads rows of S")
// is teaching that phase, and counts as filled.
func filled(panel string, steps []kernels.StepRef, k int, variant instrument.Variant) (bool, string) {
	r := steps[k]
	switch panel {
	case "qkv":
		return r.Kind != instrument.KindEpilogue && r.Kind != instrument.KindTiming, "no input tiles"
	case "s":
		return r.Kind == instrument.KindFlashStep || r.Kind == instrument.KindScores || r.Kind == instrument.KindPV || r.Kind == instrument.KindBwdStep, "no S tile"
	case "p":
		return r.Kind == instrument.KindFlashStep || r.Kind == instrument.KindScores || r.Kind == instrument.KindPV || r.Kind == instrument.KindBwdStep, "no P tile"
	case "o":
		// A backward step draws dS there, its preprocessing O, its
		// finishing step dQ (static/js/backward.js); a split-KV run's split
		// end its partial O_s, a merge record the O merged so far (every
		// record that carries an O: stepper_panels.js draws r.o).
		return r.Kind == instrument.KindFlashStep || r.Kind == instrument.KindEpilogue || r.Kind == instrument.KindPV ||
			r.Kind == instrument.KindBwdStep || r.Kind == instrument.KindBwdPre || r.Kind == instrument.KindBwdDQ ||
			r.Kind == instrument.KindSplitEnd || r.Kind == instrument.KindMerge, "O not touched"
	case "rows":
		return r.Kind != instrument.KindTiming, "no rows"
	case "final":
		// A backward step shows its block's dP, dV_j, dK_j and dQ part; a
		// finishing step the dQ of the q-tiles done so far.
		if r.Kind == instrument.KindBwdStep || r.Kind == instrument.KindBwdDQ {
			return true, ""
		}
		if r.Kind == instrument.KindBwdPre {
			return false, "no dQ yet"
		}
		for _, s := range steps[:k+1] {
			if s.Kind == instrument.KindEpilogue && s.BH == r.BH {
				return true, ""
			}
		}
		return false, "no q-tile has finished yet"
	}
	return true, "" // grid, bytes, source, timeline: every step
}

// TestWidgetsOpenWhereTheTextIs: every embedded stepper opens on a step
// whose panels are all filled, and a checkpoint about a row of a widget's
// run opens that widget on the row's q-tile and batch-head, before the step
// that shows the answer.
func TestWidgetsOpenWhereTheTextIs(t *testing.T) {
	t.Parallel()
	c := course(t)
	r := engines(t)
	for _, l := range c.Lessons {
		for _, w := range l.Widgets {
			if w.Kind != lessons.WidgetStepper {
				continue
			}
			// The stepper's steps: a roles run's role records are not steps.
			steps := slices.DeleteFunc(kernels.Schedule(&w.Run), func(st kernels.StepRef) bool { return st.Kind == instrument.KindRole })
			if w.Step < 1 || w.Step > len(steps) {
				t.Errorf("%s/%s: step %d of %d", l.Slug, w.ID, w.Step, len(steps))
				continue
			}
			k := w.Step - 1
			panels := w.Panels
			if len(panels) == 0 {
				panels = lessons.Panels
			}
			for _, p := range panels {
				if ok, why := filled(p, steps, k, w.Run.Variant); !ok {
					at := steps[k]
					t.Errorf("%s/%s opens at step %d (%s, q-tile %d, kv-tile %d), where its %s panel shows %s", l.Slug, w.ID, w.Step, kindName(at.Kind), at.I, at.J, p, why)
				}
			}
			for _, cp := range l.Checkpoints {
				if cp.Widget != w.ID || !cp.NeedsTrace() || !rowAsk(cp.Ask) {
					continue
				}
				at := steps[k]
				if q := cp.Row / w.Run.Br; at.I != q || at.BH != cp.BH {
					t.Errorf("%s/%s opens on q-tile %d of batch-head %d; checkpoint %s asks about row %d, in q-tile %d of batch-head %d",
						l.Slug, w.ID, at.I, at.BH, cp.ID, cp.Row, q, cp.BH)
				}
				if cp.Run.Key() != w.Run.Key() {
					continue
				}
				sol, err := cp.Solve(traceOf(t, r, cp.Run))
				if err != nil {
					t.Fatal(err)
				}
				if sol.Step > 0 && w.Step >= sol.Step {
					t.Errorf("%s/%s opens at step %d; checkpoint %s's answer shows at step %d: open it before", l.Slug, w.ID, w.Step, cp.ID, sol.Step)
				}
				// A question of which key a row attends to most is a search
				// through the row's tiles: its widget must not open on the
				// tile that holds the winning score.
				if cp.Ask == lessons.AskArgmax {
					key, err := strconv.Atoi(sol.Choice)
					if err != nil {
						t.Fatalf("%s: choice %q", cp.ID, sol.Choice)
					}
					if at.Kind == instrument.KindFlashStep && at.J == key/w.Run.Bc {
						t.Errorf("%s/%s opens at step %d, on kv-tile %d, which holds row %d's largest score (key %d): checkpoint %s asks the student to find it, so open it on another of the row's tiles",
							l.Slug, w.ID, w.Step, at.J, cp.Row, key, cp.ID)
					}
				}
			}
		}
	}
}

// rowAsk says whether an ask is about one row of a run.
func rowAsk(ask string) bool {
	return slices.Contains([]string{lessons.AskM, lessons.AskL, lessons.AskAlpha, lessons.AskWeight, lessons.AskP, lessons.AskArgmax, lessons.AskLastRise}, ask)
}

func kindName(k instrument.Kind) string {
	for _, x := range instrument.Kinds {
		if x.Kind == k {
			return x.Name
		}
	}
	return fmt.Sprint(k)
}

// Every lesson closes with a recap, and links the glossary's words; every
// glossary entry names a lesson of the course and is used in it.
func TestRecapsAndGlossary(t *testing.T) {
	t.Parallel()
	c := course(t)
	var all strings.Builder
	for _, l := range c.Lessons {
		if len(l.Recap) < 2 {
			t.Errorf("%s: a recap of %d lines; say what the lesson established in two to four", l.Slug, len(l.Recap))
		}
		var body strings.Builder
		for _, p := range l.Parts {
			body.WriteString(p.HTML)
		}
		all.WriteString(body.String())
		if !strings.Contains(body.String(), `class="term" href="/glossary#`) {
			t.Errorf("%s links no glossary term", l.Slug)
		}
	}
	for _, term := range lessons.Glossary {
		if _, ok := c.Lesson(term.Lesson); !ok {
			t.Errorf("glossary %s: no lesson %q", term.ID, term.Lesson)
		}
		if !strings.Contains(all.String(), `href="/glossary#`+term.ID+`"`) {
			t.Errorf("glossary %s: no lesson mentions %q", term.ID, term.Forms[0])
		}
	}
}

// TestGlossaryHasTheCourseWords: the words a student meets in the later
// lessons have entries, each linked from its first mention in the lesson
// that teaches it, whether prose or an instruction's name written as code.
func TestGlossaryHasTheCourseWords(t *testing.T) {
	t.Parallel()
	c := course(t)
	words := []string{"L2 cache", "HBM", "local memory", "fragment", "quad", "ldmatrix", "cp.async", "mma.sync",
		"compute floor", "memory floor", "ridge point", "underflow", "NaN",
		"warpgroup", "wgmma", "TMA", "tensor map", "mbarrier", "expect_tx", "phase parity", "warp specialisation", "setmaxnreg", "ping-pong",
		"recomputes", "D", "dS", "atomic add",
		"prefill", "decoding", "KV cache", "grouped-query attention", "wave", "split-KV"}
	for _, w := range words {
		var term *lessons.Term
		for k := range lessons.Glossary {
			if slices.Contains(lessons.Glossary[k].Forms, w) {
				term = &lessons.Glossary[k]
			}
		}
		if term == nil {
			t.Errorf("the glossary has no entry for %q", w)
			continue
		}
		if len(term.Meaning) < 40 {
			t.Errorf("glossary %s: %q says too little", term.ID, term.Meaning)
		}
		l, ok := c.Lesson(term.Lesson)
		if !ok {
			t.Errorf("glossary %s: no lesson %q", term.ID, term.Lesson)
			continue
		}
		var body strings.Builder
		for _, p := range l.Parts {
			body.WriteString(p.HTML)
		}
		if n := strings.Count(body.String(), `href="/glossary#`+term.ID+`"`); n != 1 {
			t.Errorf("glossary %s (%q): linked %d times in lesson %s, which teaches it; want its first mention linked, once", term.ID, w, n, l.Slug)
		}
		if term.Code && !strings.Contains(body.String(), `href="/glossary#`+term.ID+`" title="`) {
			t.Errorf("glossary %s: its code form is not linked", term.ID)
		}
	}
}

// TestSideBySideCaptionsNameNoSide: the side by side puts its two panes
// next to each other on a wide screen and one under the other on a
// narrow one (a lesson's column at 1366 px is narrow), so a caption that
// says which is on the left is wrong at some width: captions name the
// panes by their headings and their order.
func TestSideBySideCaptionsNameNoSide(t *testing.T) {
	t.Parallel()
	for _, l := range course(t).Lessons {
		for _, w := range l.Widgets {
			if w.Kind != lessons.WidgetCompare {
				continue
			}
			low := strings.ToLower(w.Caption)
			for _, side := range []string{"left", "right", "above", "below"} {
				if strings.Contains(low, side) {
					t.Errorf("%s/%s: its caption says %q, which holds at some widths only: %s", l.Slug, w.ID, side, w.Caption)
				}
			}
		}
	}
}

// TestGlossaryNotAcrossLines: a word that, followed by another, is another
// word ("block of the" result is no block of threads) is that other word
// when a line break of the Markdown falls between the two.
func TestGlossaryNotAcrossLines(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	c, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + "One 16×8 block\nof the result, then four warps of a block of threads.\n")}})
	if err != nil {
		t.Fatal(err)
	}
	html := c.Lessons[0].Parts[0].HTML
	if !strings.Contains(html, "16×8 block\nof the") || !strings.Contains(html, `>block</a> of threads`) {
		t.Errorf("the glossary linked the block of a matrix, or not the block of threads: %s", html)
	}
}
