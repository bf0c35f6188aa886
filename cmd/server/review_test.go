package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"flashstep/lessons"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The fixes a student review of the course asked for, each held in the
// browser on the lesson's own widgets, opened as the lesson frames them.

// courseLesson is the course's lesson slug.
func courseLesson(t *testing.T, slug string) *lessons.Lesson {
	t.Helper()
	c, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	l, ok := c.Lesson(slug)
	if !ok {
		t.Fatalf("no lesson %s", slug)
	}
	return l
}

// lessonWidget is the widget id of lesson slug.
func lessonWidget(t *testing.T, slug, id string) *lessons.Widget {
	t.Helper()
	for _, w := range courseLesson(t, slug).Widgets {
		if w.ID == id {
			return w
		}
	}
	t.Fatalf("lesson %s has no widget %s", slug, id)
	return nil
}

// openWidget opens a lesson's stepper widget on its own, as its frame
// does, at step k (from 1), and waits for its trace.
func openWidget(ctx context.Context, t *testing.T, base string, w *lessons.Widget, k int) {
	t.Helper()
	navigate(ctx, t, base+w.SrcAt(k))
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#step-label", fmt.Sprintf("%d / ", k))
}

// cellText is a rows-table cell as the page writes it, "" when absent.
func cellText(ctx context.Context, t *testing.T, testid string) string {
	t.Helper()
	return evalJS[string](ctx, t, fmt.Sprintf(`document.querySelector('[data-testid=%q]')?.textContent ?? ''`, testid))
}

// recordText wraps the canvases' fillText so that a test can read what was
// printed, in which font, on which canvas (by its box's id).
const recordText = `(() => {
  window.__printed = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
    const c = this.canvas;
    window.__printed.push({ box: (c.id || c.parentElement?.id || ''), font: this.font, text: String(text) });
    return fill.call(this, text, x, y, ...rest);
  };
})()`

// TestBrowserLessonReviewFixes: what the review of the course found, fixed
// and held.
func TestBrowserLessonReviewFixes(t *testing.T) {
	longOnly(t) // seven lessons' widgets, one after another: make test-long and CI
	t.Parallel()
	base, _ := startServer(t, "-worker", "none")
	ctx := browserSized(t, 1366, 900)
	problems := watchConsole(ctx)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordText}); err != nil {
		t.Fatal(err)
	}
	// A lesson frame is the lesson column's width: about 840 px at 1366.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(840, 900)); err != nil {
		t.Fatal(err)
	}

	t.Run("lesson 1: P says what it holds, tiles are labelled, one size of digits, no stray note, no empty slot", func(t *testing.T) {
		w := lessonWidget(t, "attention", "toy-run")
		openWidget(ctx, t, base, w, 1)
		caption := evalJS[string](ctx, t, `document.getElementById('p-caption').textContent`)
		if !strings.Contains(caption, "exp(S − the row's largest score so far)") || !strings.Contains(caption, "not yet divided by the row's sum (lesson 5") {
			t.Errorf("after lesson 1 the P panel is captioned %q: say it holds exp(S − the row's max so far)", caption)
		}
		type printed struct{ Box, Font, Text string }
		// What one drawing of the step prints.
		redraw := `(window.__printed = [], document.dispatchEvent(new CustomEvent('flashstep:go', { detail: { step: %d } })), window.__printed)`
		all := evalJS[[]printed](ctx, t, fmt.Sprintf(redraw, 1))
		fonts := map[string]map[string]bool{}
		labels := map[string][]string{}
		for _, p := range all {
			if p.Box != "s-tile" && p.Box != "p-tile" {
				continue
			}
			if strings.Contains(p.Font, "monospace") {
				if fonts[p.Box] == nil {
					fonts[p.Box] = map[string]bool{}
				}
				fonts[p.Box][p.Font] = true
			} else {
				labels[p.Box] = append(labels[p.Box], p.Text)
			}
		}
		for _, box := range []string{"s-tile", "p-tile"} {
			if len(fonts[box]) != 1 {
				t.Errorf("%s prints its numbers in %d sizes (%v): one size per panel", box, len(fonts[box]), fonts[box])
			}
			// Rows 0 and 1, keys 0 and 1 at step 1.
			for _, want := range []string{"0", "1"} {
				if !slices.Contains(labels[box], want) {
					t.Errorf("%s labels %v: no index %s", box, labels[box], want)
				}
			}
		}
		if note := evalJS[string](ctx, t, `(() => { const e = document.getElementById('kernel-figures'); return e.hidden || !e.getClientRects().length ? '' : e.textContent; })()`); note != "" {
			t.Errorf("lesson 1's stepper shows the kernel's figures note %q", note)
		}
		// The views the widget shows fill the width: no empty slot where
		// the grid would be.
		gap := evalJS[float64](ctx, t, `(() => {
		  const views = document.querySelector('.views').getBoundingClientRect();
		  const shown = [...document.querySelectorAll('.views > .view')].filter((v) => !v.hidden).map((v) => v.getBoundingClientRect());
		  return Math.min(...shown.map((r) => r.left)) - views.left + views.right - Math.max(...shown.map((r) => r.right));
		})()`)
		if gap > 4 {
			t.Errorf("the S and P views leave %.0f px of the views' width empty", gap)
		}
		// Step 4 holds keys 6 and 7: the labels follow the run's numbering.
		var keys []string
		for _, p := range evalJS[[]printed](ctx, t, fmt.Sprintf(redraw, 4)) {
			if p.Box == "s-tile" && !strings.Contains(p.Font, "monospace") {
				keys = append(keys, p.Text)
			}
		}
		if !slices.Contains(keys, "6") || !slices.Contains(keys, "7") {
			t.Errorf("at step 4 (keys 6–7) the S tile's labels are %v", keys)
		}
	})

	t.Run("lesson 6: the S tile prints the five digits large-alpha needs", func(t *testing.T) {
		w := lessonWidget(t, "stability", "large-run")
		openWidget(ctx, t, base, w, 12)
		if d := evalJS[string](ctx, t, `document.querySelector('#s-tile canvas').dataset.digits`); d != "5" {
			t.Errorf("at step 12 the S tile prints %s significant digits, want 5", d)
		}
		if got := cellText(ctx, t, "m-new-0"); got != "?" {
			t.Errorf("row 4's m_new at step 12 reads %q: the checkpoint asks for α there, and m_new must be held", got)
		}
		if got := cellText(ctx, t, "m-old-0"); got == "?" || got == "" {
			t.Errorf("row 4's m_old at step 12 reads %q: the student needs it", got)
		}
	})

	t.Run("lessons 9 and 10: the rows table gives a wide tile's max S and Σp, enough for real-l and fast-m", func(t *testing.T) {
		w := lessonWidget(t, "registers", "real-block")
		openWidget(ctx, t, base, w, 1)
		lOld := textNumber(t, cellText(ctx, t, "l-0"))
		// The reader steps on to step 2.
		scrubTo(ctx, t, 2)
		waitText(ctx, t, "#step-label", "2 / ")
		for _, id := range []string{"m-new-0", "alpha-0", "l-0"} {
			if got := cellText(ctx, t, id); got != "?" {
				t.Errorf("row 0's %s at step 2 reads %q; the checkpoint holds it", id, got)
			}
		}
		mOld := textNumber(t, cellText(ctx, t, "m-old-0"))
		tileMax := textNumber(t, cellText(ctx, t, "tile-max-0"))
		sumP := textNumber(t, cellText(ctx, t, "sum-p-0"))
		mNew := max(mOld, tileMax)
		l := math.Exp(mOld-mNew)*lOld + sumP
		if want := textNumber(t, revealedAnswer(t, base, "registers", "real-l")); math.Abs(l-want) > 0.005 {
			t.Errorf("real-l from the page (l_old %g, m_old %g, max S %g, Σp %g) is %g, the kernel's %g", lOld, mOld, tileMax, sumP, l, want)
		}

		w = lessonWidget(t, "tensor-cores", "fast-run")
		openWidget(ctx, t, base, w, 2)
		if got := cellText(ctx, t, "m-new-42"); got != "?" {
			t.Errorf("row 42's m_new at step 2 reads %q; fast-m holds it", got)
		}
		m := max(textNumber(t, cellText(ctx, t, "m-old-42")), textNumber(t, cellText(ctx, t, "tile-max-42")))
		if want := textNumber(t, revealedAnswer(t, base, "tensor-cores", "fast-m")); math.Abs(m-want) > 0.005 {
			t.Errorf("fast-m from the page is %g, the kernel's %g", m, want)
		}

		// A tile that prints its numbers needs no such columns.
		w = lessonWidget(t, "online-softmax", "loop-run")
		openWidget(ctx, t, base, w, 2)
		if got := cellText(ctx, t, "tile-max-1"); got != "" {
			t.Errorf("lesson 5's 4×4 tiles print their numbers, yet the rows table adds max S (%q)", got)
		}
	})

	t.Run("lesson 7: the causal diagonal runs under the tiles' labels", func(t *testing.T) {
		w := lessonWidget(t, "causal", "causal-run")
		openWidget(ctx, t, base, w, 1)
		// Pixels inside each label's box that have the diagonal's brown.
		crossed := evalJS[[]string](ctx, t, `(() => {
		  const c = document.getElementById('grid');
		  const g = c.getContext('2d');
		  const s = c.width / parseFloat(c.style.width);
		  const out = [];
		  const boxes = (c.dataset.labelBoxes || '').split(';').filter(Boolean).map((b) => b.split(' ').map(Number));
		  if (!boxes.length) return ['no labels drawn'];
		  // One readback of the whole canvas, then each box's pixels in it.
		  const d = g.getImageData(0, 0, c.width, c.height).data;
		  for (const [x, y, w, h] of boxes) {
		    scan: for (let py = Math.ceil((y + 1) * s); py < Math.floor((y + h - 1) * s); py++) {
		      for (let px = Math.ceil((x + 1) * s); px < Math.floor((x + w - 1) * s); px++) {
		        const i = 4 * (py * c.width + px);
		        if (d[i] > d[i + 2] + 30 && d[i] > d[i + 1]) { out.push(x + ',' + y); break scan; }
		      }
		    }
		  }
		  return out;
		})()`)
		if len(crossed) > 0 {
			t.Errorf("the causal diagonal crosses the tile labels at %v", crossed)
		}
		// Its S tile holds −∞ beside −0.589: one size of digits all the
		// same, in S and in P.
		type printed struct{ Box, Font, Text string }
		fonts := map[string]map[string]bool{"s-tile": {}, "p-tile": {}}
		for _, p := range evalJS[[]printed](ctx, t, `(window.__printed = [], document.dispatchEvent(new CustomEvent('flashstep:go', { detail: { step: 1 } })), window.__printed)`) {
			if fonts[p.Box] != nil && strings.Contains(p.Font, "monospace") {
				fonts[p.Box][p.Font] = true
			}
		}
		for box, f := range fonts {
			if len(f) != 1 {
				t.Errorf("%s prints its numbers in %d sizes (%v): one size per panel", box, len(f), f)
			}
		}
	})

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 900)); err != nil {
		t.Fatal(err)
	}

	t.Run("lesson 14: the loop's table fits, its status line is ordinary text", func(t *testing.T) {
		for _, width := range []int64{1366, 1024} {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
				t.Fatal(err)
			}
			navigate(ctx, t, base+"/lessons/debugging")
			waitText(ctx, t, "#loop-large [data-testid=loop-status]", "predict where the slipped loop parts")
			// Held, then with the slipped loop's numbers (longer: 1e-33).
			for _, phase := range []string{"held", "run"} {
				if phase == "run" {
					if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#loop-large [data-testid="loop-run-slipped"]`))); err != nil {
						t.Fatal(err)
					}
					waitText(ctx, t, "#loop-large [data-testid=loop-status]", "part after kv-tile")
				}
				type fit struct{ Table, Box float64 }
				got := evalJS[fit](ctx, t, `(() => { const b = document.querySelector('#loop-large .loop-scroll'); return { table: b.scrollWidth, box: b.clientWidth }; })()`)
				if got.Table > got.Box+1 {
					t.Errorf("at %d px, %s: the loop's table is %.0f px wide in a %.0f px box: columns are cut off", width, phase, got.Table, got.Box)
				}
			}
			colours := evalJS[[]string](ctx, t, `(() => {
			  const s = getComputedStyle(document.querySelector('#loop-large [data-testid=loop-status]')).color;
			  const probe = document.createElement('span'); probe.style.color = 'var(--error)'; document.body.append(probe);
			  const e = getComputedStyle(probe).color; probe.remove();
			  return [s, e];
			})()`)
			if colours[0] == colours[1] {
				t.Errorf("the loop's status line is in the error colour %s", colours[0])
			}
		}
	})

	t.Run("lesson 3: the side by side's caption holds at every width", func(t *testing.T) {
		for _, width := range []int64{1920, 1366, 1024} {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
				t.Fatal(err)
			}
			navigate(ctx, t, base+"/lessons/naive")
			evalJS[int](ctx, t, `(document.querySelector('#side-by-side iframe').loading = 'eager', 0)`)
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector('#side-by-side iframe').contentDocument?.getElementById('c-status')?.textContent || '').includes('Both traces are in')`)); err != nil {
				t.Fatal(err)
			}
			caption := evalJS[string](ctx, t, `document.querySelector('#side-by-side figcaption').textContent.replace(/\s+/g, ' ')`)
			for _, side := range []string{"left", "right"} {
				if strings.Contains(caption, side) {
					t.Errorf("the caption %q places a pane on the %s", caption, side)
				}
			}
			// It says the Naive pane comes first: above, or to the left.
			first := evalJS[bool](ctx, t, `(() => {
			  const d = document.querySelector('#side-by-side iframe').contentDocument;
			  const n = d.getElementById('pane-naive').getBoundingClientRect(), f = d.getElementById('pane-flash2').getBoundingClientRect();
			  return n.bottom <= f.top + 1 || (Math.abs(n.top - f.top) < 2 && n.right <= f.left + 1);
			})()`)
			if !first || !strings.Contains(caption, "Naive comes first") {
				t.Errorf("at %d px: the Naive pane comes first %v, the caption says %q", width, first, caption)
			}
		}
	})

	if p := problems(); len(p) > 0 {
		t.Errorf("the pages logged problems:\n%s", strings.Join(p, "\n"))
	}
}
