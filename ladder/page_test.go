package ladder_test

// The ladder page as the server serves it: this test lives here, outside
// package web, because it is about the ladder's code sections, and package
// ladder_test may import web (which imports ladder).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/runner"
	"flashstep/sweep"
	"flashstep/web"
	"flashstep/worker"

	"golang.org/x/net/html"
)

// engines is the CPU mirror, with no GPU and no recorded runs.
type engines struct{ runner.Runner }

func (e engines) Route(c kernels.Run) runner.Route {
	return runner.Route{Engine: instrument.SourceCPUMirror, Key: c.Key(), Says: "the test runner",
		Run: func(ctx context.Context, emit func([]byte) error) error { return e.Runner.Run(ctx, c, emit) }}
}
func (engines) GPUHello() (worker.Hello, bool)     { return worker.Hello{}, false }
func (engines) AllRecordings() []*runner.Recording { return nil }

func byTestID(n *html.Node, id string) *html.Node {
	for d := range n.Descendants() {
		if d.Type != html.ElementNode {
			continue
		}
		for _, a := range d.Attr {
			if a.Key == "data-testid" && a.Val == id {
				return d
			}
		}
	}
	return nil
}

func hasClass(n *html.Node, class string) bool {
	for _, a := range n.Attr {
		if a.Key == "class" && strings.Contains(" "+a.Val+" ", " "+class+" ") {
			return true
		}
	}
	return false
}

// countClass counts the elements under n with the class.
func countClass(n *html.Node, class string) int {
	k := 0
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && hasClass(d, class) {
			k++
		}
	}
	return k
}

// countChildDivs counts the lines of the code box under n: the divs in its
// element of class code-lines.
func countChildDivs(n *html.Node) int {
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && hasClass(d, "code-lines") {
			k := 0
			for c := range d.ChildNodes() {
				if c.Type == html.ElementNode && c.Data == "div" {
					k++
				}
			}
			return k
		}
	}
	return -1
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// TestLadderPageShowsCodeAndDiffs: /ladder has, for every built rung and the
// naive_mma partner, its whole source under its file's name, and for every
// one with a rung below a diff from it whose summary counts the coloured
// lines.
func TestLadderPageShowsCodeAndDiffs(t *testing.T) {
	t.Parallel()
	doc := ladderPage(t)
	if byTestID(doc, "ladder-code") == nil {
		t.Fatal("no code section")
	}
	rungs := []kernels.Rung{}
	for _, r := range kernels.Ladder {
		if r.Built {
			rungs = append(rungs, r)
		}
	}
	rungs = append(rungs, kernels.NaiveMMA)
	codes := ladder.Codes()
	diffs := 0
	for _, r := range rungs {
		sec := byTestID(doc, "code-"+r.Name)
		if sec == nil {
			t.Errorf("%s has no code section", r.Name)
			continue
		}
		c := codes[r.Name]
		src := byTestID(sec, "source")
		if c.Missing != "" {
			if src != nil || byTestID(sec, "no-source") == nil {
				t.Errorf("%s has no source file, and its section does not say so", r.Name)
			}
		} else if src == nil || !strings.Contains(text(src), c.File) || countChildDivs(src) != len(c.Lines) {
			t.Errorf("%s: source section missing or not the whole of %s (%d lines)", r.Name, c.File, len(c.Lines))
		}
		d := byTestID(sec, "diff")
		if c.Below == nil {
			if d != nil {
				t.Errorf("%s, the first rung, shows a diff", r.Name)
			}
			continue
		}
		if !c.HasDiff() {
			if d != nil || byTestID(sec, "no-diff") == nil {
				t.Errorf("%s: no diff to show (%s), and the section does not say so", r.Name, c.DiffMissing)
			}
			continue
		}
		diffs++
		if d == nil || d.Data != "details" {
			t.Errorf("%s has a rung below, %s, and no diff section", r.Name, c.Below.Name)
			continue
		}
		var summary *html.Node
		for s := range d.Descendants() {
			if s.Type == html.ElementNode && s.Data == "summary" {
				summary = s
				break
			}
		}
		want := fmt.Sprintf("Diff from rung %d (%s) +%d −%d lines", c.Below.Number, c.Below.Name, c.Added, c.Removed)
		if summary == nil || text(summary) != want {
			t.Errorf("%s: diff summary %q, want %q", r.Name, text(summary), want)
		}
		if a, rm := countClass(d, "add"), countClass(d, "del"); a != c.Added || rm != c.Removed || countClass(d, "hunk") != len(c.Hunks) {
			t.Errorf("%s: %d added, %d removed lines shown; the diff has +%d −%d", r.Name, a, rm, c.Added, c.Removed)
		}
	}
	// naive_mma's diff from naive at least, whatever else is built.
	if diffs == 0 {
		t.Error("no diffs on the page")
	}
}

// ladderPage serves /ladder from a server on the CPU mirror and parses it.
func ladderPage(t *testing.T) *html.Node {
	t.Helper()
	sweeps := sweep.NewManager(map[instrument.Source]sweep.Executor{instrument.SourceCPUMirror: sweep.CPU{}})
	t.Cleanup(sweeps.Close)
	app := web.NewServer(web.Deps{Engines: engines{runner.Mirror{}}, Sweeps: sweeps, Static: fstest.MapFS{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(app)
	t.Cleanup(ts.Close)
	res, err := http.Get(ts.URL + "/ladder")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/ladder: %d", res.StatusCode)
	}
	doc, err := html.Parse(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
