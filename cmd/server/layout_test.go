package main

// Browser tests of the pages a teacher projects: at a laptop's and an old
// projector's size, the key views of each page sit inside the first screen,
// nothing overflows its box, select boxes show their whole text, and the
// fixes each bug report asked for hold.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/ladder"
	"flashstep/lessons"
	"flashstep/recordings"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

var shots = flag.String("shots", "", "write screenshots of the stepper, side by side and sweep at 1024×768 into this folder")

// screens are the sizes every page is checked at: an old projector and a
// full-HD screen.
var screens = []struct{ w, h int }{{1024, 768}, {1920, 1080}}

const toyRun = "variant=flash2&n=8&d=4&br=2&bc=2&pattern=normal&seed=1" // recorded on an H100

// layoutProblems lists what a reader would see as broken on the current
// page: an element whose content spills out of its box, a select box whose
// longest option is cut off, a page wider than the screen. Text only a
// screen reader reads (.sr-only) is clipped on purpose.
func layoutProblems(ctx context.Context, t *testing.T) []string {
	t.Helper()
	js := `(() => {
	  const out = [];
	  const name = (el) => el.id ? '#' + el.id : el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
	  if (document.documentElement.scrollWidth > innerWidth + 1) out.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + innerWidth + ' px screen');
	  for (const el of document.querySelectorAll('body *')) {
	    if (!el.offsetParent || el.closest('svg, .katex, [hidden], .sr-only')) continue; // .sr-only: clipped on purpose, for screen readers
	    const cs = getComputedStyle(el);
	    if (cs.display === 'inline' || cs.overflowX === 'auto' || cs.overflowX === 'scroll' || el.tagName === 'SELECT' || el.tagName === 'INPUT') continue;
	    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) out.push(name(el) + ' overflows: ' + el.scrollWidth + ' px of content in ' + el.clientWidth + ' px');
	  }
	  const g = document.createElement('canvas').getContext('2d');
	  for (const s of document.querySelectorAll('select')) {
	    if (!s.offsetParent) continue;
	    const cs = getComputedStyle(s);
	    g.font = cs.fontWeight + ' ' + cs.fontSize + ' ' + cs.fontFamily;
	    // Room for text: the box less its padding and the drop-down arrow.
	    const room = s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 18;
	    for (const o of s.options) {
	      const w = g.measureText(o.text).width;
	      if (w > room) out.push('select ' + name(s) + ' cuts "' + o.text + '": ' + Math.round(w) + ' px of text in ' + Math.round(room) + ' px');
	    }
	  }
	  return out;
	})()`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// outsideFirstScreen lists the elements (by CSS selector) that are not
// wholly inside the viewport, or are too small to show anything.
func outsideFirstScreen(ctx context.Context, t *testing.T, selectors ...string) []string {
	t.Helper()
	sel, _ := json.Marshal(selectors)
	js := fmt.Sprintf(`(() => {
	  window.scrollTo(0, 0);
	  const out = [];
	  for (const s of %s) {
	    const el = document.querySelector(s);
	    if (!el) { out.push(s + ' is missing'); continue; }
	    const r = el.getBoundingClientRect();
	    if (r.width < 40 || r.height < 20) out.push(s + ' is ' + Math.round(r.width) + '×' + Math.round(r.height) + ' px');
	    if (r.top < 0 || r.left < 0 || r.bottom > innerHeight + 0.5 || r.right > innerWidth + 0.5)
	      out.push(s + ' spans ' + [r.left, r.top, r.right, r.bottom].map(Math.round) + ' of a ' + innerWidth + '×' + innerHeight + ' screen');
	  }
	  return out;
	})()`, sel)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// navigate loads u in the tab and waits until it has loaded. chromedp's
// Navigate can return before the new page is there: a same-document
// navigation of the page it leaves (a stepper writing its step into the
// URL as it draws) ends its wait. So the page left is marked first, and
// navigate waits for a loaded document without the mark.
func navigate(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__fsLeft = true`)) // nothing to mark in a new tab
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`!window.__fsLeft && document.readyState === 'complete'`,
			chromedp.WithPollingTimeout(time.Until(deadline))))
		// A poll that starts in the page being left is ended by the new
		// page: poll again in the new one.
		if err == nil || !(strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "navigated or closed")) {
			break
		}
	}
	if err != nil {
		t.Fatalf("loading %s: %v", u, err)
	}
}

func evalJS[T any](ctx context.Context, t *testing.T, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func saveShot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if *shots == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*shots, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserStepperProjector: in the projector layout the tile grid, S, P,
// the m/α/l table and O fit the first screen at both sizes, the numbers in
// a toy run's heatmap cells are large enough to read across a room, and
// nothing on the page overflows or cuts its text.
func TestBrowserStepperProjector(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	key := []string{"[data-testid=panel-grid]", "[data-testid=panel-s]", "[data-testid=panel-p]", "[data-testid=panel-rows]", "[data-testid=panel-o]", "#step-label", "#next"}
	for _, sc := range screens {
		t.Run(fmt.Sprintf("%dx%d", sc.w, sc.h), func(t *testing.T) {
			ctx := browserSized(t, sc.w, sc.h)
			problems := watchConsole(ctx)
			navigate(ctx, t, base+"/step?"+toyRun+"&step=4&layout=projector")
			waitText(ctx, t, "#run-status", "Trace complete")
			waitText(ctx, t, "#step-label", "4 / 20")
			if p := outsideFirstScreen(ctx, t, key...); len(p) > 0 {
				t.Errorf("toy run, projector layout:\n%s", strings.Join(p, "\n"))
			}
			// The smallest number printed in the S, P and O cells.
			for _, id := range []string{"s-tile", "p-tile", "o-tile"} {
				px := evalJS[string](ctx, t, fmt.Sprintf(`document.querySelector('#%s canvas').dataset.fontPx`, id))
				if v, err := strconv.ParseFloat(px, 64); err != nil || v < 16 {
					t.Errorf("%s: numbers printed at %s px, want at least 16", id, px)
				}
			}
			if p := layoutProblems(ctx, t); len(p) > 0 {
				t.Errorf("toy run, projector layout:\n%s", strings.Join(p, "\n"))
			}
			if sc.w == 1024 {
				saveShot(ctx, t, "stepper-1024.png")
			}

			// A real block: 64×64 tiles, 64 rows in the table (it scrolls
			// inside its box; the box stays on screen).
			navigate(ctx, t, base+"/step?variant=flash2&n=256&d=64&br=64&bc=64&pattern=normal&seed=1&step=6&layout=projector")
			waitText(ctx, t, "#run-status", "Trace complete")
			if p := outsideFirstScreen(ctx, t, key...); len(p) > 0 {
				t.Errorf("64×64 tiles, projector layout:\n%s", strings.Join(p, "\n"))
			}
			// The ordinary layout keeps its boxes too, with the form open.
			navigate(ctx, t, base+"/step?"+toyRun)
			waitText(ctx, t, "#run-status", "Trace complete")
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("projector"))); err != nil {
				t.Fatal(err)
			}
			if evalJS[bool](ctx, t, `document.body.classList.contains('projector')`) {
				t.Errorf("the projector choice outlived its URL: the button should have turned it off")
			}
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('run-settings').open = true`)); err != nil {
				t.Fatal(err)
			}
			if p := layoutProblems(ctx, t); len(p) > 0 {
				t.Errorf("ordinary layout, form open:\n%s", strings.Join(p, "\n"))
			}
			if p := problems(); len(p) > 0 {
				t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
			}
		})
	}
}

// TestBrowserStepNumbering: the URL and the page count steps the same way,
// from 1; a step past the end shows the last and says so; a recording says
// it was replayed, not "computed in 0 ms"; the toy run's timeline draws the
// SMs it used, not 132 rows of which 128 are empty.
func TestBrowserStepNumbering(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	problems := watchConsole(ctx)
	c, _ := kernels.ParseConfig(mustQuery(toyRun))
	steps := mirrorSteps(t, c)
	k := 2 + rand.IntN(len(steps)-3) // a step from 1, as the URL names it
	navigate(ctx, t, fmt.Sprintf("%s/step?%s&step=%d", base, toyRun, k))
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k, len(steps)))
	want := steps[k-1]
	if title := evalJS[string](ctx, t, `document.getElementById('step-title').textContent`); want.Kind == instrument.KindFlashStep &&
		!strings.Contains(title, fmt.Sprintf("Q-tile %d", want.I)) || !strings.Contains(title, fmt.Sprintf("kv-tile %d", want.J)) && want.J >= 0 {
		t.Errorf("step=%d shows %q, the mirror's step %d is tile (%d, %d)", k, title, k, want.I, want.J)
	}
	status := evalJS[string](ctx, t, `document.getElementById('run-status').textContent`)
	if !strings.Contains(status, "replayed from a recording made 2026-11-22") || strings.Contains(status, "computed in") {
		t.Errorf("a recording's status: %q", status)
	}
	waitText(ctx, t, "#timeline-note", "only the SMs used are drawn")
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`location.search.includes('step=%d')`, k+1), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Errorf("after → from step %d the URL is %s", k, loc)
	}

	navigate(ctx, t, base+"/step?"+toyRun+"&step=999")
	waitText(ctx, t, "#run-status", "step 999 does not exist")
	waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", len(steps), len(steps)))
	navigate(ctx, t, base+"/step?"+toyRun+"&step=x1")
	waitText(ctx, t, "#run-status", "step must be a whole number")
	waitText(ctx, t, "#step-label", fmt.Sprintf("1 / %d", len(steps)))
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

func mustQuery(s string) url.Values {
	v, err := url.ParseQuery(s)
	if err != nil {
		panic(err)
	}
	return v
}

// TestBrowserFormNoSilentRerun: letters typed into N are an error beside N;
// Run then starts nothing and takes the previous run off the screen, where
// it used to rerun the previous configuration and say "Trace complete".
func TestBrowserFormNoSilentRerun(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	navigate(ctx, t, base+"/step?"+toyRun)
	waitText(ctx, t, "#run-status", "Trace complete")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#run-settings summary")),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('f-n').value = ''`),
		chromedp.SendKeys(chromedp.ID("f-n"), "abc"),
		chromedp.Click(chromedp.ID("run"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#err-n", "N must be a whole number")
	waitText(ctx, t, "#run-status", "Fix the highlighted fields")
	time.Sleep(600 * time.Millisecond) // long enough for a rerun of the toy run to finish
	status := evalJS[string](ctx, t, `document.getElementById('run-status').textContent`)
	label := evalJS[string](ctx, t, `document.getElementById('step-label').textContent`)
	if strings.Contains(status, "Trace complete") || label != "–" {
		t.Errorf("after Run with N=abc: status %q, step label %q", status, label)
	}
	// An emptied field is required, not the default.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => { const n = document.getElementById('f-n'); n.value = ''; n.dispatchEvent(new Event('input', {bubbles: true})); })()`)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#err-n", "N is required")
	// Fixed, it runs.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("f-n"), "6")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById('run').disabled`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("run"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#run-summary", "N=6")
}

// TestBrowserTileTooltipFollows: the tooltip of the tile under the pointer
// follows the steps taken with the keyboard: "to do", then "this step",
// then "done".
func TestBrowserTileTooltipFollows(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	navigate(ctx, t, base+"/step?"+toyRun+"&step=1")
	waitText(ctx, t, "#run-status", "Trace complete")
	// Point at tile (0, 1): the second tile of the first row of 4×4.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
	  const c = document.getElementById('grid'); const r = c.getBoundingClientRect();
	  c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width * 0.375, clientY: r.top + r.height * 0.125, bubbles: true}));
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#tip", "tile (0, 1)")
	waitText(ctx, t, "#tip", "to do")
	for _, want := range []string{"this step", "done (left the chip as O only)"} {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#tip", want)
	}
}

// TestBrowserCompareMakesItsPoint: at N=1024 the side by side leads with the
// device-memory traffic of both kernels on one scale and their ratio in
// large type, all of it equal to the mirrors' own byte counts; the two
// grids end in different colours; an oversized run says why and offers the
// part that fits.
func TestBrowserCompareMakesItsPoint(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	seed := rand.Uint64()
	// N=1024 in a full run; under -short N=512, a quarter of the bytes to
	// decode and draw, and the ratio still far from 1.
	n := 1024
	if testing.Short() {
		n = 512
	}
	q := fmt.Sprintf("n=%d&d=64&br=64&bc=64&pattern=normal&seed=%d", n, seed)
	written := map[string]uint64{}
	for _, v := range []string{"naive", "flash2"} {
		c, err := kernels.ParseConfig(mustQuery(q + "&variant=" + v))
		if err != nil {
			t.Fatal(err)
		}
		if err := kernels.RunMirror(context.Background(), kernelstest.MustRun(t, c), func(r *instrument.Record) error {
			written[v] += r.BytesWritten
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	ratio := float64(written["naive"]) / float64(written["flash2"])
	for _, sc := range screens {
		t.Run(fmt.Sprintf("%dx%d", sc.w, sc.h), func(t *testing.T) {
			ctx := browserSized(t, sc.w, sc.h)
			problems := watchConsole(ctx)
			navigate(ctx, t, base+"/compare?"+q)
			waitText(ctx, t, "#c-status", "Both traces are in")
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("c-last"))); err != nil {
				t.Fatal(err)
			}
			waitText(ctx, t, "#c-progress", "finishing: 100%")
			got := evalJS[string](ctx, t, `document.getElementById('c-ratio').textContent`)
			if want := fmt.Sprintf("%d×", int(math.Round(ratio))); got != want {
				t.Errorf("ratio in large type %q, the mirrors' bytes give %s (%d / %d)", got, want, written["naive"], written["flash2"])
			}
			if px := evalJS[float64](ctx, t, `parseFloat(getComputedStyle(document.getElementById('c-ratio')).fontSize)`); px < 36 {
				t.Errorf("the ratio is set at %.0f px", px)
			}
			// The bars share one scale: their written parts stand in the ratio.
			bars := evalJS[[]float64](ctx, t, `['naive', 'flash2'].map((v) => document.querySelector('[data-testid=' + v + '-bar-written]').getBoundingClientRect().width)`)
			if r := bars[0] / bars[1]; math.Abs(r-ratio) > 0.2*ratio {
				t.Errorf("bars %v px: ratio %.1f, want %.1f", bars, r, ratio)
			}
			for _, v := range []string{"naive", "flash2"} {
				if txt := evalJS[string](ctx, t, `document.getElementById('`+v+`-race').textContent`); !strings.HasPrefix(txt, fmtBytes(written[v])+" written") {
					t.Errorf("%s: %q, the mirror wrote %s", v, txt, fmtBytes(written[v]))
				}
			}
			if p := outsideFirstScreen(ctx, t, "#c-ratio", "#c-bars", "#c-last", "#pane-naive h2", "#pane-flash2 h2"); len(p) > 0 {
				t.Errorf("first screen:\n%s", strings.Join(p, "\n"))
			}
			// The last step of each grid: naive's tiles keep S and P in
			// device memory, flash's left the chip as O.
			colours := evalJS[[]string](ctx, t, `['naive', 'flash2'].map((v) => {
			  const c = document.querySelector('#pane-' + v + ' [data-role=grid]');
			  return Array.from(c.getContext('2d').getImageData(c.width * 0.3, c.height * 0.3, 1, 1).data).join(',');
			})`)
			if colours[0] == colours[1] {
				t.Errorf("both grids end in the same colour %s", colours[0])
			}
			if p := layoutProblems(ctx, t); len(p) > 0 {
				t.Errorf("side by side:\n%s", strings.Join(p, "\n"))
			}
			if sc.w == 1024 {
				saveShot(ctx, t, "compare-1024.png")
			}

			navigate(ctx, t, base+"/compare?n=2048&d=64&br=64&bc=64&seed=2")
			waitText(ctx, t, "#cerr-form", "above the 32.0 MiB limit")
			waitText(ctx, t, "#c-status", "cannot be traced as it is")
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("[data-testid=c-offer]"))); err != nil {
				t.Fatal(err)
			}
			waitText(ctx, t, "#c-status", "Both traces are in")
			waitText(ctx, t, "[data-testid=c-run-summary]", "q-tiles 0–")
			if p := problems(); len(p) > 0 {
				t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
			}
		})
	}
}

// fmtBytes is the page's own byte formatting (static/js/format.js).
func fmtBytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v < 10 {
		return fmt.Sprintf("%.2f %s", v, units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// TestBrowserSweepLegible: the recorded H100 sweep's charts have room and
// an N label at every N swept, naive's out-of-memory point is marked on the
// chart, the traffic table names every run's shape; a CPU sweep is not
// drawn against the H100's bf16 lines, its memory is the model's and its
// TFLOP/s are not 0.00; a sweep cancelled before its first point draws no
// empty chart.
func TestBrowserSweepLegible(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	for _, sc := range screens {
		t.Run(fmt.Sprintf("%dx%d", sc.w, sc.h), func(t *testing.T) {
			ctx := browserSized(t, sc.w, sc.h)
			problems := watchConsole(ctx)
			navigate(ctx, t, base+"/sweep")
			waitText(ctx, t, "#sweep-title", "Recorded on NVIDIA H100")
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](sweepDrawn, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"chart-ms", "chart-tflops"} {
				area := evalJS[float64](ctx, t, `Chart.getChart('`+id+`').chartArea.height`)
				if area < 180 {
					t.Errorf("%s: %.0f px of plot", id, area)
				}
				ticks := evalJS[[]string](ctx, t, `Chart.getChart('`+id+`').scales.x.ticks.map((k) => k.label)`)
				if strings.Join(ticks, ",") != "512,1K,2K,4K,8K,16K,32K" {
					t.Errorf("%s: N labels %v", id, ticks)
				}
				marks := evalJS[string](ctx, t, `JSON.stringify(Chart.getChart('`+id+`').options.plugins.outOfMemoryMarks.marks)`)
				if marks != `[{"n":32768,"variant":"naive"},{"n":32768,"variant":"naive_mma"}]` {
					t.Errorf("%s: out-of-memory marks %s", id, marks)
				}
			}
			if p := outsideFirstScreen(ctx, t, "#sweep-title", "[data-testid=chart-ms]"); len(p) > 0 {
				t.Errorf("first screen:\n%s", strings.Join(p, "\n"))
			}
			if sc.w == 1920 {
				if p := outsideFirstScreen(ctx, t, "[data-testid=chart-tflops]"); len(p) > 0 {
					t.Errorf("first screen:\n%s", strings.Join(p, "\n"))
				}
			}
			waitText(ctx, t, "#traffic-table", "B=")
			if txt := evalJS[string](ctx, t, `document.getElementById('traffic-table').textContent`); strings.Contains(txt, "null") || strings.Contains(txt, "undefined") {
				t.Errorf("traffic table: %s", txt)
			}
			if p := layoutProblems(ctx, t); len(p) > 0 {
				t.Errorf("sweep:\n%s", strings.Join(p, "\n"))
			}
			if sc.w == 1024 {
				saveShot(ctx, t, "sweep-1024.png")
			}
			if p := problems(); len(p) > 0 {
				t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
			}
		})
	}

	ctx := browserSized(t, 1024, 768)
	navigate(ctx, t, base+"/sweep")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("s-engine"), "cpu"),
		chromedp.SetValue(chromedp.ID("s-n"), "64,128"),
		chromedp.SetValue(chromedp.ID("s-d"), "16"),
		chromedp.SetValue(chromedp.ID("s-causal"), "0"),
		chromedp.SetValue(chromedp.ID("s-repeats"), "1"),
		chromedp.Click(chromedp.ID("sweep-run"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#sweep-status", "Done: 4 points")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](sweepDrawn, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal(err)
	}
	labels := evalJS[[]string](ctx, t, `Chart.getChart('chart-ms').data.datasets.map((d) => d.label)`)
	if len(labels) != 2 || strings.Contains(strings.Join(labels, ","), "SDPA") {
		t.Errorf("a CPU sweep's chart holds %v", labels)
	}
	rows := evalJS[[][]string](ctx, t, `Array.from(document.querySelectorAll('#sweep-table tbody tr')).map((r) => Array.from(r.cells).map((c) => c.textContent))`)
	for _, r := range rows {
		if v, err := strconv.ParseFloat(r[9], 64); err != nil || !(v > 0) {
			t.Errorf("TFLOP/s cell %q in %v", r[9], r)
		}
	}
	waitText(ctx, t, "#sweep-table thead", "device memory (model)")
	waitText(ctx, t, "#sweep-how", "wall-clock")
	waitText(ctx, t, "#sweep-how", "B=1, H=1")

	// A sweep cancelled while queued behind another has no points.
	res, err := http.PostForm(base+"/api/sweeps", url.Values{"engine": {"cpu"}, "n": {"1024"}, "d": {"256"}, "causal": {"0,1"}, "repeats": {"5"}})
	if err != nil || res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("starting a long sweep: %v %v", err, res)
	}
	var long struct{ ID string }
	json.NewDecoder(res.Body).Decode(&long)
	res.Body.Close()
	defer func() {
		req, _ := http.NewRequest(http.MethodDelete, base+"/api/sweeps/"+long.ID, nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("sweep-run"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#sweep-status", "Queued")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("sweep-cancel"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#sweep-status", "Cancelled after 0 of")
	waitText(ctx, t, "#sweep-empty", "cancelled before its first point")
	if !evalJS[bool](ctx, t, `document.getElementById('sweep-charts').hidden`) {
		t.Errorf("an empty cancelled sweep still shows its charts")
	}
}

// TestBrowserBannerOneLine: the no-GPU banner is one line at 1024 px.
func TestBrowserBannerOneLine(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	navigate(ctx, t, base+"/")
	lines := evalJS[float64](ctx, t, `(() => {
	  const b = document.querySelector('[data-testid=engine-banner]'); const cs = getComputedStyle(b);
	  return (b.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom)) / parseFloat(cs.lineHeight);
	})()`)
	if lines > 1.2 {
		t.Errorf("the banner takes %.1f lines", lines)
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("home:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserKernelSource: beside each step the kernel's own source is shown
// with the lines of the step's phase lit: the first kv-tile lights the load
// of Q, a later one does not, the epilogue lights the division by l; a
// naive softmax step lights naive_softmax.
func TestBrowserKernelSource(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1500, 1000)
	problems := watchConsole(ctx)
	lit := func() string {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#kernel-source .line.lit').length > 0`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("no source line is lit: %v", err)
		}
		return evalJS[string](ctx, t, `Array.from(document.querySelectorAll('#kernel-source .line.lit')).map((l) => l.textContent).join('')`)
	}
	navigate(ctx, t, base+"/step?"+toyRun+"&step=1")
	waitText(ctx, t, "#run-status", "Trace complete")
	if src := lit(); !strings.Contains(src, "sQ[e] =") || !strings.Contains(src, "expf(") || strings.Contains(src, "__fdiv_rn(o[t], lr)") {
		t.Errorf("the first step of q-tile 0 lights:\n%s", src)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-label", "2 / 20")
	if src := lit(); strings.Contains(src, "sQ[e] =") || !strings.Contains(src, "sK[c * KS + x] =") {
		t.Errorf("kv-tile 1 lights the load of Q, or not the load of K:\n%s", src)
	}
	navigate(ctx, t, base+"/step?"+toyRun+"&step=5") // q-tile 0's epilogue: 4 kv-tiles, then it
	waitText(ctx, t, "#step-title", "finished")
	if src := lit(); !strings.Contains(src, "__fdiv_rn(o[t], lr)") || strings.Contains(src, "expf(") {
		t.Errorf("the epilogue lights:\n%s", src)
	}
	navigate(ctx, t, base+"/step?variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1&step=17") // 16 score tiles, then the softmax
	waitText(ctx, t, "#step-title", "Naive phase 2")
	if src := lit(); !strings.Contains(src, "naive_softmax(") || strings.Contains(src, "naive_scores(") {
		t.Errorf("the naive softmax step lights:\n%s", src)
	}
	// The tensor-core rung, as recorded on the H100: its own source, and
	// the trace says bf16.
	navigate(ctx, t, base+"/step?variant=flash2_fast&n=256&d=64&br=128&bc=128&pattern=normal&seed=1&step=1")
	waitText(ctx, t, "#run-status", "replayed from a recording")
	waitText(ctx, t, "#source", "bf16")
	waitText(ctx, t, "#source-caption", "kernels/cuda/forward/flash2_fast.cu")
	if src := lit(); !strings.Contains(src, "load_tile<BR, D, NT, SW, ASYNC>(sQ") || !strings.Contains(src, "mma16816(o[mi]") {
		t.Errorf("flash2_fast's first step lights:\n%s", src)
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("stepper with its source:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserLadder: the ladder page shows every built rung with a figure on
// every shape, its step-through links work, and nothing overflows at a
// projector's width.
func TestBrowserLadder(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	problems := watchConsole(ctx)
	navigate(ctx, t, base+"/ladder")
	waitText(ctx, t, "[data-testid=ladder-table]", "flash2_fast")
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	unmeasured := map[string]bool{}
	for _, row := range tab.Rows {
		unmeasured[row.Rung.Name] = row.Unmeasured
	}
	for _, r := range kernels.Ladder {
		if !r.Built {
			continue
		}
		cells := evalJS[[]string](ctx, t, fmt.Sprintf(`Array.from(document.querySelectorAll('[data-testid=rung-%s] td strong')).map((e) => e.textContent)`, r.Name))
		if unmeasured[r.Name] { // newer than the bench's recording: says so, shows no figure
			text := evalJS[string](ctx, t, fmt.Sprintf(`document.querySelector('[data-testid=rung-%s]')?.closest('tbody, table')?.textContent ?? ''`, r.Name))
			if len(cells) != 0 || !strings.Contains(text, "not measured yet") {
				t.Errorf("rung %s, unmeasured: figures %v, and the page says %q", r.Name, cells, text)
			}
			continue
		}
		if len(cells) != 4 {
			t.Errorf("rung %s shows %d figures: %v", r.Name, len(cells), cells)
		}
		for _, c := range cells {
			if v, err := strconv.ParseFloat(c, 64); err != nil || !(v > 0) {
				t.Errorf("rung %s: figure %q", r.Name, c)
			}
		}
	}
	links := evalJS[[]string](ctx, t, `Array.from(document.querySelectorAll('[data-testid=ladder-table] a')).map((a) => a.href)`)
	if len(links) < 3 {
		t.Fatalf("step-through links: %v", links)
	}
	for _, l := range links {
		res, err := http.Get(l)
		if err != nil || res.StatusCode != 200 {
			t.Errorf("%s: %v %v", l, err, res)
		}
		if res != nil {
			res.Body.Close()
		}
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("ladder:\n%s", strings.Join(p, "\n"))
	}
	// Every rung's source and diff opened: the code scrolls in its own box,
	// the page does not. (The whole page laid out again: make test-long.)
	if testing.Short() {
		if p := problems(); len(p) > 0 {
			t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
		}
		return
	}
	built := 0
	for _, r := range kernels.Ladder {
		if r.Built {
			built++
		}
	}
	if n := evalJS[int](ctx, t, `(() => { const ds = document.querySelectorAll('details'); ds.forEach((d) => d.open = true); return ds.length; })()`); n < 2*built {
		t.Errorf("the ladder page has %d collapsible sections, want a source and a diff per rung", n)
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("ladder, every source and diff open:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserCompareBF16Pair: the side by side offers the bf16 pair on
// tensor cores; the recorded H100 run shows both kernels' traces from the
// GPU, naive_mma's S and P in device memory against flash2_fast's tiles.
func TestBrowserCompareBF16Pair(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1024, 768)
	problems := watchConsole(ctx)
	navigate(ctx, t, base+"/compare?pair=bf16&n=256&d=64&br=128&bc=128&pattern=normal&seed=1")
	waitText(ctx, t, "#c-status", "Both traces are in")
	for _, pane := range []string{"naive", "flash2"} {
		waitText(ctx, t, "#pane-"+pane+" [data-role=status]", "NVIDIA H100")
	}
	waitText(ctx, t, "[data-testid=c-run-summary]", "bf16 on tensor cores")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("c-last"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#c-progress", "finishing: 100%")
	waitText(ctx, t, "[data-testid=naive-buffer]", "in device memory")
	if r := evalJS[string](ctx, t, `document.getElementById('c-ratio').textContent`); !strings.HasSuffix(r, "×") {
		t.Errorf("ratio %q", r)
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("bf16 pair:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserTaught: a lesson's frame says how far the course has gone
// (taught=N), and the stepper shows nothing a later lesson teaches as if
// known. The toy run after lesson 1 shows P as not yet divided by its row's
// sum and the rows without m, α and l, each saying lesson 5 explains them,
// and names rows and keys, not q-tiles; after lesson 5 it shows them all.
// Either way the batch-head reads "batch 0, head 0", the short "b0 h0" of
// its box is explained, and −∞, the max before the first tile, is no error.
func TestBrowserTaught(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browserSized(t, 1366, 900)
	problems := watchConsole(ctx)
	embed := base + "/step?" + toyRun + "&embed=1&panels=qkv,s,p,rows,final"
	type shown struct {
		Title, Explain, PCaption, OCaption, RowsCaption, RowsNote, QLabel, BHOption, BHLabel, Figures string
		Heads                                                                                         []string
		Alpha                                                                                         int
		MOldClass                                                                                     string
	}
	read := func() shown {
		t.Helper()
		return evalJS[shown](ctx, t, `(() => {
		  const $ = (id) => document.getElementById(id);
		  return {
		    title: $('step-title').textContent, explain: $('step-explain').textContent,
		    pCaption: $('p-caption').textContent, oCaption: $('o-caption').textContent,
		    rowsCaption: $('rows-caption').textContent, rowsNote: $('rows-note').textContent,
		    qLabel: $('sel-q-label').textContent, bhOption: $('sel-bh').options[0]?.title ?? '',
		    bhLabel: $('sel-bh').closest('label').title, figures: $('kernel-figures').textContent,
		    heads: [...document.querySelectorAll('#rows th .sr-only')].map((e) => e.textContent),
		    alpha: document.querySelectorAll('#rows [data-testid^=alpha-]').length,
		    mOldClass: document.querySelector('[data-testid=m-old-0]')?.className ?? '',
		  };
		})()`)
	}

	navigate(ctx, t, embed+"&taught=1&step=3")
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#step-label", "3 / 20")
	l1 := read()
	if !strings.Contains(l1.PCaption, "not yet divided by the row's sum (lesson 5") {
		t.Errorf("after lesson 1 the P caption says %q", l1.PCaption)
	}
	if l1.Alpha != 0 || slices.Contains(l1.Heads, "m old") || !strings.Contains(l1.RowsNote, "lesson 5") || strings.Contains(l1.RowsCaption, "softmax") {
		t.Errorf("after lesson 1 the rows show %v (%d α cells), captioned %q, noting %q", l1.Heads, l1.Alpha, l1.RowsCaption, l1.RowsNote)
	}
	for _, s := range []string{l1.Title, l1.Explain, l1.QLabel} {
		if strings.Contains(s, "α") || strings.Contains(s, "m_new") || strings.Contains(s, "tile") {
			t.Errorf("after lesson 1 the step says %q", s)
		}
	}
	if !strings.Contains(l1.Title, "Rows 0–1 × keys 4–5, batch 0, head 0") || !strings.Contains(l1.Explain, "lesson 5") || l1.QLabel != "Rows" {
		t.Errorf("after lesson 1: title %q, explanation %q, box %q", l1.Title, l1.Explain, l1.QLabel)
	}
	// A frame of some panels, without the kernel's source, has no place
	// for the compiler's figures, nor for a note that lesson 9 tells them.
	if l1.Figures != "" || !evalJS[bool](ctx, t, `document.getElementById('kernel-figures').hidden`) {
		t.Errorf("after lesson 1, in a frame without the source panel, the kernel's figures read %q", l1.Figures)
	}
	if l1.BHOption != "batch 0, head 0" || !strings.Contains(l1.BHLabel, "b1 h7 is batch 1, head 7") {
		t.Errorf("the batch-head box: option %q, label %q", l1.BHOption, l1.BHLabel)
	}
	// Stepping keeps the lesson's taught= in the frame's URL.
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`location.search.includes('step=4') && location.search.includes('taught=1')`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Errorf("after a step the URL is %s", loc)
	}

	// Beside the kernel's source, before lesson 9, the note says where the
	// figures are taught.
	navigate(ctx, t, base+"/step?"+toyRun+"&embed=1&panels=grid,source&taught=1&step=1")
	waitText(ctx, t, "#run-status", "Trace complete")
	if f := read().Figures; !strings.Contains(f, "lesson 9") || strings.Contains(f, "registers,") {
		t.Errorf("after lesson 1, beside the source, the kernel's figures read %q", f)
	}

	navigate(ctx, t, embed+"&taught=5&step=1")
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#step-label", "1 / 20")
	first := read()
	// The first kv-tile: m_old is −∞, calm and explained.
	if !strings.Contains(first.MOldClass, "neginf") || !strings.Contains(first.RowsNote, "−∞") || strings.Contains(first.RowsNote, "lesson 5") {
		t.Errorf("after lesson 5, at the first tile: m_old's class %q, note %q", first.MOldClass, first.RowsNote)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-label", "3 / 20")
	l5 := read()
	if l5.PCaption != "P = exp(S − m_new), unnormalised" || l5.Alpha != 2 || !slices.Contains(l5.Heads, "m old") || l5.RowsNote != "" {
		t.Errorf("after lesson 5: P caption %q, rows %v with %d α cells, note %q", l5.PCaption, l5.Heads, l5.Alpha, l5.RowsNote)
	}
	if !strings.Contains(l5.Title, "Q-tile 0 (rows 0–1) × kv-tile 2 (cols 4–5), batch 0, head 0") || !strings.Contains(l5.Explain, "α = exp(m_old − m_new)") || l5.QLabel != "Q-tile" {
		t.Errorf("after lesson 5: title %q, explanation %q, box %q", l5.Title, l5.Explain, l5.QLabel)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// legibleJS lists, in a page and every frame in it, what a student could
// not read in an embedded widget at this size: a number printed smaller
// than 12 px (text, or figures drawn on a canvas), a timeline's SM label
// without room, a memory figure whose squares run into the chip's box.
const legibleJS = `(() => {
  const out = [];
  const docs = [[document, 'page']];
  for (const f of document.querySelectorAll('iframe')) {
    try { if (f.contentDocument) docs.push([f.contentDocument, (f.closest('[id]') || f).id]); } catch (e) {}
  }
  for (const [d, where] of docs) {
    const root = where === 'page' ? [...d.querySelectorAll('.widget')] : [d.body];
    for (const r of root) {
      const walk = d.createTreeWalker(r, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const el = n.parentElement;
        if (!/\d/.test(n.textContent) || !el || !el.getClientRects().length || el.closest('[hidden], .tip, .sr-only, .katex, script')) continue;
        const cs = d.defaultView.getComputedStyle(el);
        if (cs.visibility !== 'visible' || cs.display === 'none') continue;
        const px = parseFloat(cs.fontSize);
        if (px < 11.95) out.push(where + ': "' + n.textContent.trim().slice(0, 40) + '" at ' + px.toFixed(1) + ' px');
      }
    }
    for (const c of d.querySelectorAll('canvas[data-font-px]')) {
      const px = parseFloat(c.dataset.fontPx);
      if (px > 0 && px < 11.95 && c.getClientRects().length) out.push(where + ': ' + (c.id || c.parentElement.id || 'a canvas') + ' prints at ' + px + ' px');
      if (Number(c.dataset.labelRoom) < 0) out.push(where + ': ' + c.id + ' has ' + c.dataset.labelRoom + ' px of room for its labels');
    }
    for (const c of d.querySelectorAll('canvas[data-chip-left]')) {
      if (Number(c.dataset.contentRight) > Number(c.dataset.chipLeft)) out.push(where + ': a memory figure runs to ' + c.dataset.contentRight + ' px, the chip starts at ' + c.dataset.chipLeft);
    }
  }
  return out;
})()`

// TestBrowserWidgetLegibility: in every lesson's embedded widgets, at the
// lesson page's width on a laptop (1366×900) and an old projector
// (1024×768), no number is smaller than 12 px, the timeline's SM labels
// have their room, and naive's S and P squares keep clear of the chip's
// box; the side by side of a ragged run at 1024 px too.
func TestBrowserWidgetLegibility(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	ctx := browserSized(t, 1366, 900)
	problems := watchConsole(ctx)
	framesDone := `[...document.querySelectorAll('iframe')].every((f) => {
	  const d = f.contentDocument; const s = d && (d.getElementById('run-status') || d.getElementById('c-status'));
	  return s && /Trace complete|Both traces are in/.test(s.textContent);
	})`
	for _, sc := range []struct{ w, h int }{{1366, 900}, {1024, 768}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(sc.w), int64(sc.h))); err != nil {
			t.Fatal(err)
		}
		for _, l := range lessonSample(t, course) {
			framed := false
			for _, w := range l.Widgets {
				framed = framed || w.Framed()
			}
			if !framed {
				continue
			}
			navigate(ctx, t, base+"/lessons/"+l.Slug)
			evalJS[int](ctx, t, `(document.querySelectorAll('iframe').forEach((f) => { f.loading = 'eager'; }), 0)`)
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](framesDone, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				st := evalJS[[]string](ctx, t, `[...document.querySelectorAll('iframe')].map((f) => { const d = f.contentDocument; const s = d && (d.getElementById('run-status') || d.getElementById('c-status')); return f.src.slice(-80) + ' :: ' + (s ? s.textContent.slice(0, 80) : 'no status'); })`)
				t.Fatalf("%s at %d×%d: the frames did not finish their runs: %v\n%s", l.Slug, sc.w, sc.h, err, strings.Join(st, "\n"))
			}
			if p := evalJS[[]string](ctx, t, legibleJS); len(p) > 0 {
				t.Errorf("%s at %d×%d:\n%s", l.Slug, sc.w, sc.h, strings.Join(p, "\n"))
			}
		}
	}
	navigate(ctx, t, base+"/compare?"+strings.Replace(lessons.Runs["ragged-causal"].Query, "variant=flash2&", "", 1)+"&step=30")
	waitText(ctx, t, "#c-status", "Both traces are in")
	if p := evalJS[[]string](ctx, t, legibleJS); len(p) > 0 {
		t.Errorf("naive against flash at 1024×768:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the pages logged problems:\n%s", strings.Join(p, "\n"))
	}
}
