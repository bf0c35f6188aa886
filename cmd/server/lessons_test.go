package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/lessons"
	"flashstep/lessons/loop"
	"flashstep/lessons/playground"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// revealed asks the server for a checkpoint's answer, as "Show me" does.
func revealed(t *testing.T, base, lesson, id string) string {
	t.Helper()
	res, err := http.Post(base+"/api/checkpoints/"+lesson+"/"+id, "application/json", strings.NewReader(`{"reveal":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v struct{ Answer string }
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || v.Answer == "" {
		t.Fatalf("reveal %s/%s: %v %+v", lesson, id, err, v)
	}
	return v.Answer
}

// TestBrowserLesson answers a checkpoint wrongly, with nonsense, then
// rightly; sees the grading and the explanation; reloads and finds the
// progress kept, on the page and on the course map; follows a deep link to
// a widget at a step and the keyboard to the next lesson; then resets.
func TestBrowserLesson(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	const slug, id = "online-softmax", "loop-m"
	right, err := strconv.ParseFloat(revealed(t, base, slug, id), 64)
	if err != nil {
		t.Fatal(err)
	}
	cp := `#` + id
	answer := func(s string) {
		t.Helper()
		if err := chromedp.Do(ctx, submitAnswer(cp, s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/"+slug)); err != nil {
		t.Fatal(err)
	}
	answer(strconv.FormatFloat(right+0.5, 'f', 3, 64))
	waitText(ctx, t, cp+" .verdict", "Not quite. m_new is the larger of m_old and this tile's largest score")
	if hidden, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('`+cp+` .explanation').hidden`)); !hidden {
		t.Error("a wrong answer shows the explanation")
	}
	answer("banana")
	waitText(ctx, t, cp+" .verdict", "is not a number")
	answer(strconv.FormatFloat(right, 'f', 3, 64))
	waitText(ctx, t, cp+" .verdict", "Correct")
	waitText(ctx, t, cp+" .explanation", "m_new = max(")
	waitText(ctx, t, cp+" .explanation", "Show step 2 in the widget")
	// The embedded stepper reports its step to the lesson, and the lesson
	// moves it: both directions of the postMessage contract.
	course, _ := lessons.Default()
	l, _ := course.Lesson(slug)
	var total string
	for _, w := range l.Widgets {
		if w.ID == "loop-run" {
			total = strconv.Itoa(lessons.StepCount(&w.Run))
		}
	}
	waitText(ctx, t, "#loop-run .widget-step", "step 1 of "+total)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(cp+" .explanation button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#loop-run .widget-step", "step 2 of "+total)

	// The progress survives a reload, and the course map shows it.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, cp+" .verdict", "Correct")
	waitText(ctx, t, cp+" .explanation", "m_new = max(")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, `[data-slug="`+slug+`"] .course-status`, "started")
	waitText(ctx, t, `[data-slug="attention"] .course-status`, "next")

	// A deep link opens a widget at a step.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/"+slug+"#loop-run:step=3")); err != nil {
		t.Fatal(err)
	}
	var src string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		src, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#loop-run iframe').getAttribute('src')`))
		if strings.Contains(src, "step=3") {
			break
		}
	}
	if u, err := url.Parse(src); err != nil || u.Query().Get("step") != "3" || u.Query().Get("embed") != "1" {
		t.Errorf("the deep link's widget shows %q", src)
	}
	// → goes to the next lesson when no field has the focus.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`), chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	_, next := course.Neighbours(l)
	waitText(ctx, t, "h1", next.Title)

	// Reset: two clicks erase the progress.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons"),
		chromedp.Click(chromedp.ID("progress-reset")), chromedp.Click(chromedp.ID("progress-reset"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	waitText(ctx, t, "#progress-summary", "0 of")
	if st, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-slug="`+slug+`"] .course-status`))); strings.Contains(st, "started") {
		t.Errorf("after a reset the course map says %q", st)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the pages logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserLessonPages opens every lesson: the math is typeset, nothing is
// logged to the console, and every link and frame of the course answers 200.
func TestBrowserLessonPages(t *testing.T) {
	t.Parallel()
	longOnly(t) // under -short the course test checks the formulas of its sample, links_test every link
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{} // href -> the page it was found on
	pages := []string{"/", "/lessons", "/playground"}
	for _, l := range lessonSample(t, course) {
		pages = append(pages, "/lessons/"+l.Slug)
	}
	for _, p := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p)); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p, "/lessons/") {
			// KaTeX has typeset every formula. A poll that starts while the
			// last page's execution context is torn down is tried again.
			var err error
			for try := 0; try < 3; try++ {
				_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.math').length > 0 && [...document.querySelectorAll('.math')].every((m) => m.querySelector('.katex'))`,
					chromedp.WithPollingTimeout(10*time.Second)))
				if err == nil || !(strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "navigated or closed")) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("%s: formulas not typeset: %v", p, err)
			}
		}
		hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('a[href], iframe[data-src]')].map((a) => new URL(a.getAttribute('href') ?? a.dataset.src, location.href)).filter((u) => u.origin === location.origin).map((u) => u.pathname + u.search)`))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hrefs {
			if _, seen := links[h]; !seen {
				links[h] = p
			}
		}
	}
	for h, from := range links {
		res, err := http.Get(base + h)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s (linked from %s): %d", h, from, res.StatusCode)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the lesson pages logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserLessonTensorCores: the tensor-core lesson's stepper shows
// flash2_fast's own source with the phases of its step lit (the products
// and P·V at a kv-tile step), and the roofline lesson grades an answer
// typed as the page shows answers, "30.2%", against the recorded ladder.
func TestBrowserLessonTensorCores(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	// The frame loads lazily: bring it into view.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/tensor-cores"), chromedp.ScrollIntoView(chromedp.CSS("#fast-source iframe"))); err != nil {
		t.Fatal(err)
	}
	frame := `document.querySelector('#fast-source iframe').contentDocument`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](frame+`?.querySelectorAll('#kernel-source .lit').length > 0`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the source panel lights no line: %v", err)
	}
	type sourceView struct {
		Caption string
		Phases  []string
		Lines   string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[sourceView](`(() => { const d = `+frame+`; return {
		caption: d.getElementById('source-caption').textContent,
		phases: [...d.querySelectorAll('#source-phases li.lit')].map((li) => li.dataset.phase),
		lines: [...d.querySelectorAll('#kernel-source .lit')].map((l) => l.textContent).join('\n') }; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Caption, "flash2_fast.cu") || !slices.Contains(got.Phases, "scores") || !slices.Contains(got.Phases, "pv") ||
		slices.Contains(got.Phases, "epilogue") || !strings.Contains(got.Lines, "mma16816") || !strings.Contains(got.Lines, "pk[") {
		t.Errorf("step 2 of the tensor-core run: caption %q, lit phases %v, lit lines hold mma16816 %v, pk %v",
			got.Caption, got.Phases, strings.Contains(got.Lines, "mma16816"), strings.Contains(got.Lines, "pk["))
	}

	const slug, id = "roofline", "fast-compute"
	shown := revealed(t, base, slug, id)
	if !strings.HasSuffix(shown, "%") {
		t.Fatalf("the answer is shown as %q, want a percentage", shown)
	}
	cp := "#" + id
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/"+slug),
		submitAnswer(cp, "101")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, cp+" .verdict", "at most 100%")
	if err := chromedp.Do(ctx, submitAnswer(cp, shown)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, cp+" .verdict", "Correct")
	waitText(ctx, t, cp+" .explanation", "989.4 TFLOP/s")
	if p := problems(); len(p) > 0 {
		t.Errorf("the lessons logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserLessonHopper: the Hopper lesson's stepper shows flash3_tma's
// own source with its step's phases lit (one thread's copies behind tid 0,
// the waits on K's and V's barriers), and its register checkpoint, answered
// by arithmetic on the server, grades a wrong count with a hint, then the
// right one, and shows what it means once answered.
func TestBrowserLessonHopper(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/hopper"), chromedp.ScrollIntoView(chromedp.CSS("#tma-source iframe"))); err != nil {
		t.Fatal(err)
	}
	frame := `document.querySelector('#tma-source iframe').contentDocument`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](frame+`?.querySelectorAll('#kernel-source .lit').length > 0`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the source panel lights no line: %v", err)
	}
	type sourceView struct {
		Caption string
		Lines   string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[sourceView](`(() => { const d = `+frame+`; return {
		caption: d.getElementById('source-caption').textContent,
		lines: [...d.querySelectorAll('#kernel-source .lit')].map((l) => l.textContent).join('\n') }; })()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tma_load_panels", "mbar_expect", "mbar_wait(&fullK[stage], parity)", "mbar_wait(&fullV[stage], parity)"} {
		if !strings.Contains(got.Lines, want) {
			t.Errorf("step 2 of the TMA run (%q): the lit lines hold no %q", got.Caption, want)
		}
	}
	if !strings.Contains(got.Caption, "flash3_tma.cu") {
		t.Errorf("the source panel is captioned %q", got.Caption)
	}

	const id = "ws-registers"
	right := revealed(t, base, "hopper", id)
	cp := "#" + id
	answer := func(s string) {
		t.Helper()
		if err := chromedp.Do(ctx, submitAnswer(cp, s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(cp))); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(right)
	if err != nil {
		t.Fatalf("the answer %q is not a whole number", right)
	}
	const held = "It is what flash3_ws.cu asks for"
	if visible, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(visible, held) {
		t.Error("the text about the checkpoint's answer shows before it is answered")
	}
	answer(strconv.Itoa(n + 8))
	waitText(ctx, t, cp+" .verdict", "Not quite. The SM's 65,536 registers")
	answer("300")
	waitText(ctx, t, cp+" .verdict", "cannot be right")
	answer(right)
	waitText(ctx, t, cp+" .verdict", "Correct")
	waitText(ctx, t, cp+" .explanation", "setmaxnreg counts in steps of 8")
	if visible, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); !strings.Contains(visible, held) {
		t.Error("the text held back until the checkpoint is answered does not show")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the lesson logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// textNumber reads a number as the playground writes it (− for minus,
// "inf", "NaN").
func textNumber(t *testing.T, s string) float64 {
	t.Helper()
	s = strings.ReplaceAll(strings.TrimSpace(s), "−", "-")
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return x
}

func cellNumber(ctx context.Context, t *testing.T, testid string) float64 {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="`+testid+`"]`)))
	if err != nil {
		t.Fatalf("%s: %v", testid, err)
	}
	return textNumber(t, s)
}

// near allows the playground's five significant digits on screen.
func near(a, b float64) bool {
	if math.IsInf(b, 0) || math.IsNaN(b) {
		return a == b || math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-4*max(1, math.Abs(b))
}

// TestBrowserPlayground: on /playground, typing a logit updates m and l to
// what the playground's Go arithmetic says; with the max subtraction off,
// switching float32 to float16 makes l inf at the logit where float16's
// exp overflows. The arithmetic itself (playground_math.js: the rounding
// to each type bit for bit, random rows in every type) is held to the Go
// port by a unit test, jstest/playground.test.mjs.
func TestBrowserPlayground(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)

	row := make([]float64, 6)
	for k := range row {
		row[k] = math.Round(rand.NormFloat64()*300) / 100
	}
	s := playground.Settings{Logits: row, Tile: 2, SubtractMax: true, Dtype: playground.F32}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/playground?"+s.Query()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pg-l-2"]`))); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		r := playground.Run(s)
		for j, tile := range r.Tiles {
			if m, l := cellNumber(ctx, t, fmt.Sprintf("pg-m-%d", j)), cellNumber(ctx, t, fmt.Sprintf("pg-l-%d", j)); !near(m, tile.MNew) || !near(l, tile.L) {
				t.Errorf("%s: tile %d shows m=%g l=%g, want %g %g", what, j, m, l, tile.MNew, tile.L)
			}
		}
	}
	check("at first")
	// Raise logit 3 above every other: m of tile 1 and after must follow.
	s.Logits[3] = math.Round((slices.Max(row)+1+rand.Float64()*4)*100) / 100
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid="pg-logit-3"]`), strconv.FormatFloat(s.Logits[3], 'f', -1, 64)),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="pg-logit-3"]').dispatchEvent(new Event('input'))`)); err != nil {
		t.Fatal(err)
	}
	if got := cellNumber(ctx, t, "pg-m-1"); got != s.Logits[3] {
		t.Errorf("after typing logit 3 = %g, tile 1's m shows %g", s.Logits[3], got)
	}
	check("after typing a logit")

	// The dtype switch: a logit between float16's and float32's limits.
	for k := range row {
		row[k] = math.Round(rand.Float64()*500) / 100 // 0 to 5: no overflow in any type
	}
	at := rand.IntN(len(row))
	row[at] = 11.1 + math.Round(rand.Float64()*7000)/100 // past ln 65520, before 88.72
	s = playground.Settings{Logits: row, Tile: 3, SubtractMax: false, Dtype: playground.F32}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/playground?"+s.Query()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pg-l-1"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, `[data-testid="pg-status"]`, "l stays finite")
	if p := cellNumber(ctx, t, fmt.Sprintf("pg-p-%d", at)); math.IsInf(p, 0) {
		t.Errorf("float32: exp(%g) shows inf", row[at])
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`input[value="f16"]`))); err != nil {
		t.Fatal(err)
	}
	s.Dtype = playground.F16
	want := playground.Run(s).FirstInf
	if want < 0 || want > at {
		t.Fatalf("float16 should overflow by logit %d, Go says %d", at, want)
	}
	waitText(ctx, t, `[data-testid="pg-status"]`, fmt.Sprintf("l becomes inf at logit %d", want))
	if p := cellNumber(ctx, t, fmt.Sprintf("pg-p-%d", at)); !math.IsInf(p, 1) {
		t.Errorf("float16: exp(%g) shows %g, want inf", row[at], p)
	}
	if w := cellNumber(ctx, t, fmt.Sprintf("pg-w-%d", at)); !math.IsNaN(w) {
		t.Errorf("float16: the overflowing logit's weight shows %g, want NaN (inf/inf)", w)
	}

	if p := problems(); len(p) > 0 {
		t.Errorf("the playground logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// checkLoopWidget: on the debugging lesson's page, open, its loop widget
// shows where slip (b) parts from the correct loop, as the server's loop
// says, and agrees everywhere once the slip is unticked. The course's
// browser check runs it when it visits that lesson.
func checkLoopWidget(ctx context.Context, t *testing.T) {
	t.Helper()
	course, _ := lessons.Default()
	l, _ := course.Lesson("debugging")
	var w *lessons.Widget
	for _, x := range l.Widgets {
		if x.ID == "loop-toy" {
			w = x
		}
	}
	q := w.Row / w.Run.Br
	correct := loop.Run(&w.Run, 0, q, nil)
	want := loop.Part(correct, loop.Run(&w.Run, 0, q, w.Slips), w.Row%w.Run.Br, w.Run.D)
	if want.KV < 0 {
		t.Fatalf("the lesson's slip does not part: %+v", want)
	}
	// The slipped loop waits until its checkpoint is answered or the
	// student runs it: the table must not answer the question first.
	waitText(ctx, t, "#loop-toy [data-testid=loop-status]", "predict where the slipped loop parts")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#loop-toy td.parted, #loop-toy tr.first-part').length`)); n != 0 {
		t.Error("the held loop marks where it parts")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#loop-toy [data-testid="loop-run-slipped"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#loop-toy [data-testid=loop-status]", fmt.Sprintf("part after kv-tile %d, first in %s", want.KV, want.What))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#loop-toy td.parted').length`)); n == 0 {
		t.Error("no number is marked as differing")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#loop-toy [data-testid="slip-stale-max"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#loop-toy [data-testid=loop-status]", "No slip is on")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#loop-toy td.parted').length`)); n != 0 {
		t.Errorf("with no slip %d numbers are marked as differing", n)
	}
}

// submitAnswer types an answer into checkpoint cp and submits it with the
// Enter key, as a reader at the keyboard does, once the page has armed its
// buttons. A click aims where the button was when measured: a frame above
// it that resized in between (its run finished drawing) now and then took
// the click elsewhere on a loaded machine, and the answer was never sent.
func submitAnswer(cp, answer string) chromedp.Action[chromedp.Void] {
	input := chromedp.CSS(cp + ` input[name=answer]`)
	return chromedp.Steps(
		chromedp.SetValue(input, answer),
		chromedp.WaitEnabled(chromedp.CSS(cp+` button[data-action=check]`)),
		chromedp.SendKeys(input, kb.Enter),
	)
}
