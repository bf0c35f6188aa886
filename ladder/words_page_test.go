package ladder_test

import (
	"strings"
	"testing"

	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/recordings"

	"golang.org/x/net/html"
)

// TestLadderPageWords: /ladder shows no "Not built yet" heading while every
// rung is built (and lists the unbuilt ones when there are some); no raw
// Markdown backticks reach its prose, tables or notes (the code listings
// aside, which are the sources as written); and "Where the figures come
// from" shows each recording's command as code, which a checkpoint's line
// of plain text names without backticks.
func TestLadderPageWords(t *testing.T) {
	t.Parallel()
	doc := ladderPage(t)
	unbuilt := 0
	for _, r := range kernels.Ladder {
		if !r.Built {
			unbuilt++
		}
	}
	headed := false
	for d := range doc.Descendants() {
		if d.Type == html.ElementNode && d.Data == "h2" && text(d) == "Not built yet" {
			headed = true
		}
	}
	todo := byTestID(doc, "ladder-todo")
	switch {
	case unbuilt == 0 && (headed || todo != nil):
		t.Error(`every rung is built, and the page still shows a "Not built yet" heading or list`)
	case unbuilt > 0 && (!headed || todo == nil):
		t.Errorf("%d rungs are not built, and the page does not list them", unbuilt)
	}
	code := byTestID(doc, "ladder-code")
	if code == nil {
		t.Fatal("no code section")
	}
	code.Parent.RemoveChild(code)
	if s := text(doc); strings.Contains(s, "`") {
		i := strings.Index(s, "`")
		t.Errorf("a raw backtick on /ladder: …%s…", s[max(0, i-80):min(len(s), i+80)])
	}
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	src := byTestID(doc, "ladder-sources")
	if src == nil {
		t.Fatal(`no "Where the figures come from" list`)
	}
	var items []string
	for d := range src.Descendants() {
		if d.Type == html.ElementNode && d.Data == "li" {
			items = append(items, text(d))
		}
	}
	if len(items) != len(tab.Sources) {
		t.Fatalf("%d recordings listed, the table has %d", len(items), len(tab.Sources))
	}
	commands := 0
	for k, s := range tab.Sources {
		if items[k] != s.String() {
			t.Errorf("recording %d reads %q on the page, want %q", k, items[k], s.String())
		}
		if strings.Contains(s.What+s.Command, "`") {
			t.Errorf("recording %q carries Markdown backticks", s)
		}
		if s.Command == "" {
			continue
		}
		commands++
		found := false
		for d := range src.Descendants() {
			if d.Type == html.ElementNode && d.Data == "code" && text(d) == s.Command {
				found = true
			}
		}
		if !found {
			t.Errorf("the command %q is not shown as code", s.Command)
		}
	}
	if commands == 0 {
		t.Error("no recording names its command: the ladder bench's should")
	}
	for k, s := range tab.Recordings {
		if strings.Contains(s, "`") || s != tab.Sources[k].String() {
			t.Errorf("recording line %q: backticks, or not the source's words %q", s, tab.Sources[k])
		}
	}
}
