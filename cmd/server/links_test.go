package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flashstep/lessons"

	"golang.org/x/net/html"
)

// TestEveryInternalLinkAnswers fetches every page a student reaches (the
// home page, the course map, every lesson, the glossary, the tools) and
// every link and frame of this site on them: each answers 200. No browser:
// the links are in the HTML the server sends.
func TestEveryInternalLinkAnswers(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t, "-worker", "none")
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"/", "/lessons", "/glossary", "/playground", "/ladder", "/sweep", "/kernels", "/compare", "/step"}
	for _, l := range course.Lessons {
		pages = append(pages, "/lessons/"+l.Slug)
	}
	links := map[string]string{} // link -> the page it is on
	for _, p := range pages {
		body := fetch(t, base+p)
		doc, err := html.Parse(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for n := range doc.Descendants() {
			if n.Type != html.ElementNode {
				continue
			}
			for _, a := range n.Attr {
				// A lesson's frame names its page in data-src (given as src
				// when the lesson wants it) and its base in data-base-src.
				if (a.Key == "href" && n.Data == "a") || (n.Data == "iframe" && (a.Key == "src" || a.Key == "data-src" || a.Key == "data-base-src")) {
					u, err := url.Parse(a.Val)
					if err != nil || u.Host != "" || strings.HasPrefix(a.Val, "#") || u.Scheme != "" {
						continue // another site's, or an anchor on this page
					}
					ref, _ := url.Parse(base + p)
					abs := ref.ResolveReference(u)
					if _, seen := links[abs.RequestURI()]; !seen {
						links[abs.RequestURI()] = p
					}
				}
			}
		}
	}
	if len(links) < 50 {
		t.Fatalf("only %d links found: the pages have lost their links, or the parse its way", len(links))
	}
	for link, from := range links {
		res, err := http.Get(base + link)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s (linked from %s): %d", link, from, res.StatusCode)
		}
	}
	t.Logf("%d internal links of %d pages answer 200", len(links), len(pages))
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%s: %d %v", u, res.StatusCode, err)
	}
	return body
}
