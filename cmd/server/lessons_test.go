package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/lessons"

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
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(cp+` input[name=answer]`), s),
			chromedp.Click(chromedp.CSS(cp+` button[data-action=check]`))); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lessons/"+slug)); err != nil {
		t.Fatal(err)
	}
	answer(strconv.FormatFloat(right+0.5, 'f', 3, 64))
	waitText(ctx, t, cp+" .verdict", "Not quite: the kernel's value is lower than")
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
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{} // href -> the page it was found on
	pages := []string{"/", "/lessons"}
	for _, l := range course.Lessons {
		pages = append(pages, "/lessons/"+l.Slug)
	}
	for _, p := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p)); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p, "/lessons/") {
			// KaTeX has typeset every formula.
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.math').length > 0 && [...document.querySelectorAll('.math')].every((m) => m.querySelector('.katex'))`,
				chromedp.WithPollingTimeout(10*time.Second))); err != nil {
				t.Errorf("%s: formulas not typeset: %v", p, err)
			}
		}
		hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('a[href], iframe[src]')].map((a) => new URL(a.getAttribute('href') ?? a.getAttribute('src'), location.href)).filter((u) => u.origin === location.origin).map((u) => u.pathname + u.search)`))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hrefs {
			if _, seen := links[h]; !seen {
				links[h] = p
			}
		}
		time.Sleep(300 * time.Millisecond) // let the frames start their runs
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
