package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserNewRungs steps the recorded runs of rungs 1 and 3 in Chromium:
// each step says what that kernel does (naive_row's two passes, flash1's
// kv-tile-major order with O, m and l through device memory), and the row
// table shows what the kernel holds at that step.
func TestBrowserNewRungs(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	// naive_row, step 5: pass 1 over q-tile 1's second kv-tile.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?variant=naive_row&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5&step=5")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-title", "Pass 1: rows 4–7 × keys 4–7")
	waitText(ctx, t, "#rows", "Pass 1 takes only the row max")
	// The rung's own legend (kernels.Words) keeps the kernel's order.
	if legend := evalJS[string](ctx, t, `document.getElementById('grid-legend').textContent`); !regexp.MustCompile(`to do.*pass 1: row max taken.*pass 2: exp, l and O done.*this step`).MatchString(legend) {
		t.Errorf("naive_row's tile legend says %q", legend)
	}
	// The running max of each row is the largest score its pass-1 records
	// have shown; pass 2's first step then records it as m_old = m_new.
	pass1 := evalJS[string](ctx, t, `Array.from(document.querySelectorAll('#rows tbody tr')).map((r) => r.lastChild.textContent).join(',')`)
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('next').click()`)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-title", "Pass 2: rows 4–7 × keys 0–3")
	pass2 := evalJS[string](ctx, t, `Array.from(document.querySelectorAll('#rows tbody tr')).map((r) => r.cells[2].textContent).join(',')`)
	if pass1 == "" || pass1 != pass2 {
		t.Errorf("pass 1's running max %q, pass 2's m %q", pass1, pass2)
	}
	// flash1: after q-tile 0 (one kv-tile under the mask, then its epilogue)
	// comes kv-tile 0 of q-tile 1, not kv-tile 1 of any q-tile.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?variant=flash1&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5&step=3")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-title", "kv-tile 0 (cols 0–3) × q-tile 1")
	waitText(ctx, t, "#step-explain", "K₀ and V₀ stay in shared memory")
	waitText(ctx, t, "#step-explain", "This is Q₁'s first kv-tile")
	waitText(ctx, t, "#o-caption", "O₁, normalised by l at every step")
	if text := evalJS[string](ctx, t, `['step-title', 'step-explain', 'o-caption', 'rows-caption'].map((id) => document.getElementById(id).textContent).join(' ')`); strings.ContainsAny(text, "{}") {
		t.Errorf("a rung's words were left unfilled: %q", text)
	}
	legend := evalJS[string](ctx, t, `document.getElementById('grid-legend').textContent`)
	if !strings.Contains(legend, "written back to device memory") {
		t.Errorf("flash1's tile legend says %q", legend)
	}
}
