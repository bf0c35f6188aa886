package main

import (
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// buildSite writes the static site as make site does (scripts/site): the
// pages, then the WebAssembly and Go's wasm_exec.js beside it.
func buildSite(t *testing.T, base string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	if err := writeSite(dir, base); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "wasm", "site.wasm"), "flashstep/cmd/sitewasm")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/sitewasm: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(goEnvRoot(t), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm", "wasm_exec.js"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// staticHost serves dir as static hosts do (Go's http.FileServer, with a
// folder's redirect to its trailing slash keeping the query, as GitHub
// Pages and python3 -m http.server do), under base, and notes every
// request that names an API or that no file answers.
func staticHost(t *testing.T, dir, base string) (url string, bad func() []string, asked func(suffix string) int) {
	t.Helper()
	var mu sync.Mutex
	var problems, all []string
	files := http.StripPrefix(strings.TrimSuffix(base, "/"), http.FileServer(http.Dir(dir)))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		rel := strings.TrimPrefix(r.URL.Path, base)
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil && fi.IsDir() && rel != "" && !strings.HasSuffix(rel, "/") {
			u := *r.URL
			u.Path += "/"
			http.Redirect(rec, r, u.RequestURI(), http.StatusMovedPermanently)
		} else if !strings.HasPrefix(r.URL.Path, base) {
			http.NotFound(rec, r)
		} else {
			files.ServeHTTP(rec, r)
		}
		p := strings.TrimPrefix(r.URL.Path, strings.TrimSuffix(base, "/"))
		mu.Lock()
		all = append(all, p)
		mu.Unlock()
		if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/ws/") || rec.status == http.StatusNotFound {
			mu.Lock()
			problems = append(problems, fmt.Sprintf("%d %s", rec.status, r.URL.RequestURI()))
			mu.Unlock()
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL + base, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), problems...) },
		func(suffix string) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, p := range all {
				if strings.HasSuffix(p, suffix) {
					n++
				}
			}
			return n
		}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// The static site as a new user opens it, built as make site builds it
// (every link of every page resolving: checkSiteLinks) and served by a
// static file server with no flashstep server: a lesson's
// frames drawn from recordings without the WebAssembly; a checkpoint,
// graded against its run's recording, graded in the page; a stepper run
// no recording holds computed in the browser's WebAssembly and stepped;
// no request to an API and no 404. Under a sub-path, as a project's GitHub
// Pages serves it. make test-long also walks every page of the site and
// opens the side by side (about 30 s more of two cores).
func TestBrowserStaticSite(t *testing.T) {
	t.Parallel()
	const base = "/flashstep/"
	dir := buildSite(t, base)
	checkSiteLinks(t, dir, base)
	site, bad, asked := staticHost(t, dir, base)
	ctx := browserSized(t, 1366, 900)
	problems := watchConsole(ctx)
	if !testing.Short() {
		pages, err := sitePages()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pages {
			if strings.HasSuffix(p, ".js") || strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".txt") || strings.HasSuffix(p, "/solution") {
				continue
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(site+strings.TrimPrefix(p, "/")),
				chromedp.Evaluate[chromedp.Void](`for (const f of document.querySelectorAll('iframe')) f.loading = 'eager'; window.scrollTo(0, document.body.scrollHeight)`),
				chromedp.Sleep(300*time.Millisecond)); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		walked := problems
		ctx = browserSized(t, 1366, 900)
		fresh := watchConsole(ctx)
		problems = func() []string { return append(walked(), fresh()...) }
	}
	// Recorded runs open without the WebAssembly: a fresh tab on lesson 4,
	// its frames drawn from recordings, has not asked for it.
	before := asked("wasm/site.wasm")
	if err := chromedp.Do(ctx, chromedp.Navigate(site+"lessons/tiling"),
		chromedp.Evaluate[chromedp.Void](`for (const f of document.querySelectorAll('iframe')) f.loading = 'eager'`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('figure.widget iframe')].every((f) => (f.contentDocument?.getElementById('run-status')?.textContent || '').includes('Trace complete'))`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Errorf("lesson 4's frames did not finish: %v", err)
	}
	if n := asked("wasm/site.wasm") - before; n > 0 {
		t.Errorf("the site asked for its WebAssembly %d times before lesson 4 needed it (every run there is recorded)", n)
	}
	// A checkpoint graded against its run's recording (lesson 4's first),
	// which the WebAssembly grades.
	if err := chromedp.Do(ctx, chromedp.WaitEnabled(chromedp.CSS(`section.checkpoint [data-action=reveal]`)), chromedp.Click(chromedp.CSS(`section.checkpoint [data-action=reveal]`))); err != nil {
		t.Fatal(err)
	}
	verdict, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const v = document.querySelector('section.checkpoint .verdict'); return v && !v.classList.contains('pending') && v.textContent ? v.className + ': ' + v.textContent : null })()`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !strings.Contains(verdict, "revealed") {
		t.Errorf("lesson tiling's first checkpoint, shown: %q (%v)", verdict, err)
	}
	// A run no recording holds: computed in the worker, then stepped.
	if err := chromedp.Do(ctx, chromedp.Navigate(site+"step?variant=flash2&n=37&d=8&br=4&bc=4&pattern=normal&seed=11")); err != nil {
		t.Fatal(err)
	}
	// The page starts the run itself, once the worker has read the URL.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.getElementById('run-status')?.textContent || '').includes('Trace complete')`,
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('run-status')?.textContent`))
		t.Fatalf("the run did not complete: %q (%v)", st, err)
	}
	// Step on and check the page shows the run's steps.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("next")), chromedp.Click(chromedp.ID("next"))); err != nil {
		t.Fatal(err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('run-summary').textContent`)); !strings.Contains(n, "N=37") {
		t.Errorf("the stepper's form does not show the URL's run: %q", n)
	}
	// Where the run came from, as the stream reports it (not the form's
	// estimate): the mirror in this browser's WebAssembly.
	said, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('run-status').textContent`))
	if !strings.Contains(said, "WebAssembly") {
		t.Errorf("the run does not say it ran in the browser's WebAssembly: %q", said)
	}
	// The side by side of a run the site's pages do not link to: read
	// from its URL by the worker, both kernels mirrored in the browser.
	if testing.Short() {
		finishSite(t, bad, problems)
		return
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(site+"compare?n=24&d=8&br=4&bc=4&seed=3&pattern=normal&pair=f32")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const p = [...document.querySelectorAll('.pane [data-role=status]')]; return p.length === 2 && p.every((e) => e.textContent.includes('numbers from')); })()`,
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.pane [data-role=status]')].map((e) => e.textContent).join(' | ')`))
		t.Errorf("the side by side did not finish: %q (%v)", st, err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('c-summary-line').textContent`)); !strings.Contains(n, "N=24") {
		t.Errorf("the side by side's summary does not show the URL's run: %q", n)
	}
	finishSite(t, bad, problems)
}

// finishSite fails on any request the static host could not answer, or
// one to an API, and on anything the pages logged as a problem.
func finishSite(t *testing.T, bad, problems func() []string) {
	t.Helper()
	if p := bad(); len(p) > 0 {
		t.Errorf("requests a static site cannot answer:\n%s", strings.Join(p, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the site logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// checkSiteLinks holds the site as make site writes it: every link and
// source of every page names a file of the site (a folder's index.html
// for a page), and the data the pages read are there. Built under a
// sub-path, so that a link the rebasing missed names a file outside it
// and fails.
func checkSiteLinks(t *testing.T, dir, base string) {
	t.Helper()
	for _, f := range []string{"index.html", "lessons/attention/index.html", "step/index.html", "data/recordings.json", "data/steps.json",
		"data/compares.json", "data/kernels.json", "data/source/flash2.json", "recordings/toy.fstrace", "static/js/site_worker.js", "wasm/site.wasm"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the site has no %s", f)
		}
	}
	attr := regexp.MustCompile(`(?:href|data-src|data-base-src|src)="([^"#]*)`) // a lesson frame names its page in data-src
	pages, checked := 0, 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		pages++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range attr.FindAllSubmatch(b, -1) {
			link := html.UnescapeString(string(m[1]))
			link, _, _ = strings.Cut(link, "?")
			if link == "" || strings.HasPrefix(link, "data:") || strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			if !strings.HasPrefix(link, base) {
				t.Errorf("%s links %q, outside the site's base %s", strings.TrimPrefix(p, dir), link, base)
				continue
			}
			f := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(link, base)))
			if strings.HasSuffix(link, "/") {
				f = filepath.Join(f, "index.html")
			}
			if fi, err := os.Stat(f); err != nil || (fi.IsDir() && func() bool { _, e := os.Stat(filepath.Join(f, "index.html")); return e != nil }()) {
				t.Errorf("%s links %s, which the site has no file for", strings.TrimPrefix(p, dir), link)
			}
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 30 || checked < 1000 {
		t.Errorf("%d pages and %d links checked: the site is not what make site writes", pages, checked)
	}
}

// goEnvRoot is the GOROOT of the go command that builds the WebAssembly
// (go env GOROOT, as scripts/site reads it), whose wasm_exec.js must
// match it: the test binary's own runtime.GOROOT need not be that one.
func goEnvRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}
