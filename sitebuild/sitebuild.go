// Package sitebuild writes the static site (`make site`): every page a
// server in site mode renders (web.Deps.Site), saved as files a static
// host serves as they are, beside the browser's files, the recordings as
// files, the fixed answers of the read-only APIs as data files, and the
// WebAssembly (built by make from cmd/sitewasm). The pages are the
// server's own, fetched from its handler without a network; a page at
// path P is P/index.html, so that /lessons/attention works on any host.
package sitebuild

import (
	"bytes"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Site is what to write.
type Site struct {
	Handler http.Handler // a web.Server in site mode
	// Pages are the paths to save: pages (HTML, as P/index.html) and
	// files a page fetches by its own path (a lab's grade.js, saved as is).
	Pages []string
	// Data maps a read-only API's path to the file of the site that holds
	// its answer (data/…json), which the pages read instead.
	Data map[string]string
	// Static is the browser's files, served under /static/.
	Static fs.FS
	// Recordings are the recorded traces, written under recordings/.
	Recordings map[string][]byte
	// Base is the path the site is served under, "/" or "/flashstep/".
	Base string
}

// marker names a folder as one Write made, which a later Write may empty.
const marker = ".flashstep-site"

// Write writes the site into dir, which it empties first: a folder Write
// made (it holds the marker file), or one that is empty or absent. Any
// other folder is refused, so that a mistyped SITE never wipes sources.
func Write(dir string, s Site) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return fmt.Errorf("%s holds files and is not a site make site wrote (no %s): refusing to empty it", dir, marker)
		}
	}
	if s.Base == "" {
		s.Base = "/"
	}
	if !strings.HasPrefix(s.Base, "/") || !strings.HasSuffix(s.Base, "/") {
		return fmt.Errorf("base %q: a path that starts and ends with /, such as /flashstep/", s.Base)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	put := func(rel string, b []byte) error {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	for _, p := range s.Pages {
		b, ctype, err := get(s.Handler, p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(ctype, "text/html") {
			if err := put(path.Join(p, "index.html"), Rebase(b, s.Base)); err != nil {
				return err
			}
			continue
		}
		if err := put(p, b); err != nil {
			return err
		}
	}
	for api, file := range s.Data {
		b, _, err := get(s.Handler, api)
		if err != nil {
			return err
		}
		if err := put(file, b); err != nil {
			return err
		}
	}
	err := fs.WalkDir(s.Static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := fs.ReadFile(s.Static, p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".css") {
			b = Rebase(b, s.Base)
		}
		return put("static/"+p, b)
	})
	if err != nil {
		return err
	}
	for name, b := range s.Recordings {
		if err := put("recordings/"+name, b); err != nil {
			return err
		}
	}
	return put(marker, []byte("written by make site (package sitebuild); make site empties this folder\n"))
}

// get is one GET of the handler, which must answer 200.
func get(h http.Handler, p string) ([]byte, string, error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
	if rec.Code != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: %d %.200s", p, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), rec.Header().Get("Content-Type"), nil
}

// rooted are the attributes and CSS urls that name a path of the site
// from its root: href="/…", src="/…", action="/…", url(/…). The pattern
// has no word boundary on purpose: a lesson frame's data-src (the page it
// is given when wanted) and data-base-src end in src=" and are rebased too.
var rooted = regexp.MustCompile(`((?:href|src|action)=")/([^/"]|")|(url\(['"]?)/([^/])`)

// pageLink is a link attribute's path of the site, up to its query,
// fragment or end.
var pageLink = regexp.MustCompile(`((?:href|src|action)=")([^"?#]*)([?#"])`)

// Rebase moves a page's root-relative links under base ("/flashstep/"),
// gives a page's path the slash of its folder (the site's /step is
// step/index.html, and a static host answers /step?… with a redirect
// that some drop the query of), and names base in the page (<meta
// name="fs-base">) for its scripts, which build their own paths from it
// (static/js/site.js).
func Rebase(b []byte, base string) []byte {
	b = pageLink.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := pageLink.FindSubmatch(m)
		p := string(sub[2])
		last := p[strings.LastIndex(p, "/")+1:]
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasSuffix(p, "/") || strings.Contains(last, ".") || p == "" {
			return m
		}
		return []byte(string(sub[1]) + p + "/" + string(sub[3]))
	})
	if base != "/" {
		b = rooted.ReplaceAllFunc(b, func(m []byte) []byte {
			sub := rooted.FindSubmatch(m)
			if len(sub[1]) > 0 {
				return append(append(append([]byte{}, sub[1]...), base...), sub[2]...)
			}
			return append(append(append([]byte{}, sub[3]...), base...), sub[4]...)
		})
	}
	return bytes.Replace(b, []byte("<head>"), []byte(`<head><meta name="fs-base" content="`+base+`">`), 1)
}

// LinkQueries are the queries of every link to page ("step", "compare")
// in the pages written under dir (the lessons' frames, the home page's
// starters), as the browser's location.search will hold them: what the
// site answers from a file rather than its WebAssembly.
func LinkQueries(dir, page string) ([]string, error) {
	link := regexp.MustCompile(`(?:href|src)="[^"?]*/` + regexp.QuoteMeta(page) + `/\?([^"]+)"`)
	seen := map[string]bool{}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range link.FindAllSubmatch(b, -1) {
			q := html.UnescapeString(string(m[1]))
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
		return nil
	})
	return out, err
}

// Put writes one more file of the site, path relative to its root.
func Put(dir, rel string, b []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}
