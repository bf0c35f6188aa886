package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"

	"github.com/chromedp/chromedp"
)

// TestBrowserBackwardStepper steps through a backward run in Chromium, on
// the CPU mirror, at a fresh seed: each step the page shows is the
// mirror's (title, tile, lit source), the rows table's L, D and sums of P
// are the trace's, a row's Σp so far is 1 once every kv-tile's block has
// visited it, the block's dP, dV_j, dK_j and dQ part are drawn, a dq step
// shows the finished dQ, and nothing on the page overflows or logs a
// problem.
func TestBrowserBackwardStepper(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	base, _ := startServer(t, "-worker", "none")
	ctx := browserSized(t, 1024, 768)
	problems := watchConsole(ctx)
	query := fmt.Sprintf("variant=flash2_bwd&n=9&d=4&br=2&bc=3&causal=1&pattern=normal&seed=%d", rng.Uint64())
	c, err := kernels.ParseConfig(mustQuery(query))
	if err != nil {
		t.Fatal(err)
	}
	steps := mirrorSteps(t, c)
	// Σp of row g over the steps up to k (from 0): the page's "so far".
	sumSoFar := func(k, g int) float64 {
		var s float64
		for _, r := range steps[:k+1] {
			if r.Kind == instrument.KindBwdStep && r.I == g/c.Br {
				for col := range r.ColsValid {
					s += float64(r.P[(g%c.Br)*c.Bc+col])
				}
			}
		}
		return s
	}
	// The steps to look at: a block's first (it loads K_j and V_j), a
	// random one, each q-tile's last step (where its rows' Σp reaches 1),
	// a pre and a dq.
	lastOf := map[int]int{}
	var looks []int
	for k, r := range steps {
		if r.Kind == instrument.KindBwdStep {
			lastOf[r.I] = k
		}
		if r.Kind == instrument.KindBwdStep && r.J == 1 && r.I == c.Bc/c.Br || k == 0 || k == len(steps)-1 {
			looks = append(looks, k)
		}
	}
	// Under -short, one q-tile's last step; in a full run every q-tile's,
	// and a random step besides.
	for i, k := range lastOf {
		if !testing.Short() || i == 1 {
			looks = append(looks, k)
		}
	}
	if !testing.Short() {
		looks = append(looks, c.Tr()+rng.IntN(len(steps)-2*c.Tr()))
	}
	// The first look opens the run's link at its step; the page then
	// moves to the others with its step slider, as a reader does.
	for n, k := range looks {
		r := steps[k]
		if n == 0 {
			navigate(ctx, t, fmt.Sprintf("%s/step?%s&step=%d", base, query, k+1))
			waitText(ctx, t, "#run-status", "Trace complete")
		} else {
			scrubTo(ctx, t, k+1)
		}
		waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k+1, len(steps)))
		// The source panel lights its lines once its source has arrived
		// (a fetch of its own); from then on each step lights them as it
		// is drawn.
		chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('kernel-source').dataset.lit !== undefined`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
		title := evalJS[string](ctx, t, `document.getElementById('step-title').textContent`)
		lit := evalJS[string](ctx, t, `document.getElementById('kernel-source').dataset.lit ?? ''`)
		switch r.Kind {
		case instrument.KindBwdStep:
			if !strings.Contains(title, fmt.Sprintf("kv-tile %d", r.J)) || !strings.Contains(title, fmt.Sprintf("q-tile %d", r.I)) {
				t.Errorf("step %d shows %q, the mirror's is (q-tile %d, kv-tile %d)", k+1, title, r.I, r.J)
			}
			first := r.I == c.Bc*r.J/c.Br
			if strings.Contains(lit, "load-kv") != first || !strings.Contains(lit, "dk") || !strings.Contains(lit, "dq") ||
				strings.Contains(lit, "write-dkdv") != (r.I == c.Tr()-1) {
				t.Errorf("step %d (q-tile %d, kv-tile %d) lights %q", k+1, r.I, r.J, lit)
			}
			for _, part := range []string{"dp", "dv", "dk", "dq"} {
				if !evalJS[bool](ctx, t, fmt.Sprintf(`!!document.querySelector('[data-testid="bwd-%s"] canvas')?.width`, part)) {
					t.Errorf("step %d: no %s drawn", k+1, part)
				}
			}
			for x := range r.RowsValid {
				g := r.I*c.Br + x
				got := cellValue(ctx, t, fmt.Sprintf("sum-p-so-far-%d", x))
				want := sumSoFar(k, g)
				if !(math.Abs(got-want) <= 1e-5) {
					t.Errorf("step %d row %d: Σp so far %v, the trace's %v", k+1, g, got, want)
				}
				if k == lastOf[r.I] && !(math.Abs(got-1) <= 1e-5) {
					t.Errorf("step %d is q-tile %d's last: row %d's Σp so far is %v, not 1", k+1, r.I, g, got)
				}
			}
		case instrument.KindBwdPre:
			if !strings.Contains(title, fmt.Sprintf("Preprocessing q-tile %d", r.I)) || lit != "pre" {
				t.Errorf("step %d, q-tile %d's pre: title %q, lit %q", k+1, r.I, title, lit)
			}
			for x := range r.RowsValid {
				if got := cellValue(ctx, t, fmt.Sprintf("d-%d", x)); float32(got) != r.Delta[x] {
					t.Errorf("pre of q-tile %d row %d: D shown %v, the trace's %v", r.I, x, got, r.Delta[x])
				}
				if got := cellValue(ctx, t, fmt.Sprintf("l-%d", x)); float32(got) != r.LSE[x] {
					t.Errorf("pre of q-tile %d row %d: L shown %v, the trace's %v", r.I, x, got, r.LSE[x])
				}
			}
		case instrument.KindBwdDQ:
			caption := evalJS[string](ctx, t, `document.getElementById('o-caption').textContent`)
			if !strings.Contains(title, fmt.Sprintf("dQ of q-tile %d finished", r.I)) || !strings.Contains(caption, "dQ") || lit != "dq-scale" {
				t.Errorf("step %d, q-tile %d's dq: title %q, caption %q, lit %q", k+1, r.I, title, caption, lit)
			}
		}
		if p := layoutProblems(ctx, t); len(p) > 0 {
			t.Errorf("step %d:\n%s", k+1, strings.Join(p, "\n"))
		}
		if r.Kind == instrument.KindBwdStep && k == lastOf[1] {
			saveShot(ctx, t, "stepper-backward.png")
		}
	}
	// The kv-tile box jumps to a block's first step.
	scrubTo(ctx, t, 1)
	waitText(ctx, t, "#step-label", fmt.Sprintf("1 / %d", len(steps)))
	evalJS[bool](ctx, t, `(() => { const s = document.getElementById('sel-q'); s.value = 'kv2'; s.dispatchEvent(new Event('change')); return true; })()`)
	want := 0
	for k, r := range steps {
		if r.Kind == instrument.KindBwdStep && r.J == 2 {
			want = k
			break
		}
	}
	waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", want+1, len(steps)))

	// The naive backward, which reads the forward's P back: a step of each
	// of its phases says which it is, shows what it read and wrote, and its
	// rows' D is the trace's.
	naive := strings.Replace(query, "flash2_bwd", "naive_bwd", 1)
	nc, _ := kernels.ParseConfig(mustQuery(naive))
	nsteps := mirrorSteps(t, nc)
	seen := map[instrument.Kind]bool{}
	for k, r := range nsteps {
		// Under -short, the two phases with numbers to check (D, and the
		// tiles read back); in a full run all four.
		if seen[r.Kind] || (r.Kind == instrument.KindBwdKV && r.J == 0) ||
			testing.Short() && r.Kind != instrument.KindBwdDS && r.Kind != instrument.KindBwdKV {
			continue
		}
		if len(seen) == 0 {
			navigate(ctx, t, fmt.Sprintf("%s/step?%s&step=%d", base, naive, k+1))
			waitText(ctx, t, "#run-status", "Trace complete")
		} else {
			scrubTo(ctx, t, k+1)
		}
		seen[r.Kind] = true
		waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k+1, len(nsteps)))
		want := map[instrument.Kind][2]string{instrument.KindBwdDP: {"phase 1", "dp"}, instrument.KindBwdDS: {"phase 2", "ds"},
			instrument.KindBwdDQ: {"phase 3", "dq"}, instrument.KindBwdKV: {"phase 4", "dkv"}}[r.Kind]
		// The source panel lights its lines after the step is drawn (its
		// source arrives on its own): wait for it, then read what it says.
		chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('kernel-source').dataset.lit === %q`, want[1]),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
		title := evalJS[string](ctx, t, `document.getElementById('step-title').textContent`)
		lit := evalJS[string](ctx, t, `document.getElementById('kernel-source').dataset.lit ?? ''`)
		if !strings.Contains(title, want[0]) || lit != want[1] {
			t.Errorf("naive_bwd step %d (%s): title %q, lit %q", k+1, r.Kind, title, lit)
		}
		if r.Kind == instrument.KindBwdKV {
			saveShot(ctx, t, "stepper-naive-backward.png")
			explain := evalJS[string](ctx, t, `document.getElementById('step-explain').textContent`)
			if strings.Contains(explain, "start at zero") != (r.I == 0) {
				t.Errorf("naive_bwd step %d (q-tile %d of kv-tile %d's walk) says %q", k+1, r.I, r.J, explain)
			}
			caption := evalJS[string](ctx, t, `document.getElementById('p-caption').textContent`)
			if !strings.Contains(caption, "read back") || !evalJS[bool](ctx, t, `!!document.querySelector('[data-testid="bwd-dk"] canvas')?.width`) {
				t.Errorf("naive_bwd step %d: P caption %q, or no dK drawn", k+1, caption)
			}
		}
		if r.Kind == instrument.KindBwdDS {
			for x := range r.RowsValid {
				if got := cellValue(ctx, t, fmt.Sprintf("d-%d", x)); float32(got) != r.Delta[x] {
					t.Errorf("naive_bwd D of row %d: shown %v, the trace's %v", r.I*nc.Br+x, got, r.Delta[x])
				}
			}
		}
		if p := layoutProblems(ctx, t); len(p) > 0 {
			t.Errorf("naive_bwd step %d:\n%s", k+1, strings.Join(p, "\n"))
		}
	}
	if want := map[bool]int{true: 2, false: 4}[testing.Short()]; len(seen) != want {
		t.Errorf("naive_bwd's steps looked at: %v", seen)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserCompareBackwardPair: the side by side of the backward pair on
// the CPU mirror: the naive backward's pane holds P, dP and dS (N×N each) in
// device memory and flash's none, by the end the naive backward has written
// more to device memory than flash (the ratio names it), and the two
// backwards' gradients agree to float32 rounding, every element.
func TestBrowserCompareBackwardPair(t *testing.T) {
	t.Parallel()
	longOnly(t)
	rng := testrand.New(t)
	base, _ := startServer(t, "-worker", "none")
	ctx := browserSized(t, 1024, 768)
	problems := watchConsole(ctx)
	navigate(ctx, t, fmt.Sprintf("%s/compare?pair=bwd&n=48&d=8&br=8&bc=8&causal=1&pattern=normal&seed=%d", base, rng.Uint64()))
	waitText(ctx, t, "#c-status", "Both traces are in")
	waitText(ctx, t, "[data-testid=c-run-summary]", "the backward pass")
	evalJS[bool](ctx, t, `(() => { const s = document.getElementById('c-scrub'); s.value = String(Math.round(s.max / 2)); s.dispatchEvent(new Event('input')); return true; })()`)
	saveShot(ctx, t, "compare-backward.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("c-last"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#c-progress", "finishing: 100%")
	waitText(ctx, t, "[data-testid=naive-buffer]", "P, dP and dS: 3 ×")
	waitText(ctx, t, "[data-testid=flash2-buffer]", "none N×N")
	waitText(ctx, t, "#pane-naive .memory-figure figcaption", "Where P, dP and dS live")
	if r := evalJS[string](ctx, t, `document.getElementById('c-ratio').textContent`); !strings.HasSuffix(r, "×") {
		t.Errorf("ratio %q", r)
	} else if x, err := strconv.ParseFloat(strings.TrimSuffix(r, "×"), 64); err != nil || !(x > 1) {
		t.Errorf("the naive backward wrote %s of flash's bytes", r)
	}
	for _, g := range []string{"dq", "dk", "dv"} {
		s := evalJS[string](ctx, t, fmt.Sprintf(`document.querySelector('[data-testid="diff-%s"]')?.textContent ?? 'missing'`, g))
		if v, err := strconv.ParseFloat(s, 64); err != nil || !(v < 1e-4) {
			t.Errorf("max |%s_flash − %s_naive| = %s", g, g, s)
		}
	}
	if p := layoutProblems(ctx, t); len(p) > 0 {
		t.Errorf("backward pair:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// scrubTo moves the stepper to step k (from 1) with its step slider, as a
// reader dragging it does: the page draws it as it draws a step its link
// opens at.
func scrubTo(ctx context.Context, t *testing.T, k int) {
	t.Helper()
	evalJS[bool](ctx, t, fmt.Sprintf(`(() => { const s = document.getElementById('scrub'); s.value = '%d'; s.dispatchEvent(new Event('input')); return true; })()`, k))
}
