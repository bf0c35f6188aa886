package lessons_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
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
	"flashstep/ladder"
	"flashstep/launch"
	"flashstep/lessons"
	"flashstep/recordings"
	"flashstep/runner"
	"flashstep/traffic"
)

func course(t *testing.T) *lessons.Course {
	t.Helper()
	c, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// engines is the path a server without a GPU takes: the recording of the
// run, else the CPU mirror.
func engines(t *testing.T) *runner.Router {
	t.Helper()
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	return &runner.Router{Recordings: recs, Mirror: runner.Mirror{}}
}

func traceOf(t *testing.T, r runner.Runner, c kernels.Config) *lessons.Trace {
	t.Helper()
	var buf bytes.Buffer
	if err := r.Run(context.Background(), kernelstest.MustRun(t, c), func(b []byte) error { buf.Write(b); return nil }); err != nil {
		t.Fatalf("run %s: %v", c.Key(), err)
	}
	h, recs, err := instrument.ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return lessons.NewTrace(h, recs)
}

func TestCourseLoads(t *testing.T) {
	t.Parallel()
	c := course(t)
	if len(c.Lessons) == 0 {
		t.Fatal("no lessons")
	}
	for n, l := range c.Lessons {
		if n > 0 && l.Order <= c.Lessons[n-1].Order {
			t.Errorf("lessons out of order: %s after %s", l.Slug, c.Lessons[n-1].Slug)
		}
		if len(l.Checkpoints) < 2 {
			t.Errorf("%s: %d checkpoints, want at least two", l.Slug, len(l.Checkpoints))
		}
		for _, sec := range l.Sections {
			if strings.ContainsAny(sec.Title, "&<>") || sec.ID == "" {
				t.Errorf("%s: section %+v: a contents entry must be plain text with an anchor", l.Slug, sec)
			}
		}
		if len(l.Sections) == 0 || len(l.TryNext) == 0 {
			t.Errorf("%s: no sections or no try-this-next links", l.Slug)
		}
		var html strings.Builder
		for _, p := range l.Parts {
			html.WriteString(p.HTML)
		}
		for _, leak := range []string{"FSMATH", "FSBLOCK", ":::"} {
			if strings.Contains(html.String(), leak) {
				t.Errorf("%s: rendered page holds %q: a directive or formula was not recognised", l.Slug, leak)
			}
		}
		// "lesson N, …" in the prerequisites names an earlier lesson, by
		// its number as the course numbers it now.
		for _, pre := range l.Prerequisites {
			var n int
			if _, err := fmt.Sscanf(pre, "lesson %d,", &n); err != nil {
				continue
			}
			if n < 1 || n > len(c.Lessons) || n >= l.Order {
				t.Errorf("%s: prerequisite %q is not an earlier lesson", l.Slug, pre)
				continue
			}
			norm := func(s string) string {
				s = strings.ToLower(strings.TrimSpace(s))
				return strings.TrimPrefix(strings.TrimPrefix(s, "the "), "a ")
			}
			if norm(strings.SplitN(pre, ",", 2)[1]) != norm(c.Lessons[n-1].Title) {
				t.Errorf("%s: prerequisite %q, but lesson %d is %q", l.Slug, pre, n, c.Lessons[n-1].Title)
			}
		}
		if l.Order != n+1 {
			t.Errorf("%s: order %d, but it is lesson %d of the course: number the lessons 1, 2, 3, …", l.Slug, l.Order, n+1)
		}
		// Links to other lessons must name a lesson.
		for _, part := range strings.Split(html.String(), `href="/lessons/`)[1:] {
			slug, _, _ := strings.Cut(part, `"`)
			slug, _, _ = strings.Cut(slug, "#")
			if _, ok := c.Lesson(slug); !ok {
				t.Errorf("%s links to an unknown lesson %q", l.Slug, slug)
			}
		}
	}
}

// Every run a lesson, the home page or a try-this-next link names is valid,
// fits the trace limit (ParseConfig checks it), and, when the GPU's compiled
// kernels run it, is recorded so a class without a GPU sees a GPU's numbers.
func TestPresetsAreValidAndRecorded(t *testing.T) {
	t.Parallel()
	r := engines(t)
	for _, name := range lessons.RunNames() {
		p := lessons.Runs[name]
		c, err := p.Config()
		if err != nil {
			t.Errorf("preset %s: %v", name, err)
			continue
		}
		if c.TraceBytes() > kernels.MaxTraceBytes {
			t.Errorf("preset %s: trace of %d bytes is over the limit", name, c.TraceBytes())
		}
		if launch.ValidateTraced(&c) == nil && !awaitingRecording(r.Recordings, &c) {
			if _, ok := r.Recordings.Find(&c); !ok {
				t.Errorf("preset %s runs on the GPU but has no recording: add it to recordings/list.txt and record it", name)
			}
		}
	}
	for _, l := range course(t).Lessons {
		for _, w := range l.Widgets {
			if w.Framed() && (w.Step < 1 || w.Step > lessons.StepCount(&w.Run)) {
				t.Errorf("%s/%s: step %d past the run's end", l.Slug, w.ID, w.Step)
			}
		}
	}
}

// awaitingRecording says whether c is a backward run while no backward run
// has been recorded: the backward kernel's GPU checks wait for a device
// session (docs/LADDER.md), and until they pass and its runs are recorded
// its presets come from the CPU mirror everywhere. Once one backward run is
// recorded, every backward preset must be.
func awaitingRecording(recs *runner.Recordings, c *kernels.Config) bool {
	if info := kernels.Info(c.Variant); info == nil || !info.Backward {
		return false
	}
	for _, r := range recs.All() {
		if info := kernels.Info(r.Config.Variant); info != nil && info.Backward {
			return false
		}
	}
	return true
}

// A directive that names an unknown widget, preset, panel or ask, or a run
// the trace limit refuses, fails to load: it never reaches a student. Not
// parallel: it adds a preset to lessons.Runs for a moment, and the parallel
// tests, which read it, wait until it is done.
func TestBadDirectivesFail(t *testing.T) {
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	good := "::: stepper id=w preset=toy step=2 panels=grid,s\ncaption\n:::\n\n::: checkpoint id=c preset=toy ask=m row=1 kv=0\nq?\n:::\n" +
		"::: playground id=p logits=3,1,-2,8 tile=2 max=on dtype=f32\n:::\n\n::: loop id=l preset=toy row=3 slip=stale-max,no-divide\n:::\n" +
		"::: checkpoint id=o ask=overflow logits=2,12 max=off dtype=f16 widget=p\nq?\n:::\n"
	if _, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + good)}}); err != nil {
		t.Fatalf("a good lesson does not load: %v", err)
	}
	steps := lessons.StepCount(ptr(mustConfig(t, lessons.Runs["toy"].Query)))
	for body, want := range map[string]string{
		"::: sliders id=w preset=toy\n:::\n":                                                            `unknown widget "sliders"`,
		"::: stepper id=w preset=nope\n:::\n":                                                           `unknown preset "nope"`,
		"::: stepper id=w preset=toy panels=grid,heat\n:::\n":                                           `unknown panel "heat"`,
		"::: stepper id=w preset=toy step=" + strconv.Itoa(steps+1) + "\n:::\n":                         "step must be a whole number from 1 to " + strconv.Itoa(steps),
		"::: stepper id=w preset=toy step=0\n:::\n":                                                     "step must be a whole number from 1 to",
		"::: stepper id=w preset=toy colour=red\n:::\n":                                                 `unknown attribute "colour"`,
		"::: stepper id=w preset=toy\n":                                                                 "not closed",
		"::: checkpoint id=c preset=toy ask=vibes\nq\n:::\n":                                            `unknown ask "vibes"`,
		"::: checkpoint id=c preset=toy ask=m row=8 kv=0\nq\n:::\n":                                     "row must be a whole number from 0 to 7",
		"::: checkpoint id=c preset=toy ask=m row=1\nq\n:::\n":                                          "needs kv=",
		"::: checkpoint id=c preset=toy ask=sm q=1\nq\n:::\n":                                           "needs a timing run",
		"::: checkpoint id=c preset=toy ask=m row=1 kv=0 widget=x\nq\n:::\n":                            `widget "x" is not on this page`,
		"::: checkpoint id=c preset=toy ask=m row=1 kv=0\n:::\n":                                        "the question goes between",
		"::: timeline id=w preset=toy\n:::\n":                                                           "needs a run with mode=timing",
		"::: playground id=p\n:::\n":                                                                    "needs logits=",
		"::: playground id=p logits=1,x\n:::\n":                                                         "logit 1 must be a number",
		"::: playground id=p logits=1,2 tile=3\n:::\n":                                                  "tile: a whole number from 1 to 2",
		"::: playground id=p logits=1,2 dtype=f8\n:::\n":                                                "dtype: f32, f16 or bf16",
		"::: playground id=p logits=1,2 max=yes\n:::\n":                                                 "max: on or off",
		"::: playground id=p logits=1,2 colour=red\n:::\n":                                              `unknown attribute "colour"`,
		"::: loop id=w preset=toy slip=typo\n:::\n":                                                     `unknown slip "typo"`,
		"::: loop id=w preset=naive-toy\n:::\n":                                                         "variant must be flash2",
		"::: loop id=w preset=toy row=8\n:::\n":                                                         "row must be a whole number from 0 to 7",
		"::: checkpoint id=c ask=overflow dtype=f16\nq\n:::\n":                                          "needs logits=",
		"::: checkpoint id=c ask=overflow logits=1,2 preset=toy\nq\n:::\n":                              "not on a preset",
		"::: checkpoint id=c ask=overflow logits=1,2 dtype=f64\nq\n:::\n":                               "dtype: f32, f16 or bf16",
		"::: checkpoint id=c preset=toy ask=loop-parts row=1\nq\n:::\n":                                 "slip= must name one or more",
		"::: checkpoint id=c preset=toy ask=loop-parts row=1 slip=bogus\nq\n:::\n":                      "slip= must name one or more",
		"::: checkpoint id=c preset=toy ask=loop-l row=1 slip=stale-max\nq\n:::\n":                      "needs kv=",
		"::: checkpoint id=c preset=naive-toy ask=loop-l row=1 kv=0 slip=no-divide\nq\n:::\n":           "reads FlashAttention steps",
		"::: checkpoint id=c preset=naive-toy ask=p row=1 key=2\nq\n:::\n":                              "reads FlashAttention steps",
		"::: checkpoint id=c preset=toy ask=p row=1\nq\n:::\n":                                          "needs key=",
		"::: stepper id=w preset=toy digits=2\n:::\n":                                                   "digits must be a whole number from 3 to 7",
		"::: compare id=w preset=ragged-causal digits=5\n:::\n":                                         `unknown attribute "digits"`,
		"::: checkpoint id=c preset=toy ask=m row=1 kv=0 rel=0.05\nq\n:::\n":                            `unknown attribute "rel"`,
		"::: checkpoint id=c preset=toy ask=alpha row=1 kv=1 rel=2\nq\n:::\n":                           "rel must be a number between 0 and 1",
		"::: checkpoint id=c preset=fast-real-tiles ask=loop-l row=1 kv=0 slip=no-divide\nq\n:::\n":     "runs the float32 loop of flash2",
		"::: checkpoint id=c ask=ladder-speedup rung=flash2_fast against=naive_mma\nq\n:::\n":           "d= must be a head dim of the ladder's shapes (64, 128)",
		"::: checkpoint id=c ask=ladder-speedup rung=flash9 against=naive_mma d=64\nq\n:::\n":           `rung= must name a row of the ladder`,
		"::: checkpoint id=c ask=ladder-speedup rung=naive against=naive d=64\nq\n:::\n":                "name the same row",
		"::: checkpoint id=c ask=ladder-speedup rung=naive against=flash2 d=64 causal=2\nq\n:::\n":      "causal= must be 0 or 1",
		"::: checkpoint id=c ask=ladder-speedup rung=naive against=flash2 d=64 floor=compute\nq\n:::\n": `unknown attribute "floor"`,
		"::: checkpoint id=c ask=ladder-floor rung=flash2 floor=compute d=64\nq\n:::\n":                 "float32 on the CUDA cores",
		"::: checkpoint id=c ask=ladder-floor rung=flash2_fast floor=dram d=64\nq\n:::\n":               "floor= must be compute or memory",
		"::: checkpoint id=c ask=ladder-floor rung=flash2_fast floor=compute d=64 preset=toy\nq\n:::\n": "not a preset's run",
		"::: checkpoint id=c ask=tried-worth\nq\n:::\n":                                                 "needs run=",
		"::: checkpoint id=c ask=tried-worth run=zz\nq\n:::\n":                                          "run= must name a run of the ideas tried and left out (w, x, y, al, am, an, aq, ar, ay)",
		"::: checkpoint id=c ask=tried-worth run=an\nq\n:::\n":                                          "run an tried 2 ideas: idea= says which",
		"::: checkpoint id=c ask=tried-worth run=an idea=3\nq\n:::\n":                                   "idea must be a whole number from 1 to 2",
		"::: checkpoint id=c ask=tried-worth run=am preset=toy\nq\n:::\n":                               "not a preset's run",
		"::: checkpoint id=c ask=tried-worth run=am d=64\nq\n:::\n":                                     `unknown attribute "d"`,
		"::: checkpoint id=c ask=tx-bytes rows=128\nq\n:::\n":                                           "needs d=",
		"::: checkpoint id=c ask=tx-bytes rows=300 d=64\nq\n:::\n":                                      "rows must be a whole number from 1 to 256",
		"::: checkpoint id=c ask=tx-bytes rows=128 d=96\nq\n:::\n":                                      "d must be a multiple of 64",
		"::: checkpoint id=c ask=stage-bytes rows=64\nq\n:::\n":                                         "needs d=",
		"::: checkpoint id=c ask=stage-bytes rows=64 d=100\nq\n:::\n":                                   "d must be a multiple of 64",
		"::: checkpoint id=c ask=stage-bytes rows=64 d=64 preset=toy\nq\n:::\n":                         "not on a preset's run",
		"::: checkpoint id=c ask=tma-copies d=128 preset=toy\nq\n:::\n":                                 "not on a preset's run",
		"::: checkpoint id=c ask=tma-copies d=128 rows=64\nq\n:::\n":                                    `unknown attribute "rows"`,
		"::: checkpoint id=c ask=parity kv=6\nq\n:::\n":                                                 "needs stages=",
		"::: checkpoint id=c ask=parity kv=6 stages=1\nq\n:::\n":                                        "stages must be a whole number from 2 to 4",
		"::: checkpoint id=c ask=setmaxnreg producer=20 consumers=2\nq\n:::\n":                          "producer must be a whole number from 24 to 256",
		"::: checkpoint id=c ask=setmaxnreg producer=28 consumers=2\nq\n:::\n":                          "producer must be a multiple of 8",
		"::: checkpoint id=c ask=setmaxnreg producer=24 consumers=1\nq\n:::\n":                          "consumers must be a whole number from 2 to 3",
		"::: memory id=m pass=sideways\n:::\n":                                                          "memory m: pass must be forward or backward, got \"sideways\"",
		"::: memory id=m pass=Backward\n:::\n":                                                          "pass must be forward or backward",
		"::: memory id=m pass=\n:::\n":                                                                  "pass must be forward or backward",
		"::: memory id=m b=8 h=32 n=8192 d=64 passes=backward\n:::\n":                                   `unknown attribute "passes"`,
		"::: checkpoint id=c preset=toy ask=hidden q=0 kv=0 consumer=0\nq\n:::\n":                       "needs a roles run",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 kv=0 consumer=2\nq\n:::\n":                  "consumer must be a whole number from 0 to 1",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 kv=0\nq\n:::\n":                             "needs consumer=",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 consumer=0\nq\n:::\n":                       "needs kv=",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 kv=8 consumer=0\nq\n:::\n":                  "kv must be a whole number from 0 to 7",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 kv=0 consumer=0 bh=16\nq\n:::\n":            "bh must be a whole number from 0 to 15",
		"::: checkpoint id=c preset=ws-roles ask=hidden q=0 kv=0 consumer=0 tol=0.5\nq\n:::\n":          `unknown attribute "tol"`,
		"::: timeline id=w preset=ws-roles step=1153\n:::\n":                                            "step must be a whole number from 1 to 1152",
		"Cost is $5 today.\n":   "unclosed $",
		"## Heading with $x$\n": "holds math",
	} {
		_, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + body)}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", body, err, want)
		}
	}
	// A kv-tile the causal mask skips has no softmax to ask about.
	lessons.Runs["roles-causal"] = lessons.Preset{Title: "causal roles", Query: "variant=flash3_ws&n=1024&d=64&br=128&bc=128&batch=1&heads=16&causal=1&pattern=normal&seed=1&mode=roles"}
	defer delete(lessons.Runs, "roles-causal")
	for body, want := range map[string]string{
		"::: checkpoint id=c preset=roles-causal ask=hidden q=0 kv=1 consumer=0\nq\n:::\n": "never visits kv-tile 1",
		"::: checkpoint id=c preset=roles-causal ask=hidden q=1 kv=1 consumer=0\nq\n:::\n": "",
	} {
		_, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + body)}})
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: error %v, want it to say %q", body, err, want)
		}
	}
	// A run over the trace limit cannot become a preset.
	lessons.Runs["too-big"] = lessons.Preset{Title: "big", Query: "variant=flash2&n=4096&d=128&br=16&bc=16"}
	defer delete(lessons.Runs, "too-big")
	_, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + "::: stepper id=w preset=too-big\n:::\n")}})
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an oversized run loads: %v", err)
	}
}

// TestMemoryDirective: "::: memory" reads the calculator's problem and its
// pass (forward unless pass=backward), and asks /api/memory for that pass;
// lesson 13's calculator plans the backward, lesson 3's the forward.
func TestMemoryDirective(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	body := "::: memory id=f b=2 h=4 n=1024 d=128\ncaption\n:::\n\n::: memory id=fw b=2 h=4 n=1024 d=128 pass=forward\n:::\n\n" +
		"::: memory id=bw b=8 h=32 n=8192 d=64 pass=backward\nthe backward\n:::\n"
	c, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + body)}})
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Lessons[0].Widgets
	if len(ws) != 3 {
		t.Fatalf("%d widgets", len(ws))
	}
	for _, tc := range []struct {
		pass  traffic.Pass
		query string
	}{
		{traffic.PassForward, "b=2&d=128&h=4&n=1024"},
		{traffic.PassForward, "b=2&d=128&h=4&n=1024"},
		{traffic.PassBackward, "b=8&d=64&h=32&n=8192&pass=backward"},
	} {
		w := ws[0]
		ws = ws[1:]
		if w.Kind != lessons.WidgetMemory || w.Pass != tc.pass || w.MemoryQuery() != tc.query {
			t.Errorf("%s: %s, pass %q, query %q; want pass %q, query %q", w.ID, w.Kind, w.Pass, w.MemoryQuery(), tc.pass, tc.query)
		}
	}
	for slug, want := range map[string]traffic.Pass{"naive": traffic.PassForward, "backward": traffic.PassBackward} {
		l, ok := course(t).Lesson(slug)
		if !ok {
			t.Fatalf("no lesson %q", slug)
		}
		found := false
		for _, w := range l.Widgets {
			if w.Kind == lessons.WidgetMemory {
				found = true
				if w.Pass != want {
					t.Errorf("lesson %s's calculator %s plans the %s pass, want the %s", slug, w.ID, w.Pass, want)
				}
			}
		}
		if !found {
			t.Errorf("lesson %s has no memory calculator", slug)
		}
	}
}

func mustConfig(t *testing.T, q string) kernels.Config {
	t.Helper()
	c, err := lessons.Preset{Query: q}.Config()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// wrongAnswer makes a plausible answer that is not the solution.
func wrongAnswer(rng *rand.Rand, c *lessons.Checkpoint, s grading.Solution) string {
	switch c.Format {
	case grading.FormatChoice:
		for _, o := range c.Choices {
			if o.Value != s.Choice {
				return o.Value
			}
		}
	case grading.FormatTiles:
		// Toggle one tile.
		flip := c.Choices[rng.IntN(len(c.Choices))].Value
		var out []string
		found := false
		for _, t := range s.Tiles {
			if t == flip {
				found = true
			} else {
				out = append(out, t)
			}
		}
		if !found {
			out = append(out, flip)
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, ";")
	}
	delta := max(4*c.Allowed(s.Number), 0.05*max(1, math.Abs(s.Number)))
	if c.Unit() == "a whole number, exactly" {
		delta = 1
	}
	for _, x := range []float64{s.Number + delta, s.Number - delta} {
		if x >= s.Lo && x <= s.Hi {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
	}
	return "none-plausible"
}

func rightAnswer(c *lessons.Checkpoint, s grading.Solution) string {
	switch c.Format {
	case grading.FormatChoice:
		return s.Choice
	case grading.FormatTiles:
		if len(s.Tiles) == 0 {
			return "none"
		}
		return strings.Join(s.Tiles, "; ")
	}
	// A little off, within the tolerance, as a student would round,
	// staying within the plausible range.
	off := c.Allowed(s.Number) / 3
	if s.Number+off > s.Hi {
		off = -off
	}
	return strconv.FormatFloat(s.Number+off, 'f', -1, 64)
}

// For every checkpoint: its answer comes from its run's trace, the right
// answer is graded right, a wrong one wrong, nonsense gets a hint.
func TestCheckpointsGradeAgainstTrace(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	r := engines(t)
	for _, l := range course(t).Lessons {
		for _, c := range l.Checkpoints {
			name := l.Slug + "/" + c.ID
			var tr *lessons.Trace
			if c.NeedsTrace() {
				tr = traceOf(t, r, c.Run)
			}
			s, err := c.Solve(tr)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			t.Logf("%s: %s. %s", name, s.Display, s.Explain)
			if math.IsNaN(s.Number) || s.Explain == "" || s.Display == "" {
				t.Errorf("%s: solution %+v", name, s)
			}
			if v := c.Grade(rightAnswer(c, s), false, s); !v.Correct || v.Status != "correct" || v.Explanation == "" {
				t.Errorf("%s: the right answer %q graded %+v", name, rightAnswer(c, s), v)
			}
			wrong := wrongAnswer(rng, c, s)
			if v := c.Grade(wrong, false, s); v.Correct || v.Status != "wrong" || v.Hint == "" || v.Explanation != "" || v.Answer != "" {
				t.Errorf("%s: the wrong answer %q graded %+v", name, wrong, v)
			}
			for _, junk := range []string{"", "   ", "banana", "NaN", "inf", "1e999", "12,5,3"} {
				if v := c.Grade(junk, false, s); v.Status != "invalid" || v.Hint == "" || v.Correct {
					t.Errorf("%s: %q graded %+v, want a hint", name, junk, v)
				}
			}
			if c.Format == grading.FormatNumber && !math.IsInf(s.Hi, 1) {
				if v := c.Grade(strconv.FormatFloat(s.Hi*10+1e6, 'f', -1, 64), false, s); v.Status != "invalid" || !strings.Contains(v.Hint, "cannot be right") {
					t.Errorf("%s: an absurd answer graded %+v", name, v)
				}
			}
			if v := c.Grade("", true, s); v.Status != "revealed" || v.Answer != s.Display || v.Explanation == "" {
				t.Errorf("%s: reveal %+v", name, v)
			}
		}
	}
}

// The answers are read from the trace: another trace gives another answer.
// Value asks change with the seed; the tiles a run skips change with the
// mask; the SM of a block changes when the recorded SMs do.
func TestCheckpointAnswersFollowTheTrace(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	r := engines(t)
	for _, l := range course(t).Lessons {
		for _, c := range l.Checkpoints {
			name := l.Slug + "/" + c.ID
			if !c.NeedsTrace() {
				computedAnswerMoves(t, rng, name, c)
				continue
			}
			base := traceOf(t, r, c.Run)
			want, err := c.Solve(base)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			var other *lessons.Trace
			switch c.Ask {
			case lessons.AskSkipped, lessons.AskCount, lessons.AskFirstLoad:
				cfg := c.Run
				cfg.Causal = !cfg.Causal
				cfg.Engine = instrument.SourceCPUMirror
				// The same checkpoint on the other mask.
				cc := *c
				cc.Run = cfg
				got, err := cc.Solve(traceOf(t, runner.Mirror{}, cfg))
				if err != nil {
					t.Errorf("%s: %v", name, err)
				} else if got.Display == want.Display {
					t.Errorf("%s: the same answer %s with causal=%v", name, got.Display, cfg.Causal)
				}
				continue
			case lessons.AskHidden:
				// The other consumer's products a little later: what of
				// them lies under the softmax changes.
				other = &lessons.Trace{H: base.H, Steps: base.Steps}
				for _, r := range base.Roles {
					cp := *r
					if cp.Role == instrument.RoleConsumer0+instrument.Role(1-c.Consumer) && (cp.Event == instrument.EventProductS || cp.Event == instrument.EventProductPV) {
						cp.TStart, cp.TEnd = cp.TStart+50, cp.TEnd+50
					}
					other.Roles = append(other.Roles, &cp)
				}
			case lessons.AskSM:
				other = &lessons.Trace{H: base.H}
				for _, st := range base.Steps {
					cp := *st
					cp.SM = (st.SM + 1 + rng.IntN(base.H.NumSMs-1)) % base.H.NumSMs
					other.Steps = append(other.Steps, &cp)
				}
			case lessons.AskWritten:
				cfg := c.Run
				cfg.N++
				cfg.Engine = instrument.SourceCPUMirror
				cc := *c
				cc.Run = cfg
				got, err := cc.Solve(traceOf(t, runner.Mirror{}, cfg))
				if err != nil || got.Number == want.Number {
					t.Errorf("%s: N+1 written %v (%v), as at N", name, got.Number, err)
				}
				continue
			default:
				// Fresh seeds until the answer moves (a choice may agree by chance).
				cfg := c.Run
				cfg.Engine = instrument.SourceCPUMirror
				moved := false
				for try := 0; try < 8 && !moved; try++ {
					cfg.Seed = rng.Uint64N(1 << 40)
					got, err := c.Solve(traceOf(t, runner.Mirror{}, cfg))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					moved = got.Display != want.Display
				}
				if !moved {
					t.Errorf("%s: the answer %s does not change with the seed", name, want.Display)
				}
				continue
			}
			got, err := c.Solve(other)
			if err != nil || got.Display == want.Display {
				t.Errorf("%s: a changed trace gives %s (%v), as before", name, got.Display, err)
			}
		}
	}
}

// computedAnswerMoves changes the input of a checkpoint answered without a
// trace and sees its answer change: the playground's row shuffled, the
// loop's run on other seeds, patterns and kv-tile widths, the Hopper asks'
// sizes drawn afresh.
func computedAnswerMoves(t *testing.T, rng *rand.Rand, name string, c *lessons.Checkpoint) {
	t.Helper()
	want, err := c.Solve(nil)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if c.Ask == lessons.AskLadderSpeedup || c.Ask == lessons.AskLadderFloor {
		ladderAnswerMoves(t, rng, name, c, want)
		return
	}
	if c.Ask == lessons.AskBackwardSpeedup {
		backwardAnswerMoves(t, rng, name, c, want)
		return
	}
	patterns := []instrument.Pattern{instrument.PatternNormal, instrument.PatternLarge, instrument.PatternPeaked}
	for try := 0; try < 60; try++ {
		cc := *c
		switch c.Ask {
		case lessons.AskTxBytes, lessons.AskStageBytes, lessons.AskTMACopies, lessons.AskParity, lessons.AskSetmaxnreg:
			cc.Hopper, cc.KV = randomHopper(rng), rng.IntN(64)
		case lessons.AskKVCache, lessons.AskDecodeIntensity, lessons.AskDecodeSplits:
			cc.Decode = randomDecode(rng)
		case lessons.AskTriedWorth: // another idea of the ladder's table
			cc.Tried = rng.IntN(len(ladder.BackwardTried))
		case lessons.AskOverflow:
			cc.Playground.Logits = append([]float64(nil), c.Playground.Logits...)
			rng.Shuffle(len(cc.Playground.Logits), func(i, j int) {
				cc.Playground.Logits[i], cc.Playground.Logits[j] = cc.Playground.Logits[j], cc.Playground.Logits[i]
			})
		default:
			cc.Run.Seed = rng.Uint64N(1 << 40)
			cc.Run.Pattern = patterns[rng.IntN(len(patterns))]
			if try%2 == 1 {
				cc.Run.Bc = 1 + rng.IntN(cc.Run.N)
			}
			if c.Ask == lessons.AskLoopL && cc.KV >= cc.Run.Tc() {
				continue
			}
		}
		got, err := cc.Solve(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Display != want.Display {
			return
		}
	}
	t.Errorf("%s: the answer %s does not change with the input", name, want.Display)
}

// TestClosingCheckCountIsSaid: the README and the closing check's own
// summary say how many questions the check asks, in words; both must be
// the number of checkpoints it has.
func TestClosingCheckCountIsSaid(t *testing.T) {
	t.Parallel()
	c := course(t)
	check, ok := c.Lesson("check")
	if !ok {
		t.Fatal("the course has no closing check (slug check)")
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
		"thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	number := func(w string) int { return slices.Index(words, strings.ToLower(w)) }
	n := len(check.Checkpoints)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`check\s+of\s+(\w+)\s+questions`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md no longer says "a check of N questions": say how many, or change this test`)
	}
	if got := number(string(m[1])); got != n {
		t.Errorf("README.md says the closing check has %s questions; it has %d", m[1], n)
	}
	s := regexp.MustCompile(`^(\w+) questions`).FindStringSubmatch(check.Summary)
	if s == nil {
		t.Fatalf("the check's summary %q does not start with how many questions", check.Summary)
	}
	if got := number(s[1]); got != n {
		t.Errorf("the check's summary says %s questions; it has %d", s[1], n)
	}
}
