package web

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashstep/client"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/runner"
	"flashstep/runs"

	"github.com/gorilla/websocket"
)

// countingRunner is the CPU mirror, counting the computations it starts
// and letting each record out only when the test opens gate (nil: at once).
type countingRunner struct {
	runs atomic.Int64
	gate chan struct{}
}

func (c *countingRunner) Run(ctx context.Context, r kernels.Run, emit func([]byte) error) error {
	c.runs.Add(1)
	return runner.Mirror{}.Run(ctx, r, func(b []byte) error {
		if c.gate != nil {
			select {
			case <-c.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return emit(b)
	})
}

func (c *countingRunner) Engine() runner.Engine { return runner.Mirror{}.Engine() }

func newServingServer(t *testing.T, r runner.Runner, o runs.Options) *httptest.Server {
	_, ts := newServingApp(t, r, o)
	return ts
}

func newServingApp(t *testing.T, r runner.Runner, o runs.Options) (*Server, *httptest.Server) {
	t.Helper()
	app := NewServer(Deps{Engines: testEngines{Runner: r}, Runs: o, Static: testStatic, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(app)
	t.Cleanup(ts.Close)
	t.Cleanup(app.Drain)
	return app, ts
}

// A class opens the run its teacher projects: 40 downloads and 40
// websockets of one run are one computation, and every client gets the
// same whole trace: half of them asked before the run made anything, half
// joined it halfway through.
func TestOneRunIsComputedOnceForEveryClient(t *testing.T) {
	t.Parallel()
	cr := &countingRunner{gate: make(chan struct{})}
	app, ts := newServingApp(t, cr, runs.Options{})
	q := "variant=flash2&n=96&d=16&br=16&bc=16&seed=5"
	var want bytes.Buffer
	runner.Mirror{}.Run(context.Background(), mustRun(t, q), func(b []byte) error { want.Write(b); return nil })
	records, _, _ := instrumentHeader(want.Bytes())
	emits := records + 1 // the header, then every record

	var wg sync.WaitGroup
	got := make([][]byte, 80)
	errs := make([]error, 80)
	// clients starts 20 downloads and 20 websockets, as clients k to k+39.
	clients := func(k0 int) {
		for k := k0; k < k0+40; k += 2 {
			wg.Go(func() {
				res, err := http.Get(ts.URL + "/api/trace?" + q)
				if err != nil {
					errs[k] = err
					return
				}
				defer res.Body.Close()
				got[k], errs[k] = io.ReadAll(res.Body)
			})
			wg.Go(func() {
				conn, _, err := websocket.DefaultDialer.Dial(wsURL(ts.URL, q), nil)
				if err != nil {
					errs[k+1] = err
					return
				}
				defer conn.Close()
				r := readAll(t, conn)
				got[k+1] = bytes.Join(r.frames, nil)
			})
		}
	}
	readers := func(n int) func() bool { return func() bool { return app.RunStats().Readers == n } }
	clients(0)
	waitUntil(t, "40 clients reading", readers(40))
	for range emits / 2 {
		cr.gate <- struct{}{}
	}
	clients(40) // the run is halfway: it waits at its gate for the rest
	waitUntil(t, "80 clients reading", readers(80))
	for range emits - emits/2 {
		cr.gate <- struct{}{}
	}
	wg.Wait()
	for k := range got {
		if errs[k] != nil || !bytes.Equal(got[k], want.Bytes()) {
			t.Fatalf("client %d: %v, %d of %d bytes", k, errs[k], len(got[k]), want.Len())
		}
	}
	if n := cr.runs.Load(); n != 1 {
		t.Fatalf("%d computations for one run asked for 80 times", n)
	}
	if st := app.RunStats(); st.Shared != 79 || st.Cached != 0 {
		t.Fatalf("the others did not share it: %+v", st)
	}
}

// instrumentHeader is the record count of an encoded trace.
func instrumentHeader(trace []byte) (records int, h *instrument.Header, err error) {
	h, recs, err := instrument.ReadAll(bytes.NewReader(trace))
	if err != nil {
		return 0, nil, err
	}
	return len(recs), h, nil
}

func mustRun(t *testing.T, q string) kernels.Run {
	t.Helper()
	v, _ := urlQuery(q)
	r, err := kernels.ParseRun(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Past the queue, a run is refused explicitly: the websocket says why and
// closes 1013; the download answers 503 with Retry-After. A waiting run's
// stream says its place.
func TestBusyIsExplicit(t *testing.T) {
	t.Parallel()
	cr := &countingRunner{gate: make(chan struct{})}
	ts := newServingServer(t, cr, runs.Options{Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 1}, Queue: map[instrument.Source]int{instrument.SourceCPUMirror: 1}, PerAddress: 10})
	run := func(seed int) string { return "variant=flash2&n=16&d=4&br=4&bc=4&seed=" + strconv.Itoa(seed) }
	running := dial(t, wsURL(ts.URL, run(1)))
	defer running.Close()
	// The first run holds the one slot before the second arrives: two
	// connections dialled back to back may be served in either order.
	for deadline := time.Now().Add(10 * time.Second); cr.runs.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first run never started")
		}
	}
	waiting := dial(t, wsURL(ts.URL, run(2)))
	defer waiting.Close()
	_, msg, err := waiting.ReadMessage()
	if err != nil || string(msg) != `{"ahead":0,"type":"queued"}`+"\n" && string(msg) != `{"ahead":0,"type":"queued"}` {
		t.Fatalf("the waiting run's first message: %q %v", msg, err)
	}
	refused := dial(t, wsURL(ts.URL, run(3)))
	defer refused.Close()
	r := readAll(t, refused)
	if r.close == nil || r.close.Code != websocket.CloseTryAgainLater || len(r.texts) != 1 || r.texts[0]["type"] != "busy" || r.texts[0]["retry_after"] == nil {
		t.Fatalf("past the queue: %+v", r)
	}
	res, err := http.Get(ts.URL + "/api/trace?" + run(4))
	if err != nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a download past the queue: %v %v", err, res.Status)
	}
	res.Body.Close()
	close(cr.gate)
	for k, c := range []*websocket.Conn{running, waiting} {
		r := readAll(t, c)
		if r.close == nil || r.close.Code != websocket.CloseNormalClosure {
			t.Fatalf("the admitted runs: %+v", r.close)
		}
		// The one that waited hears when it begins.
		if began := len(r.texts) > 0 && r.texts[0]["type"] == "running"; began != (k == 1) {
			t.Fatalf("run %d's messages: %v", k, r.texts)
		}
	}
}

// A client that never reads costs the server its place in the shared trace
// and a bounded buffer: the run completes, once, for everyone else. (It is
// dropped after writeWait without progress, like any stalled connection.)
func TestAStalledReaderHoldsNobodyUp(t *testing.T) {
	t.Parallel()
	cr := &countingRunner{}
	ts := newServingServer(t, cr, runs.Options{})
	q := "variant=flash2&n=512&d=64&br=64&bc=64&seed=9" // 3.5 MB: more than the socket buffers hold
	stalled, _, err := websocket.DefaultDialer.Dial(wsURL(ts.URL, q), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close() // never read
	reader := dial(t, wsURL(ts.URL, q))
	defer reader.Close()
	r := readAll(t, reader)
	if r.close == nil || r.close.Code != websocket.CloseNormalClosure || cr.runs.Load() != 1 {
		t.Fatalf("the reader beside a stalled one: %+v, %d computations", r.close, cr.runs.Load())
	}
}

func urlQuery(q string) (map[string][]string, error) {
	v, err := url.ParseQuery(q)
	return v, err
}

// The smaller defects of a probe: HEAD answers as GET does (uptime
// monitors); a static folder is no listing; a long value is not echoed
// back whole; engine=gpu on a server without a GPU is refused by the form's
// check as by the run itself.
func TestSmallerProbeFindings(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for _, p := range []string{"/", "/step", "/lessons", "/sweep", "/healthz", "/api/kernels", "/static/js/stepper.js", "/api/trace?n=16&d=4&br=4&bc=4"} {
		res, err := http.Head(ts.URL + p)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %v %v", p, err, res.Status)
		}
	}
	for _, p := range []string{"/static/", "/static/js/", "/static/js"} {
		res, body := get(t, ts.URL+p)
		if res.StatusCode != http.StatusNotFound || bytes.Contains(body, []byte("stepper.js")) {
			t.Errorf("%s: %d lists %q", p, res.StatusCode, body)
		}
	}
	res, body := get(t, ts.URL+"/api/source?variant="+strings.Repeat("x", 100<<10))
	if res.StatusCode != http.StatusBadRequest || len(body) > 2048 {
		t.Errorf("a 100 KB variant: %d, %d bytes back", res.StatusCode, len(body))
	}
	cpuApp := NewServer(Deps{Engines: &runner.Router{NoGPU: "none here"}, Static: testStatic, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cpu := httptest.NewServer(cpuApp)
	defer cpu.Close()
	for _, p := range []string{"/api/config", "/api/trace"} {
		res, body = get(t, cpu.URL+p+"?n=16&d=4&br=4&bc=4&engine=gpu")
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"engine"`) {
			t.Errorf("%s with engine=gpu without a GPU: %d %s", p, res.StatusCode, body)
		}
	}
	for _, f := range []string{"n", "seed", "d"} {
		v, _ := url.ParseQuery("n=16&d=4&br=4&bc=4")
		v.Set(f, "")
		res, body = get(t, ts.URL+"/api/config?"+v.Encode())
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"`+f+`"`) {
			t.Errorf("an empty %s: %d %s", f, res.StatusCode, body)
		}
	}
}

// Every address of one IPv6 /64 is one address to the limits.
func TestClientAddrOfIPv6IsItsNetwork(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7:5555":                 "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb:cccc::9]:80": "2001:db8:1:2::/64",
		"[::1]:8080":                     "::/64",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = in
		if got := client.Addr(r); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
