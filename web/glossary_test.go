package web

import (
	"strings"
	"testing"

	"flashstep/lessons"
	"flashstep/runner"

	"golang.org/x/net/html"
)

// TestGlossaryIsLinked: /glossary is reached from the navigation of every
// page (and marked there as the page shown), from the home page and from
// the course map; and it lists every term in the glossary's order.
func TestGlossaryIsLinked(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	links := func(doc *html.Node, under func(*html.Node) bool) []*html.Node {
		var out []*html.Node
		for n := range doc.Descendants() {
			if n.Type == html.ElementNode && n.Data == "a" && attr(n, "href") == "/glossary" && under(n) {
				out = append(out, n)
			}
		}
		return out
	}
	inNav := func(n *html.Node) bool {
		for p := n.Parent; p != nil; p = p.Parent {
			if p.Type == html.ElementNode && p.Data == "nav" {
				return true
			}
		}
		return false
	}
	inMain := func(n *html.Node) bool {
		for p := n.Parent; p != nil; p = p.Parent {
			if p.Type == html.ElementNode && p.Data == "main" {
				return true
			}
		}
		return false
	}
	for _, path := range []string{"/", "/lessons", "/lessons/hopper", "/glossary", "/ladder", "/step"} {
		res, body := get(t, ts.URL+path)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		doc := parse(t, body)
		nav := links(doc, inNav)
		if len(nav) != 1 {
			t.Errorf("%s: %d links to /glossary in the navigation, want 1", path, len(nav))
		} else if active := strings.Contains(" "+attr(nav[0], "class")+" ", " active "); active != (path == "/glossary") {
			t.Errorf("%s: the glossary's navigation entry is active: %v", path, active)
		}
		if (path == "/" || path == "/lessons") && len(links(doc, inMain)) == 0 {
			t.Errorf("%s links the glossary from nowhere in its body", path)
		}
	}
	_, body := get(t, ts.URL+"/glossary")
	var ids []string
	for n := range parse(t, body).Descendants() {
		if n.Type == html.ElementNode && strings.Contains(" "+attr(n, "class")+" ", " glossary-entry ") {
			ids = append(ids, attr(n, "id"))
		}
	}
	if len(ids) != len(lessons.Glossary) {
		t.Fatalf("/glossary shows %d entries; the glossary has %d", len(ids), len(lessons.Glossary))
	}
	for k, term := range lessons.Glossary {
		if ids[k] != term.ID {
			t.Errorf("entry %d is %s; the glossary's order has %s", k, ids[k], term.ID)
			break
		}
	}
}

// TestHomeSaysWhereTheCourseEnds: the home page and the course map say the
// course ends where it does, with the closing check (after the backward
// pass and debugging), not with "why FlashAttention is fast".
func TestHomeSaysWhereTheCourseEnds(t *testing.T) {
	t.Parallel()
	c, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	last := c.Lessons[len(c.Lessons)-1]
	if last.Slug != "check" {
		t.Fatalf("the course ends with %q, not the closing check: say so on the home page and the course map, and here", last.Slug)
	}
	_, ts := newTestServer(t, runner.Mirror{})
	for _, path := range []string{"/", "/lessons"} {
		_, body := get(t, ts.URL+path)
		s := strings.Join(strings.Fields(text(parse(t, body))), " ")
		for _, want := range []string{"backward pass", "debugging a FlashAttention loop", "closing check"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s does not say the course takes %q", path, want)
			}
		}
		if strings.Contains(s, "ends with why FlashAttention is fast") || strings.Contains(s, "to why FlashAttention is fast and exact.") {
			t.Errorf("%s still says the course ends with why FlashAttention is fast", path)
		}
	}
}
