package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flashstep/internal/testrand"
	"flashstep/lessons"
	"flashstep/runner"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"
	"golang.org/x/net/html"
)

// badValue is what a careless or hostile client puts in a field.
type badValue struct{ name, value, kind string }

// badValues, by kind: nothing, words, numbers no field takes (or not
// every field: a seed of 0 is a seed), a value longer than any field's,
// and a megabyte, past what the server reads of a request at all.
var badValues = []badValue{
	{"empty", "", "empty"},
	{"letters", "abc", "words"},
	{"enum", "no-such-thing", "words"},
	{"negative", "-7", "number"},
	{"zero", "0", "number"},
	{"2^63", "9223372036854775808", "number"},
	{"NaN", "NaN", "number"},
	{"1e9", "1000000000", "number"},
	{"64KB", strings.Repeat("x", 64<<10), "long"},
	{"1MB", strings.Repeat("x", 1<<20), "megabyte"},
}

// badValuesFor is the bad values a route's fields get. A whole run gives
// every field every value. Under -short a field gets one value of each
// kind, drawn from those it refuses where it takes some (testrand: a
// failure says how to replay the draw), and the megabyte goes to one
// field of the route only: it is refused by the server's limit on a
// request's header or body, before any field is read.
func badValuesFor(t *testing.T, rc routeCase) map[string][]badValue {
	out := map[string][]badValue{}
	if !testing.Short() {
		for _, field := range rc.fields {
			out[field] = badValues
		}
		return out
	}
	rng := testrand.New(t)
	for _, field := range rc.fields {
		byKind := map[string][]badValue{}
		var kinds []string
		for _, bad := range badValues {
			if bad.kind == "megabyte" {
				continue
			}
			if byKind[bad.kind] == nil {
				kinds = append(kinds, bad.kind)
			}
			byKind[bad.kind] = append(byKind[bad.kind], bad)
		}
		for _, kind := range kinds {
			pick := byKind[kind]
			var refused []badValue
			for _, bad := range pick {
				if !slicesContains(rc.accept[field], bad.name) {
					refused = append(refused, bad)
				}
			}
			if len(refused) > 0 {
				pick = refused
			}
			out[field] = append(out[field], pick[rng.IntN(len(pick))])
		}
	}
	if len(rc.fields) > 0 {
		field := rc.fields[rng.IntN(len(rc.fields))]
		out[field] = append(out[field], badValues[len(badValues)-1])
	}
	return out
}

// routeCase is how the bad-input test calls one route: a valid request,
// the fields it poisons one at a time, and the bad values a field may
// take as valid (a seed of 0 is a seed).
type routeCase struct {
	path   string     // the pattern with its parameters filled
	base   url.Values // a valid request's fields
	fields []string   // the fields to poison: in the query, or the body
	body   string     // "form" or "json" for a POST body, "text" for a body that is field source alone; "" for the query
	page   bool       // a page: a bad field is shown beside it (200), or the page is a 4xx
	accept map[string][]string
	// pathParam poisons the route's URL parameter instead (its name).
	pathParam string
	ws        bool // a websocket: the answer is a message or a close frame
}

// sourceAccepts are the bad values a kernel's source may be: any text
// within lab.MaxSourceBytes (64 KiB) is a source, which the track off
// refuses as a whole; the megabyte is the body's limit.
var sourceAccepts = []string{"empty", "letters", "enum", "negative", "zero", "2^63", "NaN", "1e9", "64KB"}

// run is the valid run most rows start from.
var run = url.Values{"variant": {"flash2"}, "n": {"16"}, "d": {"4"}, "br": {"4"}, "bc": {"4"}, "seed": {"3"}}

var runFields = []string{"variant", "n", "nq", "d", "br", "bc", "batch", "heads", "kv_heads", "causal", "pattern", "seed", "trace_bh", "trace_q", "engine", "mode"}

// valid values among the bad ones, per config field.
var runAccepts = map[string][]string{
	"seed":     {"zero", "1e9", "2^63"},
	"causal":   {"zero", "empty"},
	"trace_bh": {"empty", "zero"},
	"trace_q":  {"empty", "zero"},
	"engine":   {"empty"},
	"mode":     {"empty"},
	"variant":  {"empty"},
	"pattern":  {"empty"},
	"nq":       {"empty"}, // blank: as many queries as keys
	"kv_heads": {"empty"}, // blank: as many K/V heads as heads
}

func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// routeCases is one row per route of routes.go, by "METHOD pattern".
func routeCases(t *testing.T) map[string]routeCase {
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	l := course.Lessons[0]
	cp := l.Checkpoints[0]
	runOnly := map[string]routeCase{}
	for _, p := range []string{"/api/config", "/api/trace", "/api/trace/bytes", "/api/traffic"} {
		runOnly["GET "+p] = routeCase{path: p, base: run, fields: append(runFields, "ns"), accept: runAccepts}
	}
	pageAccepts := map[string][]string{"step": {"empty", "letters", "negative", "zero", "NaN", "enum", "64KB", "1MB", "2^63", "1e9"},
		"embed": {"empty", "letters", "negative", "zero", "NaN", "enum", "64KB", "1MB", "2^63", "1e9"}}
	for k, v := range runAccepts {
		pageAccepts[k] = v
	}
	cases := map[string]routeCase{
		"GET /":                       {path: "/"},
		"GET /step":                   {path: "/step", base: run, fields: append(runFields, "step", "embed"), page: true, accept: pageAccepts},
		"GET /lessons":                {path: "/lessons"},
		"GET /lessons/{slug}":         {path: "/lessons/" + l.Slug, pathParam: "slug"},
		"GET /playground":             {path: "/playground"},
		"GET /docs/{name}":            {path: "/docs/LADDER.md", pathParam: "name"},
		"GET /glossary":               {path: "/glossary"},
		"GET /lab":                    {path: "/lab"},
		"GET /lab/{id}":               {path: "/lab/online-step", pathParam: "id"},
		"GET /lab/{id}/solution":      {path: "/lab/online-step/solution", pathParam: "id"},
		"GET /lab/{id}/grade.js":      {path: "/lab/online-step/grade.js", pathParam: "id"},
		"GET /lab/{id}/recorded.json": {path: "/lab/online-kernel/recorded.json", pathParam: "id"},
		// The kernel track is off on this server: a submission is refused,
		// saying what the track needs; an unknown submission is a 404. The
		// source is the body: past lab.MaxSourceBytes it is a 413 naming the
		// limit (a source that names a file, a loop exercise, another site's
		// page: TestKernelSubmissionRefusals).
		"POST /api/lab/{id}/submissions": {path: "/api/lab/causal-kernel/submissions", pathParam: "id", fields: []string{"check", "room", "source"}, body: "text",
			accept: map[string][]string{"check": {"empty"}, "room": {"empty"}, "source": sourceAccepts}},
		// From a lab room's page: a code that names no room is a 404, and
		// counts against the address's wrong codes (TestWrongRoomCodesCountOnEveryRoute).
		"POST /r/{code}/lab/{id}/submissions": {path: "/r/K7QM4TXZ/lab/causal-kernel/submissions", pathParam: "code", fields: []string{"check", "source"}, body: "text",
			accept: map[string][]string{"check": {"empty"}, "source": sourceAccepts}},
		"GET /api/lab/submissions/{ticket}": {path: "/api/lab/submissions/0123456789abcdef01234567", pathParam: "ticket"},
		"GET /kernels":                      {path: "/kernels"},
		"GET /ladder":                       {path: "/ladder"},
		"GET /sweep":                        {path: "/sweep"},
		"GET /compare":                      {path: "/compare", base: url.Values{"n": {"16"}, "d": {"4"}, "br": {"4"}, "bc": {"4"}}, fields: []string{"n", "d", "br", "bc", "seed", "pattern", "causal", "trace_q", "pair"}, page: true, accept: map[string][]string{"seed": {"zero", "1e9", "2^63"}, "causal": {"zero", "empty"}, "trace_q": {"empty", "zero"}, "pair": {"empty"}, "pattern": {"empty"}}},
		"GET /api/kernels":                  {path: "/api/kernels"},
		"GET /api/source":                   {path: "/api/source", base: url.Values{"variant": {"flash2"}}, fields: []string{"variant"}},
		"GET /api/memory":                   {path: "/api/memory", base: url.Values{"b": {"1"}, "h": {"1"}, "n": {"1024"}, "d": {"64"}}, fields: []string{"b", "h", "n", "d", "dtype", "pass"}, accept: map[string][]string{"dtype": {"empty"}, "pass": {"empty"}}},
		"GET /api/traffic/measured":         {path: "/api/traffic/measured"},
		"POST /api/sweeps":                  {path: "/api/sweeps", base: url.Values{"engine": {"cpu"}, "n": {"64"}, "d": {"16"}, "causal": {"0"}, "repeats": {"1"}}, fields: []string{"engine", "n", "d", "causal", "variants", "batch", "heads", "repeats", "ns"}, body: "form", accept: map[string][]string{"engine": {"empty"}, "n": {"empty"}, "d": {"empty"}, "causal": {"empty", "zero"}, "variants": {"empty"}, "batch": {"empty", "zero"}, "heads": {"empty", "zero"}, "repeats": {"empty"}}},
		"GET /api/sweeps/{id}":              {path: "/api/sweeps/recorded", pathParam: "id"},
		"DELETE /api/sweeps/{id}":           {path: "/api/sweeps/nope", pathParam: "id"},
		"GET /api/sdpa":                     {path: "/api/sdpa"},
		"POST /api/checkpoints/{lesson}/{id}": {path: "/api/checkpoints/" + l.Slug + "/" + cp.ID, base: url.Values{"answer": {"1"}}, fields: []string{"answer", "reveal", "extra"}, body: "json",
			accept: map[string][]string{"answer": {"empty", "letters", "negative", "zero", "2^63", "NaN", "1e9", "enum"}}},
		"GET /api/loop":        {path: "/api/loop", base: with(run, "q", "0", "bh", "0", "slip", "stale-max"), fields: append(runFields, "q", "bh", "slip"), accept: with2(runAccepts, "q", "empty", "zero", "bh", "empty", "zero", "slip", "empty")},
		"GET /ws/trace":        {path: "/ws/trace", base: run, fields: append(runFields, "ns"), accept: runAccepts, ws: true},
		"POST /rooms":          {path: "/rooms", base: url.Values{"page": {"step"}, "query": {run.Encode()}, "step": {"1"}}, fields: []string{"page", "query", "step", "lesson", "widget"}, body: "form", accept: map[string][]string{"page": {"empty"}, "step": {"empty", "letters", "zero", "NaN", "enum", "negative", "2^63", "1e9"}, "lesson": {"empty"}, "widget": {"empty"}}},
		"POST /api/rooms":      {path: "/api/rooms", base: url.Values{"page": {"step"}, "query": {run.Encode()}}, fields: []string{"page", "query", "lesson", "widget", "extra"}, body: "json", accept: map[string][]string{"page": {"empty"}, "lesson": {"empty"}, "widget": {"empty"}}},
		"GET /join":            {path: "/join", base: url.Values{"code": {"K7QM4TXZ"}}, fields: []string{"code"}, page: true},
		"GET /r/{code}":        {path: "/r/K7QM4TXZ", pathParam: "code"},
		"GET /r/{code}/ws":     {path: "/r/K7QM4TXZ/ws", pathParam: "code", ws: true},
		"GET /r/{code}/events": {path: "/r/K7QM4TXZ/events", pathParam: "code"},
		"POST /r/{code}/send":  {path: "/r/K7QM4TXZ/send", pathParam: "code"},
		"GET /r/{code}/qr.svg": {path: "/r/K7QM4TXZ/qr.svg", pathParam: "code"},
		"GET /debug/stats":     {path: "/debug/stats"},
		"GET /healthz":         {path: "/healthz"},
		"GET /static/*":        {path: "/static/js/stepper.js", pathParam: "*"},
	}
	for k, v := range runOnly {
		cases[k] = v
	}
	return cases
}

func with2(m map[string][]string, kv ...string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		out[k] = v
	}
	key := ""
	for _, s := range kv {
		switch s {
		case "empty", "zero", "letters", "negative", "NaN", "enum", "1e9", "2^63", "64KB", "1MB":
			out[key] = append(out[key], s)
		default:
			key = s
		}
	}
	return out
}

// TestEveryRouteTakesBadInput sends every bad value to every field of
// every route (under -short, one of each kind: badValuesFor): each answer
// comes within 2 s, never a 5xx, and a rejected value is a 4xx (a page:
// the error beside its field) naming the field. A body promised and never
// sent is answered 408 within the body deadline, on a server whose
// deadline is short (checkLateBodies, every route at once). A route added to routes.go without a
// row here fails the test.
func TestEveryRouteTakesBadInput(t *testing.T) {
	t.Parallel()
	app, ts := newTestServer(t, runner.Mirror{})
	_, late := newSlowBodyServer(t, runner.Mirror{})
	cases := routeCases(t)
	var routes []string
	chi.Walk(app.routes().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, method+" "+route)
		return nil
	})
	sort.Strings(routes)
	for _, r := range routes {
		if _, ok := cases[r]; !ok {
			t.Errorf("route %s has no row in routeCases: say how it takes bad input", r)
		}
	}
	for name := range cases {
		found := false
		for _, r := range routes {
			found = found || r == name
		}
		if !found {
			t.Errorf("routeCases has a row for %s, which routes.go no longer has", name)
		}
	}
	t.Run("late bodies", func(t *testing.T) {
		t.Parallel()
		checkLateBodies(t, late.URL, cases)
	})
	for _, name := range routes {
		rc, ok := cases[name]
		if !ok {
			continue
		}
		method := strings.Fields(name)[0]
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			// The valid request answers, and fast.
			check(t, ts.URL, method, rc, rc.base, "", "")
			bads := badValuesFor(t, rc)
			for _, field := range rc.fields {
				for _, bad := range bads[field] {
					check(t, ts.URL, method, rc, with(rc.base, field, bad.value), field, bad.name)
				}
			}
			if rc.pathParam != "" {
				for _, bad := range badValues {
					if bad.value == "" || len(bad.value) > 1024 {
						continue // an empty segment is another route; a long one the 64KB field covers
					}
					p := rc.path
					if rc.pathParam == "*" {
						p = "/static/" + url.PathEscape(bad.value)
					} else {
						p = strings.Replace(p, pathValue(rc), url.PathEscape(bad.value), 1)
					}
					check(t, ts.URL, method, routeCase{path: p, body: rc.body, ws: rc.ws, pathParam: rc.pathParam}, nil, rc.pathParam, bad.name)
				}
			}
		})
	}
}

// pathValue is the part of a row's path that its URL parameter fills.
func pathValue(rc routeCase) string {
	parts := strings.Split(rc.path, "/")
	switch rc.pathParam {
	case "ticket":
		return parts[len(parts)-1]
	case "slug", "id", "name":
		if strings.HasPrefix(rc.path, "/api/lab/") {
			return parts[3]
		}
		if strings.HasPrefix(rc.path, "/api/checkpoints") {
			return parts[len(parts)-1]
		}
		return parts[len(parts)-1]
	case "code":
		return parts[2]
	}
	return ""
}

// clientAddrs hands each request an address of its own on loopback
// (127.0.0.0/8), so that the per-address limits, which the test does not
// probe, stay out of its way.
var clientAddrs atomic.Uint32

func newClient() (*http.Client, *websocket.Dialer) {
	n := clientAddrs.Add(1)
	ip := net.IPv4(127, byte(1+n>>16), byte(n>>8), byte(n))
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: clientPatience}
	client := &http.Client{Timeout: clientPatience,
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return client, &websocket.Dialer{NetDialContext: d.DialContext, HandshakeTimeout: clientPatience}
}

func check(t *testing.T, base, method string, rc routeCase, v url.Values, field, bad string) {
	t.Helper()
	client, dialer := newClient()
	if rc.ws {
		checkWS(t, dialer, base, rc, v, field, bad)
		return
	}
	target := base + rc.path
	var body io.Reader
	ctype := ""
	switch rc.body {
	case "form":
		body, ctype = strings.NewReader(v.Encode()), "application/x-www-form-urlencoded"
	case "text":
		q := with(v)
		q.Del("source")
		if len(q) > 0 {
			target += "?" + q.Encode()
		}
		body, ctype = strings.NewReader(v.Get("source")), "text/plain"
	case "json":
		m := map[string]any{}
		for k := range v {
			m[k] = v.Get(k)
		}
		if r, ok := m["reveal"]; ok && r != "" {
			m["reveal"] = r // a string where a boolean goes: a bad type
		}
		b, _ := json.Marshal(m)
		body, ctype = bytes.NewReader(b), "application/json"
	default:
		if len(v) > 0 {
			target += "?" + v.Encode()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientPatience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, target, body)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	start := time.Now()
	res, err := client.Do(req)
	took := time.Since(start)
	what := fmt.Sprintf("%s %s with %s=%s", method, rc.path, field, bad)
	if field == "" {
		what = fmt.Sprintf("%s %s (valid)", method, rc.path)
	}
	if err != nil {
		if rc.body != "" && bad == "1MB" && (strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe")) {
			return // answered 413 and closed while the client still wrote its megabyte
		}
		t.Errorf("%s: %v", what, err)
		return
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if took > answerWithin {
		t.Errorf("%s took %v", what, took)
	}
	if method == http.MethodPost && rc.path == "/api/sweeps" && res.StatusCode == http.StatusAccepted {
		// An accepted sweep (an empty field takes its default) is cancelled
		// at once: the server queues eight, and the table sends more.
		var job struct{ ID string }
		if json.Unmarshal(data, &job) == nil && job.ID != "" {
			del, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/api/sweeps/"+job.ID, nil)
			if r, err := client.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	if res.StatusCode >= 500 {
		t.Errorf("%s: %d %.200s", what, res.StatusCode, data)
		return
	}
	if field == "" || slicesContains(rc.accept[field], bad) {
		return
	}
	if res.StatusCode == http.StatusRequestHeaderFieldsTooLarge && bad == "1MB" && rc.body == "" {
		return // a megabyte in the URL stops at the server's header limit, before any handler
	}
	if res.StatusCode == http.StatusRequestEntityTooLarge && rc.body != "" && (bad == "64KB" || bad == "1MB") {
		if !strings.Contains(string(data), "bytes") {
			t.Errorf("%s: 413 without the limit: %.200s", what, data)
		}
		return // the body's limit, said before any field is read
	}
	if rc.page && res.StatusCode == http.StatusOK {
		if msg := fieldErrorShown(data, field); msg == "" {
			t.Errorf("%s: 200 without an error beside %s", what, field)
		}
		return
	}
	if res.StatusCode < 400 {
		t.Errorf("%s: %d, want a 4xx naming %s: %.300s", what, res.StatusCode, field, data)
		return
	}
	if rc.pathParam == field || res.StatusCode == http.StatusNotFound {
		return // a path that names nothing is simply not found
	}
	if !strings.Contains(string(data), field) {
		t.Errorf("%s: %d does not name the field: %.300s", what, res.StatusCode, data)
	}
}

// checkWS opens a websocket as a page does: a valid request streams, a bad
// field is an error message naming it and a close frame, never a silent cut.
func checkWS(t *testing.T, dialer *websocket.Dialer, base string, rc routeCase, v url.Values, field, bad string) {
	t.Helper()
	target := "ws" + strings.TrimPrefix(base, "http") + rc.path
	if len(v) > 0 {
		target += "?" + v.Encode()
	}
	what := fmt.Sprintf("websocket %s with %s=%s", rc.path, field, bad)
	start := time.Now()
	conn, res, err := dialer.Dial(target, nil)
	if err != nil {
		if res != nil && res.StatusCode < 500 && (res.StatusCode == http.StatusRequestHeaderFieldsTooLarge || field != "") {
			return // refused before the upgrade, with a 4xx
		}
		t.Errorf("%s: %v", what, err)
		return
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(clientPatience))
	var said []string
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Errorf("%s: cut without a close frame: %v", what, err)
			} else {
				said = append(said, ce.Text)
				if ce.Code >= 1011 && ce.Code <= 1015 && ce.Code != 1013 {
					t.Errorf("%s: closed %d %s", what, ce.Code, ce.Text)
				}
			}
			break
		}
		if kind == websocket.TextMessage {
			said = append(said, string(data))
		}
	}
	if time.Since(start) > answerWithin {
		t.Errorf("%s took %v", what, time.Since(start))
	}
	all := strings.Join(said, " ")
	if field == "" || slicesContains(rc.accept[field], bad) {
		if field == "" && strings.Contains(all, `"error"`) {
			t.Errorf("%s (valid): %s", what, all)
		}
		return
	}
	if !strings.Contains(all, field) && field != rc.pathParam {
		t.Errorf("%s: the answer does not name the field: %.300s", what, all)
	}
	if field == rc.pathParam && all == "" {
		t.Errorf("%s: no reason given", what)
	}
}

func slicesContains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// fieldErrorShown is the text of the page's error for field, if any.
func fieldErrorShown(page []byte, field string) string {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return ""
	}
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && (attr(n, "data-field") == field || attr(n, "data-field") == "form" || attr(n, "id") == "join-error") {
			if s := text(n); s != "" {
				return s
			}
		}
	}
	return ""
}

// TestHeavyRunsAnswerFast asks the routes that answer at once (no trace to
// compute) about the largest runs their limits allow: 1×1 tiles at the
// largest N, the whole grid of batch-heads. Each answers within 2 s.
func TestHeavyRunsAnswerFast(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	heavy := []string{
		"variant=naive&n=4096&d=1&br=1&bc=1&trace_q=0-0",
		"variant=flash1&n=4096&d=1&br=1&bc=1&batch=16&heads=64&trace_bh=0-0&trace_q=0-0",
		"variant=naive_row&n=4096&d=256&br=1&bc=1&batch=16&heads=64&trace_bh=0-0&trace_q=0-0",
		"variant=flash2&n=4096&d=256&br=1&bc=1&batch=16&heads=64&causal=1",
		"variant=flash1&n=4096&d=1&br=1&bc=1&trace_q=0-100",
		"variant=naive&n=4096&d=1&br=1&bc=1&timing=1",
	}
	for _, q := range heavy {
		for _, path := range []string{"/api/config", "/api/traffic", "/step", "/compare", "/api/loop"} {
			extra := ""
			if path == "/api/loop" {
				extra = "&q=0&bh=0"
			}
			client, _ := newClient()
			start := time.Now()
			res, err := client.Get(ts.URL + path + "?" + q + extra)
			if err != nil {
				t.Errorf("%s?%s: %v", path, q, err)
				continue
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if took := time.Since(start); took > answerWithin || res.StatusCode >= 500 {
				t.Errorf("%s?%s: %d after %v", path, q, res.StatusCode, took)
			}
		}
	}
}
