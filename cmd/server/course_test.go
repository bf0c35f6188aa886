package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/lessons"

	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
)

// emptyPanel are what a stepper panel says when its step has nothing for
// it: a widget opening on one does not show what its caption names.
var emptyPanel = []string{"No S tile in this step", "No P tile in this step", "No input tiles in this step",
	"No q-tile has finished yet", "O is not touched in this step"}

// TestBrowserCourseAsAStudentSeesIt opens every lesson as a new student
// does, in one Chromium: every embedded stepper opens with each panel it
// shows filled, and no checkpoint's answer is in the lesson's visible text
// (its own or its widgets') before it is answered; on the debugging lesson
// it then uses the loop widget (checkLoopWidget); no page logs a problem.
func TestBrowserCourseAsAStudentSeesIt(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t, "-worker", "none")
	ctx := browserSized(t, 1366, 900)
	problems := watchConsole(ctx)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lessonSample(t, course) {
		// Each lesson as a new student opens it: nothing kept from the last
		// (cleared before the page loads, so it loads once).
		if _, err := chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: base, StorageTypes: "local_storage"}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/"+l.Slug)); err != nil {
			t.Fatal(err)
		}
		// Bring every widget into view, so that lazy frames load, and wait
		// until each embedded page has drawn its opening step.
		framed := 0
		for _, w := range l.Widgets {
			if w.Framed() {
				framed++
			}
		}
		var ready bool
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(100 * time.Millisecond) {
			ready, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
				for (const f of document.querySelectorAll('figure.widget iframe')) { f.loading = 'eager'; }
				const done = [...document.querySelectorAll('figure.widget iframe')].filter((f) => {
					const doc = f.contentDocument;
					const st = doc?.getElementById('run-status')?.textContent || '';
					const panes = [...(doc?.querySelectorAll('.pane [data-role=status]') || [])];
					return st.includes('Trace complete') || (panes.length === 2 && panes.every((p) => p.textContent.includes('numbers from')));
				});
				return done.length === %d;
			})()`, framed)))
		}
		if !ready {
			t.Errorf("%s: its %d embedded pages did not all finish loading", l.Slug, framed)
			continue
		}
		// KaTeX has typeset every formula of the text: a slice at a time,
		// between the page's other work (lesson.js, typeset), so on a busy
		// machine the last ones may come after the frames.
		typeset := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !typeset; time.Sleep(100 * time.Millisecond) {
			typeset, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('.lesson .math')].every((m) => m.querySelector('.katex'))`))
		}
		if !typeset {
			t.Errorf("%s: a formula is not typeset 20 s after its widgets loaded", l.Slug)
		}
		for _, w := range l.Widgets {
			if w.Kind != lessons.WidgetStepper {
				continue
			}
			said, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
				const doc = document.querySelector('#%s iframe').contentDocument;
				return [...doc.querySelectorAll('[data-panel]')].filter((p) => !p.hidden).map((p) => p.innerText).join('\n');
			})()`, w.ID)))
			if err != nil {
				t.Fatal(err)
			}
			for _, empty := range emptyPanel {
				if strings.Contains(said, empty) {
					t.Errorf("%s/%s opens at step %d with a panel that says %q", l.Slug, w.ID, w.Step, empty)
				}
			}
		}
		visible, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText + '\n' +
			[...document.querySelectorAll('iframe')].map((f) => f.contentDocument?.body?.innerText || '').join('\n')`))
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range l.Checkpoints {
			answer := revealedAnswer(t, base, l.Slug, cp.ID)
			if leaks(visible, answer) {
				t.Errorf("%s: checkpoint %s's answer %q is on the page before it is answered", l.Slug, cp.ID, answer)
			}
		}
		if l.Slug == "debugging" {
			checkLoopWidget(ctx, t) // the page is open: its loop widget, used
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the lessons logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// revealedAnswer is a checkpoint's answer as "Show me" gives it.
func revealedAnswer(t *testing.T, base, lesson, id string) string {
	t.Helper()
	res, err := http.Post(base+"/api/checkpoints/"+lesson+"/"+id, "application/json", strings.NewReader(`{"reveal":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v struct{ Answer string }
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || v.Answer == "" {
		t.Fatalf("reveal %s/%s: %v", lesson, id, err)
	}
	return v.Answer
}

// leaks says whether an answer can be read in a page's text. Numbers with
// a fractional part or an exponent are looked for as they are written; a
// bare whole number or an option ("key 3") is everywhere on a page of
// numbered rows and tiles, and is not.
func leaks(text, answer string) bool {
	a := strings.TrimSuffix(strings.TrimSuffix(answer, " bytes"), "%")
	if _, err := strconv.ParseFloat(a, 64); err != nil || !strings.ContainsAny(a, ".e") || len(a) < 4 {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], a)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(a)
		// The answer's digits, not part of a longer number.
		before := i > 0 && strings.ContainsRune("0123456789.", rune(text[i-1]))
		after := end < len(text) && strings.ContainsRune("0123456789", rune(text[end]))
		if !before && !after {
			return true
		}
		from = i + 1
	}
}

// lessonSample is the lessons a course-wide browser check visits: every
// one in a full run (make test-long), and under -short (make test) four
// that between them hold every kind of widget the course has (stepper,
// side by side, memory calculator, playground, timeline, loop) and the
// taught-gating of an early lesson. What is checked on each page is the
// same either way.
func lessonSample(t *testing.T, c *lessons.Course) []*lessons.Lesson {
	t.Helper()
	if !testing.Short() {
		return c.Lessons
	}
	var out []*lessons.Lesson
	kinds := map[string]bool{}
	for _, slug := range []string{"naive", "stability", "gpu", "debugging"} {
		l, ok := c.Lesson(slug)
		if !ok {
			t.Fatalf("the short sample names lesson %q, which the course no longer has", slug)
		}
		for _, w := range l.Widgets {
			kinds[w.Kind] = true
		}
		out = append(out, l)
	}
	for _, l := range c.Lessons {
		for _, w := range l.Widgets {
			if !kinds[w.Kind] && w.Kind != lessons.WidgetKernels {
				t.Fatalf("the short sample has no %s widget (lesson %s has one): add a lesson to it", w.Kind, l.Slug)
			}
		}
	}
	return out
}

// longOnly skips a browser test under -short: make test runs the browser
// tests that find the most bugs per second (every page type once, the
// course's sample, the classroom, the fallbacks), make test-long and CI
// every one.
func longOnly(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long browser check: make test-long runs it")
	}
}
