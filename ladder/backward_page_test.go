package ladder_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/templates"

	"golang.org/x/net/html"
)

// TestLadderPageShowsBackward: /ladder's backward table has a row for each
// row of the shipped backward bench, with its kv-tile, shape, time, speed,
// both SDPA backends' speeds and its ratio to each, and says where the
// figures come from: GPU, compiler, date, command and the hashes; above it,
// the rungs as a ladder (each rung's fastest tile per shape) beside SDPA.
func TestLadderPageShowsBackward(t *testing.T) {
	t.Parallel()
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	rec := tab.Backward
	if rec == nil {
		t.Fatal("no backward recording ships")
	}
	doc := ladderPage(t)
	sec := byTestID(doc, "ladder-backward")
	if sec == nil {
		t.Fatal("no backward section on /ladder")
	}
	if rows := countRows(byTestID(sec, "backward-tiles")); rows != len(rec.Rows) {
		t.Errorf("%d rows in the backward table, %d in the recording", rows, len(rec.Rows))
	}
	for _, r := range rec.Rows {
		row := byTestID(sec, "backward-"+r.Kernel)
		if row == nil {
			t.Errorf("%s has no row", r.Kernel)
			continue
		}
		shape := fmt.Sprintf("d=%d", r.D)
		if r.Causal {
			shape += ", causal"
		}
		kv := "64"
		if strings.Contains(r.Kernel, "_bc128_") {
			kv = "128"
		}
		want := strings.Join([]string{r.Kernel, kv, shape, strconv.FormatFloat(r.Ms, 'g', 3, 64), fmt.Sprintf("%.1f", r.TFLOPs),
			fmt.Sprintf("%.1f", *r.SDPAFlash), fmt.Sprintf("%.2f×", r.TFLOPs / *r.SDPAFlash),
			fmt.Sprintf("%.1f", *r.SDPACuDNN), fmt.Sprintf("%.2f×", r.TFLOPs / *r.SDPACuDNN)}, " | ")
		if got := cells(row); got != want {
			t.Errorf("%s's row reads %q, want %q", r.Kernel, got, want)
		}
	}
	// The ladder above it: each rung's fastest tile on each shape, then
	// SDPA's two backends.
	lad := byTestID(sec, "backward-ladder")
	if lad == nil {
		t.Fatal("no backward ladder on /ladder")
	}
	rungs := rec.Ladder()
	if rows := countRows(lad); rows != len(rungs)+2 {
		t.Errorf("%d rows in the backward ladder, want %d rungs and SDPA's two backends", rows, len(rungs))
	}
	for i, r := range rungs {
		want := []string{r.Variant.String()}
		for k, c := range r.Cells {
			cell := fmt.Sprintf("%.1f %.2f× FA2, %.2f× cuDNN", c.TFLOPs, c.TFLOPs/c.SDPAFlash, c.TFLOPs/c.SDPACuDNN)
			// Each rung after the first: its one idea's worth, over the row above.
			if i > 0 {
				cell += fmt.Sprintf(" %.2f× the row above", c.TFLOPs/rungs[i-1].Cells[k].TFLOPs)
			}
			want = append(want, cell)
		}
		if got := cells(byTestID(lad, "backward-rung-"+r.Variant.String())); got != strings.Join(want, " | ") {
			t.Errorf("the backward ladder's %s reads %q, want %q", r.Variant, got, strings.Join(want, " | "))
		}
	}
	var flash, cudnn []string
	for k := range ladder.Shapes {
		flash = append(flash, fmt.Sprintf("%.1f", rungs[0].Cells[k].SDPAFlash))
		cudnn = append(cudnn, fmt.Sprintf("%.1f", rungs[0].Cells[k].SDPACuDNN))
	}
	if got := cells(byTestID(lad, "backward-rung-sdpa-flash")); got != "SDPA, FlashAttention-2 | "+strings.Join(flash, " | ") {
		t.Errorf("the backward ladder's FlashAttention-2 row reads %q", got)
	}
	if got := cells(byTestID(lad, "backward-rung-sdpa-cudnn")); got != "SDPA, cuDNN | "+strings.Join(cudnn, " | ") {
		t.Errorf("the backward ladder's cuDNN row reads %q", got)
	}
	prov := byTestID(sec, "backward-provenance")
	if prov == nil {
		t.Fatal("the backward table does not say where its figures come from")
	}
	said := []string{rec.GPU, rec.NVCC, rec.Date, rec.Command, rec.KernelSha, rec.PTXSha}
	if len(rec.Hopper) < 2 {
		t.Errorf("the backward recording's Hopper rungs' hashes: %+v", rec.Hopper)
	}
	for _, h := range rec.Hopper {
		said = append(said, h.File, h.Sha, h.PTXSha)
	}
	for _, said := range said {
		if said == "" || !strings.Contains(text(prov), said) {
			t.Errorf("the backward table's provenance %q does not say %q", text(prov), said)
		}
	}
}

// A backward row without an SDPA backend's figure says so in its cells,
// and a kernel whose name carries no tile shows none.
func TestLadderBackwardMissingSDPA(t *testing.T) {
	t.Parallel()
	flash := 250.0
	rec := &ladder.BackwardRecord{GPU: "a GPU", Date: "2026-01-01", Command: "scripts/bench-backward 4096", KernelSha: "k", PTXSha: "p",
		Rows: []ladder.BackwardRow{{Kernel: "flash2_bwd_mma_d64", D: 64, Ms: 1, TFLOPs: 200, Check: "ok", SDPAFlash: &flash}}}
	var b bytes.Buffer
	if err := templates.LadderBackward(rec).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	row := byTestID(doc, "backward-flash2_bwd_mma_d64")
	if row == nil {
		t.Fatal("no row")
	}
	if got, want := cells(row), "flash2_bwd_mma_d64 | — | d=64 | 1 | 200.0 | 250.0 | 0.80× | not recorded | —"; got != want {
		t.Errorf("the row reads %q, want %q", got, want)
	}
}

// cells is the text of each cell of the row n, joined by " | ".
func cells(n *html.Node) string {
	var out []string
	for c := range n.ChildNodes() {
		if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
			out = append(out, text(c))
		}
	}
	return strings.Join(out, " | ")
}

// countRows counts the table rows under n's tbody.
func countRows(n *html.Node) int {
	k := 0
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && d.Data == "tr" && d.Parent != nil && d.Parent.Data == "tbody" {
			k++
		}
	}
	return k
}

// TestLadderPageShowsBackwardTried: under the backward rungs, a row for
// each idea tried at d = 64 and left out, and one for each of
// flash3_bwd_bulk's two ideas measured apart, in order: the idea, the rung
// it changed, its figures without and with it, what it made of the rung
// and the run and GPU that measured it.
func TestLadderPageShowsBackwardTried(t *testing.T) {
	t.Parallel()
	sec := byTestID(ladderPage(t), "ladder-backward")
	if sec == nil {
		t.Fatal("no backward section on /ladder")
	}
	for _, c := range []struct {
		table, row string
		ideas      []ladder.MeasuredIdea
	}{{"backward-tried", "tried", ladder.BackwardTried}, {"backward-bulk-ideas", "bulk-idea", ladder.BulkIdeas}} {
		table := byTestID(sec, c.table)
		if table == nil {
			t.Fatalf("no table %s", c.table)
		}
		var rows []*html.Node
		var walk func(n *html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "tr" {
				for _, a := range n.Attr {
					if a.Key == "data-testid" && a.Val == c.row {
						rows = append(rows, n)
					}
				}
			}
			for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
				walk(ch)
			}
		}
		walk(table)
		if len(rows) != len(c.ideas) {
			t.Fatalf("%s: %d rows, %d ideas in Go", c.table, len(rows), len(c.ideas))
		}
		for k, idea := range c.ideas {
			want := strings.Join([]string{idea.What, idea.On, fmt.Sprintf("%.1f → %.1f", idea.Before, idea.After),
				fmt.Sprintf("%.2f×", idea.After/idea.Before), idea.Run + ", " + idea.GPU}, " | ")
			if got := cells(rows[k]); got != want {
				t.Errorf("%s row %d reads %q, want %q", c.table, k, got, want)
			}
		}
	}
}
