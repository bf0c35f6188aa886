package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/labrun/labruntest"
	"flashstep/sweep"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of the stepper to this PNG file")

// startServer runs the whole program on a free port, with any extra flags,
// until the test ends.
func startServer(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, ready) }()
	select {
	case addr := <-ready:
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("server exited with %v", err)
				}
			})
		}
		t.Cleanup(stop)
		return "http://" + addr, stop
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	}
	return "", nil
}

// TestShutdownClosesStreams1001 stops the program while a websocket is
// streaming: the browser must get close 1001, and run must return cleanly.
func TestShutdownClosesStreams1001(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t)
	u := "ws" + strings.TrimPrefix(base, "http") + "/ws/trace?n=2048&d=64&br=16&bc=64&trace_q=0-40"
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil { // the header: the run is under way
		t.Fatal(err)
	}
	go stop()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != websocket.CloseGoingAway {
				t.Fatalf("closed with %d, want 1001", ce.Code)
			}
			return
		}
		if err != nil {
			t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

func browser(t *testing.T) context.Context {
	t.Helper()
	return browserSized(t, 1500, 1100)
}

// One Chromium serves every browser test of the package: starting one
// takes about a second, and a test needs only a tab of its own. Each test
// gets its own browser context (cookies, storage: a fresh profile) in it,
// so tests run side by side without seeing each other.
var chromium struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

var chromiumFlag = flag.String("chromium", "", "the browser the browser tests drive (default: chromium-headless-shell where it is installed, else chromium)")

// chromiumBinary is the browser the tests drive: -chromium's, or the first
// of Debian's chromium-headless-shell and chromium on the PATH. The
// headless shell is the same Blink and V8 without the browser's own UI
// (windows, omnibox, their compositing): on two cores the short suite's
// browser work costs about half the CPU it costs chromium in headless mode.
func chromiumBinary() (string, error) {
	if *chromiumFlag != "" {
		return exec.LookPath(*chromiumFlag)
	}
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("chromium is not installed: the browser tests need Debian's chromium (make test installs it)")
}

func sharedChromium() (context.Context, error) {
	chromium.once.Do(func() {
		path, err := chromiumBinary()
		if err != nil {
			chromium.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-quic", true),
			// chromium's headless mode preloads the omnibox's popup, two
			// renderers in every browser context (each test's tab has one)
			// that no test uses: about 2 s of CPU a context. (The default
			// list's own two features stay off.)
			chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup"),
			chromedp.WindowSize(1920, 1200))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		if err := chromedp.Do(ctx); err != nil { // starts it
			chromium.err = err
		}
		chromium.ctx, chromium.cancel = ctx, func() { cancel(); cancelAlloc() }
	})
	return chromium.ctx, chromium.err
}

func TestMain(m *testing.M) {
	if labruntest.IsFake() { // the lab's kernel track, without a GPU
		os.Exit(labruntest.Fake())
	}
	code := m.Run()
	if chromium.cancel != nil {
		chromium.cancel()
	}
	os.Exit(code)
}

// browserSized is a tab of the shared Chromium, in a browser context of
// its own, whose viewport is w×h CSS pixels, as a laptop's or a
// projector's screen; it has 180 s: a test takes 10 to 25 s alone, and
// make test runs a dozen side by side on two cores, among the other
// packages' tests, where one has taken 90 s.
func browserSized(t *testing.T, w, h int) context.Context {
	return browserFor(t, w, h, 180*time.Second)
}

// browserFor is browserSized with another time limit.
func browserFor(t *testing.T, w, h int, limit time.Duration) context.Context {
	t.Helper()
	ctx := takeTab(t)
	ctx, cancelTimeout := context.WithTimeout(ctx, limit)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(w), int64(h))); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// The browser tests' tabs are used again from one test to the next. A new
// tab costs Chromium a renderer process, and the first page it loads costs
// that process 2 to 3 s of CPU more than a page loaded in a tab that has
// loaded one before: on two cores, more than all of a short test's own
// work. Each tab keeps a browser context of its own, so that the tabs a
// test holds at once (a presenter and two students) keep their cookies
// apart, and a test holds its tabs alone. When the test ends, its tab is
// emptied before another test takes it (giveBackTab): the page left for
// about:blank, the cookies, storage, cache and history of the browser
// context gone; what the test set through its own DevTools session (the
// viewport, scripts to run on every page) goes with that session.
// TestTabComesBackEmpty holds the emptying to a fresh tab's state.
var tabs struct {
	mu   sync.Mutex
	free []tab
}

// tab is a tab of the shared Chromium and its browser context.
type tab struct {
	id target.ID
	bc cdp.BrowserContextID
}

// takeTab attaches a new DevTools session to a free tab of the shared
// Chromium, or to a new one, for the test's time; the test's cleanup
// empties it and hands it back.
func takeTab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel, tb, err := openTab()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { giveBackTab(ctx, cancel, tb) })
	return ctx
}

// openTab is a session on a free tab, or on a new one.
func openTab() (context.Context, context.CancelFunc, tab, error) {
	parent, err := sharedChromium()
	if err != nil {
		return nil, nil, tab{}, err
	}
	tabs.mu.Lock()
	var tb tab
	if n := len(tabs.free); n > 0 {
		tb, tabs.free = tabs.free[n-1], tabs.free[:n-1]
	}
	tabs.mu.Unlock()
	var ctx context.Context
	var cancel context.CancelFunc
	if tb.id != "" {
		ctx, cancel = chromedp.NewContext(parent, chromedp.WithTargetID(tb.id), chromedp.WithDetachOnCancel())
	} else {
		ctx, cancel = chromedp.NewContext(parent, chromedp.WithNewBrowserContext(), chromedp.WithDetachOnCancel())
	}
	if err := chromedp.Do(ctx); err != nil { // attaches, or opens the tab
		cancel()
		if tb.id != "" {
			closeTab(tb)
		}
		return nil, nil, tab{}, err
	}
	if tb.id == "" {
		c := chromedp.FromContext(ctx)
		tb = tab{c.Target.TargetID, c.BrowserContextID}
	}
	return ctx, cancel, tb, nil
}

// giveBackTab empties the tab of session ctx, ends the session (the
// viewport and scripts it set go with it) and puts the tab back in the
// pool; a tab that could not be emptied is closed.
func giveBackTab(ctx context.Context, cancel context.CancelFunc, tb tab) {
	ok := emptyTab(ctx)
	cancel()
	if !ok {
		closeTab(tb)
		return
	}
	tabs.mu.Lock()
	tabs.free = append(tabs.free, tb)
	tabs.mu.Unlock()
}

// emptyTab leaves the tab's page and clears what the browser context
// kept of the origins its tab has visited, as a fresh one would be: it
// reports whether all of that was done.
func emptyTab(tab context.Context) bool {
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	hist, err := chromedp.Call(ctx, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		return false
	}
	// sessionStorage is the tab's own, not the browser context's.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { sessionStorage.clear(); } catch {} return true; })()`)); err != nil {
		return false
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		return false
	}
	origins := map[string]bool{}
	for _, e := range hist.Entries {
		if u, err := url.Parse(e.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			origins[u.Scheme+"://"+u.Host] = true
		}
	}
	for o := range origins {
		if _, err := chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: o, StorageTypes: "all"}); err != nil {
			return false
		}
	}
	for _, cmd := range []cdp.Command[cdp.Empty, cdp.Empty]{network.ClearBrowserCookies, network.ClearBrowserCache, page.ResetNavigationHistory} {
		if _, err := chromedp.Call(ctx, cmd, cdp.Empty{}); err != nil {
			return false
		}
	}
	return true
}

// closeTab closes a tab that could not be emptied, and its browser context.
func closeTab(tb tab) {
	browser, err := sharedChromium()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: tb.id})
	chromedp.CallBrowser(ctx, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: tb.bc})
}

// watchConsole collects every console error and warning, uncaught exception
// and browser log error (a failed request, say) of the page.
// sweepDrawn is true once the sweep page has drawn its charts and table
// (each in a task of its own: static/js/sweep.js, draw).
const sweepDrawn = `document.getElementById('sweep-charts')?.dataset.drawn === '1'`

func watchConsole(ctx context.Context) func() []string {
	var mu sync.Mutex
	var problems []string
	add := func(s string) { mu.Lock(); problems = append(problems, s); mu.Unlock() }
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	logs := chromedp.Events(ctx, log.EntryAdded)
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				add(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			add(fmt.Sprintf("exception: %s %v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description))
		}
	}()
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				add(fmt.Sprintf("log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}()
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), problems...) }
}

func waitText(ctx context.Context, t *testing.T, sel, want string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(document.querySelector(%q)?.textContent || '').includes(%q)`, sel, want),
			chromedp.WithPollingTimeout(time.Until(deadline))))
		// Right after a navigation the poll may start in the old page's
		// context, which the new page destroys: poll again in the new one.
		if err == nil || !(strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "navigated or closed")) {
			break
		}
	}
	if err != nil {
		txt, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent`, sel)))
		t.Fatalf("waiting for %s to say %q: %v (it says %q)", sel, want, err, txt)
	}
}

// runAndTime clicks Run and returns how long the page took from the click
// to drawing the new run's first step. The previous run's timing is cleared
// first: the page validates the form before it starts, so right after the
// click the old figure would still be there.
func runAndTime(ctx context.Context, t *testing.T) string {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`delete document.getElementById('run-status').dataset.firstStepMs`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('run-settings').open = true`),
		chromedp.Click(chromedp.ID("run"))); err != nil {
		t.Fatal(err)
	}
	ms, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById('run-status').dataset.firstStepMs`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete")
	return ms
}

func cellValue(ctx context.Context, t *testing.T, testid string) float64 {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('[data-testid=%q]')?.dataset.value ?? 'missing'`, testid)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %s holds %q", testid, s)
	}
	return v
}

// TestBrowserStepper opens the stepper in headless Chromium, starts a run,
// steps three times and checks that the m and l the page shows are the
// mirror's values for that step, bit for bit.
func TestBrowserStepper(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)

	c := kernels.Config{Variant: instrument.VariantFlash2, N: 10, D: 4, Br: 3, Bc: 2, Batch: 1, Heads: 1,
		Pattern: instrument.Patterns[rand.IntN(3)], Seed: rand.Uint64()}
	steps := mirrorSteps(t, c)

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?"+c.Values().Encode())); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete")

	// Run it again from the button, and time the first step drawn.
	t.Logf("click on Run to first step drawn: %s ms", runAndTime(ctx, t))

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("first"))); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("next"))); err != nil {
			t.Fatal(err)
		}
	}
	waitText(ctx, t, "#step-label", fmt.Sprintf("4 / %d", len(steps)))
	want := steps[3]
	if want.Kind != instrument.KindFlashStep || want.I != 0 || want.J != 3 {
		t.Fatalf("step 3 of the mirror is %s (%d, %d), the test expects tile (0, 3)", want.Kind, want.I, want.J)
	}
	for row := range want.RowsValid {
		for name, vals := range map[string][]float32{"m-old": want.MOld, "m-new": want.MNew, "alpha": want.Alpha, "l": want.L} {
			got := cellValue(ctx, t, fmt.Sprintf("%s-%d", name, row))
			if got != float64(vals[row]) || math.IsNaN(got) {
				t.Errorf("row %d: page shows %s = %v, the mirror has %v", row, name, got, vals[row])
			}
		}
	}

	// The URL names the step, so a link reproduces it.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`location.search.includes('step=4')`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Errorf("the URL does not carry the step: %s", loc)
	}
	// Keyboard: → steps forward, End goes to the last step.
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#step-label", fmt.Sprintf("5 / %d", len(steps)))

	if *screenshot != "" {
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A real tile size: d=64, 64×64 tiles, one head; N=1024 (272 steps, a
	// 13 MB trace), or under -short N=512 (72 steps, a quarter of it).
	n, total := 1024, 272
	if testing.Short() {
		n, total = 512, 72
	}
	big := fmt.Sprintf("/step?n=%d&d=64&br=64&bc=64&seed=%d", n, rand.Uint64())
	navigate(ctx, t, base+big)
	waitText(ctx, t, "#run-status", "Trace complete")
	t.Logf("N=%d, d=64, Br=Bc=64: click on Run to first step drawn: %s ms", n, runAndTime(ctx, t))
	waitText(ctx, t, "#step-label", fmt.Sprintf("/ %d", total))

	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserHTTPFallbackAndReplay breaks websockets in the page, as some
// networks do: the run must arrive over plain HTTP with the same numbers.
// Then it replays a downloaded trace file through the upload field.
func TestBrowserHTTPFallbackAndReplay(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.WebSocket = class { constructor() { throw new Error('websockets blocked by this network'); } };`,
	}); err != nil {
		t.Fatal(err)
	}
	c := kernels.Config{Variant: instrument.VariantFlash2, N: 9, D: 3, Br: 2, Bc: 4, Batch: 1, Heads: 2, Causal: true,
		Pattern: instrument.PatternNormal, Seed: rand.Uint64(), TraceBH: instrument.Range{Lo: 1, Hi: 2}}
	steps := mirrorSteps(t, c)
	// The link names a step: the first that rescales (a second kv-tile).
	k := 0
	for steps[k].Kind != instrument.KindFlashStep || steps[k].J == 0 {
		k++
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/step?%s&step=%d", base, c.Values().Encode(), k+1))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete")
	waitText(ctx, t, "#run-status", "over HTTP")
	waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", k+1, len(steps)))
	want := steps[k]
	for row := range want.RowsValid {
		if got := cellValue(ctx, t, fmt.Sprintf("l-%d", row)); got != float64(want.L[row]) {
			t.Errorf("over HTTP, row %d: l = %v, the mirror has %v", row, got, want.L[row])
		}
	}

	// Replay: download a naive trace and hand the file to the page.
	res, err := http.Get(base + "/api/trace?variant=naive&n=6&d=2&br=3&bc=3&seed=5")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("download: %d %v", res.StatusCode, err)
	}
	file := filepath.Join(t.TempDir(), "run.fstrace")
	os.WriteFile(file, data, 0o644)
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload"), []string{file})); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Replaying run.fstrace")
	waitText(ctx, t, "#step-title", "Naive phase 1")
	waitText(ctx, t, "#step-label", "1 / 12") // per q-tile: 2 scores, 1 softmax, 2 pv, 1 epilogue

	// A bad file chosen while a run streams: its error stays on the page,
	// and nothing of the run it replaced comes back to overwrite it.
	bad := filepath.Join(t.TempDir(), "bad.fstrace")
	os.WriteFile(bad, []byte("this is not a trace"), 0o644)
	huge := filepath.Join(t.TempDir(), "huge.fstrace")
	if f, err := os.Create(huge); err == nil {
		f.Truncate(300 << 20) // sparse: 300 MB on paper, nothing on disk
		f.Close()
	}
	// The run's download is slowed (a pause before each chunk after the
	// first) so that it is still streaming when the file is chosen, however
	// fast this machine computes and sends it.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `{ const fetch0 = window.fetch;
			window.fetch = async (...args) => {
				const res = await fetch0(...args);
				if (!String(args[0]).includes('/api/trace?') || !res.ok) return res;
				const from = res.body.getReader();
				let first = true;
				return new Response(new ReadableStream({ async pull(to) {
					const { done, value } = await from.read();
					if (done) return to.close();
					if (!first) await new Promise((r) => setTimeout(r, 200));
					first = false;
					to.enqueue(value);
				} }), { status: res.status, headers: res.headers });
			}; }`,
	}); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{bad, huge} {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?n=512&d=64&br=64&bc=64&seed=11&engine=cpu")); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#run-status", "Streaming")
		if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload"), []string{file})); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#run-status", "Could not read "+filepath.Base(file))
		time.Sleep(600 * time.Millisecond) // what the replaced run would still have said
		waitText(ctx, t, "#run-status", "Could not read "+filepath.Base(file))
	}
	waitText(ctx, t, "#run-status", "a trace is at most")

	if p := problems(); len(p) > 0 {
		// The blocked WebSocket constructor throws inside the page's own
		// try/catch; anything else logged is a problem.
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

var timelineShot = flag.String("timeline-screenshot", "", "write a screenshot of the recorded timeline to this PNG file")

// TestBrowserTimeline replays the recorded H100 timeline of a whole grid (no
// GPU here): the page draws which SM ran which step when, and a click on a
// mark goes to that step.
func TestBrowserTimeline(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	q := "variant=flash2&n=2048&d=64&br=64&bc=64&batch=2&heads=8&causal=1&pattern=normal&seed=1&mode=timing"
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?"+q)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Trace complete: 8960 steps")
	waitText(ctx, t, "#source", "NVIDIA H100 80GB HBM3, driver 580.159.04, recorded 2026-11-22")
	waitText(ctx, t, "#timeline-note", "8960 steps on 132 of 132 SMs")
	before, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("step-label")))
	// Click the middle of the timeline: a mark there is some block's step.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const c = document.getElementById('timeline'); const r = c.getBoundingClientRect();
		for (const fy of [0.5, 0.45, 0.55, 0.4, 0.6, 0.3, 0.7]) {
			c.dispatchEvent(new MouseEvent('click', {clientX: r.left + r.width * 0.5, clientY: r.top + r.height * fy, bubbles: true}));
			if (document.getElementById('step-label').textContent !== '1 / 8960') return;
		}
	})()`)); err != nil {
		t.Fatal(err)
	}
	after, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("step-label")))
	if after == before {
		t.Fatalf("a click on the timeline did not move from step %q", before)
	}
	title, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("step-title")))
	if !strings.Contains(title, "on SM ") {
		t.Errorf("step title %q does not name the SM", title)
	}
	if *timelineShot != "" {
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(*timelineShot, buf, 0o644)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserCompare steps naive and flash side by side: both panes move
// together, naive's device-memory traffic outgrows flash's, and at the end
// the outputs agree with each other and with float64.
func TestBrowserCompare(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	seed := strconv.FormatUint(rand.Uint64(), 10)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/compare?n=20&d=8&br=4&bc=4&causal=1&pattern=normal&seed="+seed)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#c-status", "Both traces are in")
	waitText(ctx, t, "#c-progress", "0% of score tiles computed")
	for range 3 {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("c-next"))); err != nil {
			t.Fatal(err)
		}
	}
	mid, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("c-progress")))
	if !strings.Contains(mid, "% of score tiles computed") || strings.HasPrefix(mid, "0%") {
		t.Fatalf("after three steps: %q", mid)
	}
	for _, pane := range []string{"naive", "flash2"} {
		title, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#pane-"+pane+" [data-role=title]")))
		if !strings.HasPrefix(title, "Step ") {
			t.Errorf("%s pane shows %q", pane, title)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("c-last"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#c-progress", "finishing: 100%")
	// bytes written to L2 at the end: naive's S and P against flash's O.
	written := func(pane string) float64 {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(`(() => {
			const t = document.querySelector('[data-testid=%s-l2]').textContent;
			const m = / ([\d.]+) (B|KiB|MiB) written/.exec(t);
			return parseFloat(m[1]) * {B: 1, KiB: 1024, MiB: 1048576}[m[2]];
		})()`, pane)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if n, f := written("naive"), written("flash2"); !(n > 3*f) {
		t.Errorf("naive wrote %.0f bytes, flash %.0f: naive should write far more", n, f)
	}
	for _, id := range []string{"diff-flash-naive", "diff-flash-ref", "diff-naive-ref"} {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(`parseFloat(document.querySelector('[data-testid=%s]').textContent)`, id)))
		if err != nil || !(v < 1e-5) {
			t.Errorf("%s = %v (%v)", id, v, err)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserSweep runs a small sweep on the CPU path from the page: the
// progress ends, the charts hold both kernels, the table and the CSV
// download have every point, and the memory calculator answers.
func TestBrowserSweep(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/sweep"),
		chromedp.SetValue(chromedp.ID("s-n"), "64,128"),
		chromedp.SetValue(chromedp.ID("s-d"), "16"),
		chromedp.SetValue(chromedp.ID("s-causal"), "0"),
		chromedp.SetValue(chromedp.ID("s-repeats"), "1"),
		chromedp.Click(chromedp.ID("sweep-run"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#sweep-status", "Done: 4 points")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](sweepDrawn, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal(err)
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Chart.getChart('chart-ms').data.datasets.filter(d => d.data.length === 2).length`))
	if err != nil || lines != 2 {
		t.Fatalf("the time chart has %d lines of two points (%v)", lines, err)
	}
	rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#sweep-table tbody tr').length`))
	if rows != 4 {
		t.Fatalf("%d table rows", rows)
	}
	csvText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid=download-csv]').href).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	if err != nil || !strings.HasPrefix(csvText, strings.Join(sweep.CSVHeader, ",")+"\n") || strings.Count(csvText, "\n") != 5 {
		t.Fatalf("CSV download: %v\n%s", err, csvText)
	}
	waitText(ctx, t, "[data-testid=mem-naive-max]", "N > ")
	waitText(ctx, t, "[data-testid=mem-naive-sp]", "P float32")
	// In bf16, naive_mma's S stays float32 and its P halves: 6 bytes an
	// element of the N×N pair against 8.
	f32, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=mem-naive-sp]').textContent`))
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('m-dtype').value = 'bf16'; document.getElementById('memory-form').dispatchEvent(new Event('input'))`)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "[data-testid=mem-naive-sp]", "P bf16")
	bf16, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=mem-naive-sp]').textContent`))
	if f32 == bf16 {
		t.Errorf("the calculator says the same for float32 and bf16: %q", bf16)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestBrowserFormErrors types an out-of-range N and expects the error beside
// the field, with the limit, and the run button disabled.
func TestBrowserFormErrors(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('run-settings').open = true; document.getElementById('f-n').value = ''`),
		chromedp.SendKeys(chromedp.ID("f-n"), "5000")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#err-n", "between 1 and 4096")
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('run').disabled`))
	if err != nil || !disabled {
		t.Errorf("Run is enabled with an invalid N (%v)", err)
	}
}

// TestShutdownUnderLoad stops the program while it computes, streams and
// sends a download to a client that has stopped reading: new requests hear
// 503 at once (the health check too), every stream closes with 1001, and
// the program returns cleanly within 3 s.
func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t, "-worker", "none")
	ws := "ws" + strings.TrimPrefix(base, "http")
	// A download that is never read, of a trace already computed (13 MB:
	// more than the sockets hold): its writes block, and the shutdown cuts
	// it at its deadline.
	done := "n=1024&d=64&br=64&bc=64&seed=99"
	if res, err := http.Get(base + "/api/trace?" + done); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	stuck, err := (&net.Dialer{}).Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET /api/trace?%s HTTP/1.1\r\nHost: x\r\n\r\n", done)
	var conns []*websocket.Conn
	for k := range 3 { // distinct heavy runs (a second each): some compute, the rest wait
		conn, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("%s/ws/trace?n=1024&d=256&br=64&bc=64&seed=%d", ws, 100+k), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	time.Sleep(200 * time.Millisecond) // the runs are under way, the download stuck

	begun := time.Now()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// A new request is refused explicitly while the server drains.
	deadline := time.Now().Add(time.Second)
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health check did not answer 503 while draining: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, res, err := websocket.DefaultDialer.Dial(ws+"/ws/trace?n=16&d=4&br=4&bc=4", nil); err == nil || (res != nil && res.StatusCode != http.StatusServiceUnavailable) {
		t.Fatalf("a websocket opened while draining: %v", err)
	}
	for k, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		for {
			_, _, err := conn.ReadMessage()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != websocket.CloseGoingAway {
					t.Fatalf("stream %d closed with %d, want 1001", k, ce.Code)
				}
				break
			}
			if err != nil {
				t.Fatalf("stream %d ended without a close frame: %v", k, err)
			}
		}
	}
	select {
	case <-stopped:
		if took := time.Since(begun); took > 3*time.Second {
			t.Fatalf("shutdown took %v", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not exit within 5 s")
	}
}

// TestBrowserShowsItsPlaceInTheQueue: a run that waits for the server says
// so on the page, then runs.
func TestBrowserShowsItsPlaceInTheQueue(t *testing.T) {
	longOnly(t) // make test keeps the replay (HTTPFallbackAndReplay) and the queue (the stream tests of web)
	t.Parallel()
	base, _ := startServer(t, "-worker", "none", "-compute-slots", "1")
	ctx := browser(t)
	// Two heavy runs ahead: one computing, one waiting.
	for seed := range 2 {
		conn, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/ws/trace?n=1024&d=256&br=64&bc=64&seed=%d", strings.TrimPrefix(base, "http"), 70+seed), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go io.Copy(io.Discard, conn.UnderlyingConn())
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?n=16&d=4&br=4&bc=4&seed=5")); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Waiting")
	waitText(ctx, t, "#run-status", "Trace complete")
}

// mirrorSteps is the CPU mirror's trace of c, every record but the inputs:
// the steps the stepper counts, in its order.
func mirrorSteps(t *testing.T, c kernels.Config) []*instrument.Record {
	t.Helper()
	var steps []*instrument.Record
	if err := kernels.RunMirror(context.Background(), kernelstest.MustRun(t, c), func(r *instrument.Record) error {
		if r.Kind != instrument.KindInputs {
			steps = append(steps, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return steps
}

// TestTabComesBackEmpty: a tab a test has used, once emptied, shows the
// next test what a new tab in a new browser context shows: no cookie, no
// local or session storage, nothing cached, no history but the page, and
// neither the viewport nor the scripts the last session set.
func TestTabComesBackEmpty(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t, "-worker", "none")
	const look = `JSON.stringify([document.cookie, localStorage.length, sessionStorage.length, typeof window.__left, history.length,
		innerWidth === 500 || innerHeight === 400])`
	const fresh = `["",0,0,"undefined",2,false]` // [cookie, local storage, session storage, the last session's script, history, its viewport]
	cached := `fetch('/static/js/model.js', { cache: 'only-if-cached', mode: 'same-origin' }).then(() => true, () => false)`

	used, cancelUsed, tb, err := openTab()
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(used, chromedp.EmulateViewport(500, 400)); err != nil {
		cancelUsed()
		t.Fatal(err)
	}
	if _, err := chromedp.Call(used, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: "window.__left = 1"}); err != nil {
		cancelUsed()
		t.Fatal(err)
	}
	navigate(used, t, base+"/healthz")
	navigate(used, t, base+"/healthz?again")
	evalJS[bool](used, t, `(document.cookie = 'left=1; path=/', localStorage.setItem('left', '1'), sessionStorage.setItem('left', '1'), true)`)
	evalJS[bool](used, t, `fetch('/static/js/model.js').then((r) => r.text()).then(() => true)`)
	// What the used tab shows: the checks below would hold nothing if it
	// showed what a new one does.
	if got := evalJS[string](used, t, look); got != `["left=1",1,1,"number",3,true]` || !evalJS[bool](used, t, cached) {
		t.Fatalf("the used tab shows %s, cached %v", got, evalJS[bool](used, t, cached))
	}
	ok := emptyTab(used)
	cancelUsed()
	if !ok {
		closeTab(tb)
		t.Fatal("the used tab could not be emptied")
	}

	browser, _ := sharedChromium() // openTab has started it
	again, cancelAgain := chromedp.NewContext(browser, chromedp.WithTargetID(tb.id), chromedp.WithDetachOnCancel())
	defer giveBackTab(again, cancelAgain, tb)
	navigate(again, t, base+"/healthz")
	if got := evalJS[string](again, t, look); got != fresh {
		t.Errorf("the emptied tab shows %s, a new one %s ([cookie, local storage, session storage, the last session's script, history, its viewport])", got, fresh)
	}
	if evalJS[bool](again, t, cached) {
		t.Error("the emptied tab has the last test's script cached")
	}
}
