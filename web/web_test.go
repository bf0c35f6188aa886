package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/api"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/internal/webtest"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/lessons"
	"flashstep/recordings"
	"flashstep/runner"
	"flashstep/sweep"
	"flashstep/worker"

	"golang.org/x/net/html"
)

// fakeRunner is a runner whose behaviour a test sets.
type fakeRunner struct {
	run func(ctx context.Context, r kernels.Run, emit func([]byte) error) error
}

func (f fakeRunner) Run(ctx context.Context, r kernels.Run, emit func([]byte) error) error {
	return f.run(ctx, r, emit)
}

func (fakeRunner) Engine() runner.Engine {
	return runner.Engine{Source: instrument.SourceCPUMirror, Name: "fake", Detail: "a test's runner"}
}

var testStatic = fstest.MapFS{"js/stepper.js": {Data: []byte("// stepper")}}

// testEngines gives a plain runner what the server asks of its engines.
type testEngines struct {
	runner.Runner
	hello *worker.Hello
}

func (e testEngines) Route(c kernels.Run) runner.Route {
	return runner.Route{Engine: instrument.SourceCPUMirror, Key: c.Key(), Says: "the test runner",
		Run: func(ctx context.Context, emit func([]byte) error) error { return e.Runner.Run(ctx, c, emit) }}
}
func (e testEngines) GPUHello() (worker.Hello, bool) {
	if e.hello == nil {
		return worker.Hello{}, false
	}
	return *e.hello, true
}
func (testEngines) AllRecordings() []*runner.Recording { return nil }

func newTestServer(t *testing.T, r runner.Runner) (*Server, *httptest.Server) {
	t.Helper()
	return serveDeps(t, Deps{Engines: testEngines{Runner: r}})
}

// serveDeps serves d over a real listener, with the CPU's sweeps, the
// test's static files and a silent log; its rooms close when the test ends.
func serveDeps(t *testing.T, d Deps) (*Server, *httptest.Server) {
	t.Helper()
	sweeps := sweep.NewManager(map[instrument.Source]sweep.Executor{instrument.SourceCPUMirror: sweep.CPU{}})
	t.Cleanup(sweeps.Close)
	d.Sweeps, d.Static, d.Log = sweeps, testStatic, slog.New(slog.NewTextHandler(io.Discard, nil))
	app := NewServer(d)
	ts := httptest.NewServer(app)
	t.Cleanup(ts.Close)
	t.Cleanup(app.CloseRooms)
	return app, ts
}

// The tests' bounds and waits (package webtest).
const (
	answerWithin   = webtest.AnswerWithin
	clientPatience = webtest.ClientPatience
	raceSlowdown   = webtest.Slowdown
)

var (
	waitUntil = webtest.WaitUntil
	get       = webtest.Get
)

// byTestID finds the element with the data-testid or id given.
func findNode(doc *html.Node, attr, value string) *html.Node {
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		for _, a := range n.Attr {
			if a.Key == attr && a.Val == value {
				return n
			}
		}
	}
	return nil
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func parse(t *testing.T, body []byte) *html.Node {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestPages(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for _, path := range []string{"/", "/step", "/lessons"} {
		res, body := get(t, ts.URL+path)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		doc := parse(t, body)
		if findNode(doc, "data-testid", "engine-banner") == nil {
			t.Errorf("%s: no banner saying the numbers come from the CPU mirror", path)
		}
	}
	res, _ := get(t, ts.URL+"/no-such-page")
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown page: %d", res.StatusCode)
	}
}

// Every run a page links to must be a valid configuration, and one that the
// GPU's compiled kernels run must be recorded for machines without a GPU.
func TestPresetsAreValidAndRecorded(t *testing.T) {
	t.Parallel()
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	// The home page's starters, every named run the lessons' widgets and
	// checkpoints may use, and every try-this-next link of the course.
	presets := append([]lessons.Preset{}, lessons.Starters...)
	for _, name := range lessons.RunNames() {
		presets = append(presets, lessons.Runs[name])
	}
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range course.Lessons {
		for _, try := range l.TryNext {
			presets = append(presets, lessons.Preset{Title: l.Slug + ": " + try.Text, Query: strings.TrimPrefix(try.Href, "/step?")})
		}
	}
	isBackward := func(c *kernels.Config) bool { info := kernels.Info(c.Variant); return info != nil && info.Backward }
	backwardRecorded := false
	for _, r := range recs.All() {
		backwardRecorded = backwardRecorded || isBackward(&r.Config)
	}
	for _, p := range presets {
		v, err := url.ParseQuery(p.Query)
		if err != nil {
			t.Fatalf("%s: %v", p.Title, err)
		}
		c, err := kernels.ParseConfig(v)
		if err != nil {
			t.Errorf("preset %q: %v", p.Title, err)
			continue
		}
		// A shape the GPU's compiled kernels do not run comes from the CPU
		// mirror everywhere, GPU or not; any other must be recorded. So
		// does a backward run while no backward run is recorded: the
		// backward kernel's GPU checks wait for a device session
		// (docs/LADDER.md). Once one is recorded, every one must be.
		if launch.ValidateTraced(&c) != nil || (isBackward(&c) && !backwardRecorded) {
			continue
		}
		if _, ok := recs.Find(&c); !ok {
			t.Errorf("preset %q has no recording: add it to recordings/list.txt and record it", p.Title)
		}
	}
}

func TestStepperShowsErrorBesideField(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	_, body := get(t, ts.URL+"/step?n=5000&d=4&br=banana")
	doc := parse(t, body)
	for field, want := range map[string]string{"n": "4096", "br": "whole number"} {
		n := findNode(doc, "id", "err-"+field)
		if n == nil || !strings.Contains(text(n), want) {
			t.Errorf("field %s: error %q, want it to mention %q", field, text(n), want)
		}
	}
	if in := findNode(doc, "id", "f-n"); in == nil || attr(in, "value") != "5000" {
		t.Errorf("the mistyped N is not kept in its field")
	}
	if n := findNode(doc, "id", "err-d"); n == nil || text(n) != "" {
		t.Errorf("a valid field shows an error")
	}
	var data struct{ Valid bool }
	if err := json.Unmarshal([]byte(text(findNode(doc, "id", "page-data"))), &data); err != nil || data.Valid {
		t.Errorf("page data of an invalid configuration: %+v %v", data, err)
	}
}

func TestStepperCarriesRunAndStep(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	_, body := get(t, ts.URL+"/step?n=16&d=4&br=4&bc=4&causal=1&seed=99&step=7")
	var data struct {
		Valid bool
		Query string
		Step  int
	}
	doc := parse(t, body)
	if err := json.Unmarshal([]byte(text(findNode(doc, "id", "page-data"))), &data); err != nil {
		t.Fatal(err)
	}
	v, _ := url.ParseQuery(data.Query)
	c, err := kernels.ParseConfig(v)
	if !data.Valid || data.Step != 7 || err != nil || c.N != 16 || !c.Causal || c.Seed != 99 {
		t.Fatalf("page data %+v (%v) does not carry the run", data, err)
	}
	if est := text(findNode(doc, "data-testid", "estimate")); !strings.Contains(est, "records") {
		t.Errorf("no trace estimate: %q", est)
	}
}

func TestConfigAPI(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := get(t, ts.URL+"/api/config?n=0&heads=65&pattern=zig")
	if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("invalid config: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var e apiErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	got := e.Fields.ByField()
	for field, limit := range map[string]string{"n": "between 1 and 4096", "heads": "between 1 and 64", "pattern": "normal, peaked, large"} {
		if !strings.Contains(got[field], limit) {
			t.Errorf("field %s: %q, want the limit %q", field, got[field], limit)
		}
	}
	res, body = get(t, ts.URL+"/api/config?n=2048&d=128&br=16&bc=16")
	if res.StatusCode != 400 || !strings.Contains(string(body), "32.0 MiB limit") || !strings.Contains(string(body), "trace_q=") {
		t.Errorf("oversized trace: %d %s", res.StatusCode, body)
	}
	res, body = get(t, ts.URL+"/api/config?n=16&d=4&br=4&bc=4")
	var ok api.ConfigCheck
	if res.StatusCode != 200 || json.Unmarshal(body, &ok) != nil || !ok.OK || ok.Records != 1+4*4+4 {
		t.Errorf("valid config: %d %s", res.StatusCode, body)
	}
}

// TestTraceDownload fetches a trace over plain HTTP and checks it against a
// run of the mirror, byte for byte.
func TestTraceDownload(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	q := "variant=naive&n=13&d=5&br=4&bc=3&causal=1&heads=2&seed=" + strconv.FormatUint(testrand.New(t).Uint64(), 10)
	res, body := get(t, ts.URL+"/api/trace?"+q)
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Disposition"), ".fstrace") {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	v, _ := url.ParseQuery(q)
	r, _ := kernels.ParseRun(v)
	var want []byte
	err := runner.Mirror{}.Run(context.Background(), r, func(b []byte) error { want = append(want, b...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("downloaded %d bytes, the mirror gives %d, or they differ", len(body), len(want))
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(body))
	if err != nil || len(recs) != h.Records {
		t.Fatalf("download does not decode: %v", err)
	}
	res, body = get(t, ts.URL+"/api/trace?n=-4")
	if res.StatusCode != 400 || !strings.Contains(string(body), `"field":"n"`) {
		t.Errorf("bad config download: %d %s", res.StatusCode, body)
	}
}

// A run that fails after the response started must break the transfer, not
// end it cleanly as if the trace were whole.
func TestTraceDownloadFailureMidStream(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, fakeRunner{run: func(ctx context.Context, _ kernels.Run, emit func([]byte) error) error {
		emit(make([]byte, 96))
		return errors.New("the GPU worker died")
	}})
	res, err := http.Get(ts.URL + "/api/trace?n=8")
	if err != nil {
		return // cut off before the headers: also a broken transfer
	}
	defer res.Body.Close()
	if _, err := io.ReadAll(res.Body); err == nil {
		t.Fatal("a failed run read as a complete download")
	}
}

func TestStaticFiles(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := get(t, ts.URL+"/static/js/stepper.js")
	if res.StatusCode != 200 || string(body) != "// stepper" || !strings.Contains(res.Header.Get("Content-Type"), "javascript") {
		t.Fatalf("%d %q %s", res.StatusCode, body, res.Header.Get("Content-Type"))
	}
}

// FuzzStepperQuery: no query string makes the stepper page or the config API
// fail with anything but a page or a 400.
func FuzzStepperQuery(f *testing.F) {
	app := NewServer(Deps{Engines: testEngines{Runner: runner.Mirror{}}, Static: testStatic, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Add("n=8&d=4&step=3")
	f.Add("n=%ff&trace_q=1-&causal=yes")
	f.Add("step=-9999999999999999999999&seed=18446744073709551616")
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range []string{"/step?", "/api/config?"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = strings.TrimSuffix(path, "?"), query
			rec := httptest.NewRecorder()
			app.ServeHTTP(rec, req)
			if rec.Code != 200 && rec.Code != 400 {
				t.Fatalf("%s%s: status %d", path, query, rec.Code)
			}
		}
	})
}

// TestCompareOversizedOffersAPart: at N=2048 a whole trace passes the size
// limit, a field this form lacks. The page must say so above the form and
// offer the part of the run that fits both kernels, and that part must run.
func TestCompareOversizedOffersAPart(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	n := 2048 + 64*testrand.New(t).IntN(8)
	_, body := get(t, ts.URL+"/compare?d=64&br=64&bc=64&seed=3&n="+strconv.Itoa(n))
	doc := parse(t, body)
	msg := text(findNode(doc, "data-testid", "c-form-error"))
	if !strings.Contains(msg, "above the 32.0 MiB limit") {
		t.Fatalf("no form-level error for an oversized run: %q", msg)
	}
	offer := findNode(doc, "data-testid", "c-offer")
	if offer == nil {
		t.Fatal("no offer of the part that fits")
	}
	u, err := url.Parse(attr(offer, "href"))
	if err != nil || u.Path != "/compare" {
		t.Fatalf("offer %q", attr(offer, "href"))
	}
	q := u.Query()
	for _, v := range []string{"flash2", "naive"} {
		q.Set("variant", v)
		c, err := kernels.ParseConfig(q)
		if err != nil || c.N != n || c.TraceBytes() > kernels.MaxTraceBytes || c.TracedQ().Len() < 1 {
			t.Fatalf("the offered run does not fit for %s: %v (%+v)", v, err, c)
		}
	}
	// The offer is the longest that fits: one more q-tile would not, for
	// one of the two kernels.
	q.Set("variant", "naive")
	c, _ := kernels.ParseConfig(q)
	if c.TracedQ().Hi < c.Tr() {
		more := c
		more.TraceQ.Hi++
		fl := more
		fl.Variant = instrument.VariantFlash2
		if more.TraceBytes() <= kernels.MaxTraceBytes && fl.TraceBytes() <= kernels.MaxTraceBytes {
			t.Errorf("q-tiles %v offered, but one more fits both", c.TracedQ())
		}
	}
	_, body = get(t, ts.URL+attr(offer, "href"))
	var data struct{ Valid bool }
	if err := json.Unmarshal([]byte(text(findNode(parse(t, body), "id", "compare-data"))), &data); err != nil || !data.Valid {
		t.Errorf("following the offer: %+v %v", data, err)
	}
}

// TestBlankSizeIsAnError: a size field sent blank (a form field emptied, or
// letters a number input dropped) is an error, never the default.
func TestBlankSizeIsAnError(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for _, field := range []string{"n", "d", "br", "bc", "batch", "heads"} {
		q := url.Values{"n": {"8"}, "d": {"4"}, "br": {"2"}, "bc": {"2"}}
		q.Set(field, "")
		res, body := get(t, ts.URL+"/api/config?"+q.Encode())
		var e apiErrorBody
		if res.StatusCode != 400 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Fields.ByField()[field], "required") {
			t.Errorf("%s blank: %d %s", field, res.StatusCode, body)
		}
	}
}

// TestStepperStepParam: steps count from 1 in the URL as on the page; a step
// that is not a number is reported, not silently dropped.
func TestStepperStepParam(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for q, want := range map[string]struct {
		step    int
		problem string
	}{"step=5": {5, ""}, "": {0, ""}, "step=0": {0, "from 1"}, "step=abc": {0, "whole number"}, "step=-3": {0, "from 1"}} {
		_, body := get(t, ts.URL+"/step?n=8&d=4&br=2&bc=2&"+q)
		var data struct {
			Step      int
			StepError string `json:"step_error"`
		}
		if err := json.Unmarshal([]byte(text(findNode(parse(t, body), "id", "page-data"))), &data); err != nil {
			t.Fatal(err)
		}
		if data.Step != want.step || (want.problem == "") != (data.StepError == "") || !strings.Contains(data.StepError, want.problem) {
			t.Errorf("%q: step %d, problem %q; want %d, %q", q, data.Step, data.StepError, want.step, want.problem)
		}
	}
}

// TestComparePair: the side by side runs the float32 pair, the bf16 one or
// the backward one, and names the field when asked for another.
func TestComparePair(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for pair, want := range map[string][2]string{"": {"flash2", "naive"}, "f32": {"flash2", "naive"}, "bf16": {"flash2_fast", "naive_mma"}, "bwd": {"flash2_bwd", "naive_bwd"}} {
		_, body := get(t, ts.URL+"/compare?n=40&d=16&br=16&bc=16&seed=4&pair="+pair)
		var data struct {
			Valid      bool
			FlashQuery string `json:"flash_query"`
			NaiveQuery string `json:"naive_query"`
		}
		if err := json.Unmarshal([]byte(text(findNode(parse(t, body), "id", "compare-data"))), &data); err != nil || !data.Valid {
			t.Fatalf("pair %q: %+v %v", pair, data, err)
		}
		f, _ := url.ParseQuery(data.FlashQuery)
		n, _ := url.ParseQuery(data.NaiveQuery)
		if f.Get("variant") != want[0] || n.Get("variant") != want[1] {
			t.Errorf("pair %q runs %s and %s", pair, f.Get("variant"), n.Get("variant"))
		}
	}
	_, body := get(t, ts.URL+"/compare?n=40&d=16&br=16&bc=16&pair=fp8")
	if msg := text(findNode(parse(t, body), "id", "cerr-pair")); !strings.Contains(msg, "pair must be f32, bf16 or bwd") {
		t.Errorf("a bad pair says %q", msg)
	}
}
