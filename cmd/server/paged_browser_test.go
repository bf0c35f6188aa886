package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
)

// TestBrowserPagedCache: a paged run's stepper shows the block table of
// the step's sequence, every entry the page kernels.PageOf gives it, the
// page the step reads lit in the table and in the pool, the sequence's
// pages marked in the pool; on a merge, no page lit.
func TestBrowserPagedCache(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	c := kernels.Config{Variant: instrument.VariantDecodePaged, N: 65 + rng.IntN(640), Nq: 1, D: 64, Br: 1, Bc: 64, Batch: 2 + rng.IntN(2),
		Heads: 4, KVHeads: 1 << rng.IntN(3), Pattern: instrument.PatternNormal, Seed: rng.Uint64()}
	steps := mirrorSteps(t, c)
	var flash, merge []int
	for k, r := range steps {
		switch r.Kind {
		case instrument.KindFlashStep:
			flash = append(flash, k)
		case instrument.KindMerge:
			merge = append(merge, k)
		}
	}
	type shown struct {
		Caption, Current, Pool, Note string
		Entries, Mine, Cells         int
		Table                        []string
	}
	look := func(k int) shown {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?"+c.Values().Encode()+fmt.Sprintf("&step=%d", k+1))); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#run-status", "Trace complete")
		waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k+1, len(steps)))
		s, err := chromedp.Run(ctx, chromedp.Evaluate[shown](`(() => {
			const q = (s) => document.querySelector(s), all = (s) => [...document.querySelectorAll(s)];
			return { Caption: q('#pages-caption')?.textContent ?? '', Current: q('#page-table .page-entry.current .page-p')?.textContent ?? '',
				Pool: q('#page-pool .pool-page.current')?.textContent ?? '', Note: q('#pages-note')?.textContent ?? '',
				Entries: all('#page-table .page-entry').length, Mine: all('#page-pool .pool-page.mine').length,
				Cells: all('#page-pool .pool-page').length, Table: all('#page-table .page-p').map((e) => e.textContent) };
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	k := flash[rng.IntN(len(flash))]
	r := steps[k]
	b := r.BH / c.Heads
	got := look(k)
	page := kernels.PageOf(&c, b, r.J)
	if got.Current != fmt.Sprintf("page %d", page) || got.Pool != fmt.Sprint(page) {
		t.Errorf("step %d (batch-head %d, kv-tile %d): the table lights %q and the pool %q, want page %d", k+1, r.BH, r.J, got.Current, got.Pool, page)
	}
	if got.Entries != c.Tc() || got.Mine != c.Tc() || got.Cells != kernels.Pages(&c) || !strings.Contains(got.Caption, fmt.Sprintf("sequence %d", b)) {
		t.Errorf("step %d: %q, %d entries, %d of %d pool cells marked; want sequence %d's %d of %d", k+1, got.Caption, got.Entries, got.Mine, got.Cells, b, c.Tc(), kernels.Pages(&c))
	}
	for j, p := range got.Table {
		if want := fmt.Sprintf("page %d", kernels.PageOf(&c, b, j)); p != want {
			t.Errorf("sequence %d's entry %d is %q, want %q", b, j, p, want)
		}
	}
	if !strings.Contains(got.Note, fmt.Sprintf("kv-tile %d of sequence %d: the table says page %d", r.J, b, page)) {
		t.Errorf("step %d's note: %q", k+1, got.Note)
	}
	// Stepping on within the page moves the marks: one entry lit at most,
	// the next step's.
	if k+1 < len(steps) {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("next"))); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k+2, len(steps)))
		lit, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#page-table .page-entry.current .page-p, #page-pool .pool-page.current')].map((e) => e.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{}
		if n := steps[k+1]; n.Kind == instrument.KindFlashStep {
			p := kernels.PageOf(&c, n.BH/c.Heads, n.J)
			want = []string{fmt.Sprintf("page %d", p), fmt.Sprint(p)}
		}
		if fmt.Sprint(lit) != fmt.Sprint(want) {
			t.Errorf("step %d, reached by stepping on: lit %q, want %q", k+2, lit, want)
		}
	}
	m := look(merge[rng.IntN(len(merge))])
	if m.Current != "" || m.Pool != "" || m.Entries != c.Tc() || !strings.Contains(m.Note, "reads no page") {
		t.Errorf("on a merge the table lights %q, the pool %q (%d entries): %q", m.Current, m.Pool, m.Entries, m.Note)
	}
	// A lesson's frame that names the panel (panels=grid,pages) shows it.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?"+c.Values().Encode()+fmt.Sprintf("&embed=1&panels=grid,pages&step=%d", k+1))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#pages-note", fmt.Sprintf("kv-tile %d of sequence %d", r.J, b))
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const r = document.querySelector('#page-table')?.getBoundingClientRect(); return !!r && r.width > 0 && r.height > 0; })()`))
	if err != nil || !visible {
		t.Errorf("a frame with panels=grid,pages does not show the block table (%v)", err)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("console: %v", p)
	}
}
