package main

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowserLessonFetchesEachRunOnce opens /lessons/backward, whose
// framed widgets show two runs between five frames, and builds its
// widgets (under -short the first two, which show one run): each run is
// streamed once for the whole page (one websocket or trace download per
// distinct run), however many widgets show it and whenever each is
// built, and decoded in one worker off the page's main thread. Before
// the page's widgets shared their runs, the lesson opened four
// websockets for its first run.
func TestBrowserLessonFetchesEachRunOnce(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)

	var mu sync.Mutex
	streams := map[string]int{} // the run's query -> websockets and downloads of it
	workers := 0                // the trace decoder's script, loaded for a worker
	count := func(raw string) {
		u, err := url.Parse(raw)
		if err == nil && u.Path == "/static/js/trace_worker.js" {
			mu.Lock()
			workers++
			mu.Unlock()
		}
		if err != nil || (u.Path != "/ws/trace" && u.Path != "/api/trace") {
			return
		}
		q := u.Query()
		q.Del("step") // not part of a run
		mu.Lock()
		streams[q.Encode()]++
		mu.Unlock()
	}
	sockets := chromedp.Events(ctx, network.WebSocketCreated)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range sockets {
			if err != nil {
				return
			}
			count(ev.URL)
		}
	}()
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			count(ev.Request.URL)
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	navigate(ctx, t, base+"/lessons/backward")
	// Every widget wanted, the first one by one as a reader scrolls: a
	// frame built after another has its run in reads the page's copy.
	frames := evalJS[int](ctx, t, `document.querySelectorAll('figure.widget iframe').length`)
	if frames < 3 {
		t.Fatalf("/lessons/backward has %d framed widgets: this test needs a lesson whose widgets share runs", frames)
	}
	// Under -short the first two, which show one run; at full size all.
	built := frames
	if testing.Short() {
		built = 2
	}
	for k := range built {
		evalJS[bool](ctx, t, `(() => { const f = document.querySelectorAll('figure.widget iframe')[`+strconv.Itoa(k)+`]; f.loading = 'eager'; f.scrollIntoView(); return true; })()`)
		if k == 0 {
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](framesBuilt+`[0].done`, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
				t.Fatalf("the first widget did not build: %v", err)
			}
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](framesBuilt+`.slice(0, `+strconv.Itoa(built)+`).every((f) => f.wanted && f.done)`, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("not every widget built: %v", err)
	}
	// The runs the frames show, as they name them.
	runs := evalJS[[]string](ctx, t, `[...document.querySelectorAll('figure.widget iframe')].slice(0, `+strconv.Itoa(built)+`).map((f) => JSON.parse(f.contentDocument.getElementById('page-data').textContent).query)`)
	distinct := map[string]bool{}
	for _, r := range runs {
		q, _ := url.ParseQuery(r)
		q.Del("step")
		distinct[q.Encode()] = true
	}
	if len(distinct) >= built {
		t.Fatalf("the %d widgets built show %d distinct runs: nothing here to share", built, len(distinct))
	}
	mu.Lock()
	defer mu.Unlock()
	var seen []string
	for q, n := range streams {
		seen = append(seen, q)
		if n != 1 {
			t.Errorf("run %s was streamed %d times for one page", q, n)
		}
	}
	for q := range distinct {
		if streams[q] == 0 {
			t.Errorf("a widget shows run %s, which the page never streamed (streamed: %s)", q, strings.Join(seen, "; "))
		}
	}
	// The page decodes its runs off its main thread, in one worker.
	if workers != 1 {
		t.Errorf("the page started %d trace-decoding workers, want 1 (its frames share the lesson's)", workers)
	}
	sort.Strings(seen)
	t.Logf("%d of %d widgets built, %d runs, streams: %v", built, frames, len(distinct), streams)
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
