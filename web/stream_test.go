package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/problem"
	"flashstep/runner"

	"github.com/gorilla/websocket"
)

func wsURL(ts string, query string) string {
	return "ws" + strings.TrimPrefix(ts, "http") + "/ws/trace?" + query
}

func dial(t testing.TB, u string) *websocket.Conn {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, res)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return conn
}

// received is everything a client got on one connection.
type received struct {
	frames [][]byte // binary frames, in order
	texts  []map[string]any
	close  *websocket.CloseError
}

func readAll(t testing.TB, conn *websocket.Conn) received {
	t.Helper()
	var got received
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v", err)
			}
			got.close = ce
			return got
		}
		if kind == websocket.BinaryMessage {
			got.frames = append(got.frames, data)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("text frame is not JSON: %q", data)
		}
		got.texts = append(got.texts, m)
	}
}

// TestStreamWholeTrace receives a whole trace over a real websocket and
// checks it record by record against the mirror: the header comes alone in
// the first frame, records follow, then "done" and a normal close.
func TestStreamWholeTrace(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	rng := testrand.New(t)
	for range 5 {
		c := kernels.Config{Variant: instrument.Variants[rng.IntN(2)], N: 5 + rng.IntN(40), D: 1 + rng.IntN(16),
			Br: 1 + rng.IntN(5), Bc: 1 + rng.IntN(5), Batch: 1, Heads: 1 + rng.IntN(2), Causal: rng.IntN(2) == 0,
			Pattern: instrument.Patterns[rng.IntN(3)], Seed: rng.Uint64()}
		conn := dial(t, wsURL(ts.URL, c.Values().Encode()))
		got := readAll(t, conn)
		conn.Close()
		if got.close.Code != websocket.CloseNormalClosure {
			t.Fatalf("closed with %v", got.close)
		}
		if len(got.texts) != 1 || got.texts[0]["type"] != "done" {
			t.Fatalf("final messages %v", got.texts)
		}
		h, err := instrument.NewDecoder(bytes.NewReader(got.frames[0]))
		if err != nil || h.Header().HeaderBytes() != len(got.frames[0]) {
			t.Fatalf("first frame is not exactly the header: %v", err)
		}
		// Decode the stream and the mirror's own run; compare every record.
		stream := bytes.Join(got.frames, nil)
		sh, srecs, err := instrument.ReadAll(bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		var direct []*instrument.Record
		if err := kernels.RunMirror(context.Background(), kernelstest.MustRun(t, c), func(r *instrument.Record) error { direct = append(direct, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(srecs) != sh.Records || len(srecs) != len(direct) || int(got.texts[0]["records"].(float64)) != len(srecs) {
			t.Fatalf("%d records streamed, header says %d, mirror made %d", len(srecs), sh.Records, len(direct))
		}
		for k := range direct {
			if !instrument.SameBits(srecs[k], direct[k]) {
				t.Fatalf("record %d (%s) differs from the mirror's", k, direct[k].Kind)
			}
		}
	}
}

func TestStreamInvalidConfig(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	conn := dial(t, wsURL(ts.URL, "n=9999&bc=0"))
	defer conn.Close()
	got := readAll(t, conn)
	if got.close.Code != websocket.ClosePolicyViolation || len(got.frames) != 0 {
		t.Fatalf("closed with %v after %d frames", got.close, len(got.frames))
	}
	msg := got.texts[0]
	fields, _ := json.Marshal(msg["fields"])
	if msg["type"] != "error" || !strings.Contains(string(fields), `"field":"n"`) || !strings.Contains(string(fields), "4096") {
		t.Fatalf("error message %v", msg)
	}
}

// gatedRunner emits a header, then a record each time the test lets one
// out (feed), until cancelled: a run a test can act in the middle of.
func gatedRunner(gate <-chan struct{}) fakeRunner {
	return fakeRunner{run: func(ctx context.Context, r kernels.Run, emit func([]byte) error) error {
		c := r.Config()
		h := c.Header(instrument.SourceGPU, "gated")
		h.Records, h.Timing = 1<<20, true
		head, _ := instrument.AppendHeader(nil, &h)
		if err := emit(head); err != nil {
			return err
		}
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-gate:
			}
			rec := &instrument.Record{Kind: instrument.KindTiming, BH: 0, I: 0, J: 0, RowsValid: h.RowsValid(0), ColsValid: h.ColsValid(0)}
			b, _ := instrument.AppendRecord(nil, &h, rec)
			if err := emit(b); err != nil {
				return err
			}
		}
	}}
}

// feed lets n more records of a gated run out, failing the test if the
// run stops taking them.
func feed(t *testing.T, gate chan<- struct{}, n int) {
	t.Helper()
	for k := range n {
		select {
		case gate <- struct{}{}:
		case <-time.After(clientPatience):
			t.Fatalf("the run took %d of %d records, then no more", k, n)
		}
	}
}

// flood lets records of gated runs out for as long as the test runs: for
// a test with several runs on one gate, where feeding a count would let one
// run take another's share.
func flood(t *testing.T, gate chan<- struct{}) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case gate <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
}

// waitFrames reads until n binary frames have arrived.
func waitFrames(t *testing.T, conn *websocket.Conn, n int) {
	t.Helper()
	for got := 0; got < n; {
		kind, _, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("after %d frames: %v", got, err)
		}
		if kind == websocket.BinaryMessage {
			got++
		}
	}
}

func TestStreamOversizedMessageCloses1009OthersUnaffected(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	_, ts := newTestServer(t, gatedRunner(gate))
	victim := dial(t, wsURL(ts.URL, "n=8"))
	defer victim.Close()
	bystander := dial(t, wsURL(ts.URL, "n=8"))
	defer bystander.Close()
	flood(t, gate)
	waitFrames(t, victim, 2)
	waitFrames(t, bystander, 2)
	victim.WriteMessage(websocket.TextMessage, []byte(`{"type":"cancel","pad":"`+strings.Repeat("x", 4096)+`"}`))
	got := readAll(t, victim)
	if got.close == nil || got.close.Code != websocket.CloseMessageTooBig {
		t.Fatalf("oversized message: closed with %v", got.close)
	}
	waitFrames(t, bystander, 20) // still streaming
}

func TestStreamMalformedMessageCloses1008(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, gatedRunner(nil)) // the header, then nothing
	for _, msg := range [][]byte{[]byte("not json"), []byte(`{"type":"explode"}`), []byte(`{"type":"cancel","x":1}`)} {
		conn := dial(t, wsURL(ts.URL, "n=8"))
		waitFrames(t, conn, 1)
		conn.WriteMessage(websocket.TextMessage, msg)
		got := readAll(t, conn)
		conn.Close()
		if got.close == nil || got.close.Code != websocket.ClosePolicyViolation {
			t.Fatalf("%q: closed with %v", msg, got.close)
		}
	}
	conn := dial(t, wsURL(ts.URL, "n=8"))
	defer conn.Close()
	waitFrames(t, conn, 1)
	conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3})
	if got := readAll(t, conn); got.close == nil || got.close.Code != websocket.ClosePolicyViolation {
		t.Fatalf("binary message: closed with %v", got.close)
	}
}

func TestStreamCancel(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	_, ts := newTestServer(t, gatedRunner(gate))
	conn := dial(t, wsURL(ts.URL, "n=8"))
	defer conn.Close()
	feed(t, gate, 1)
	waitFrames(t, conn, 2) // the header and a record: mid-run
	conn.WriteJSON(map[string]string{"type": "cancel"})
	got := readAll(t, conn)
	if got.close.Code != websocket.CloseNormalClosure || len(got.texts) == 0 || got.texts[len(got.texts)-1]["type"] != "cancelled" {
		t.Fatalf("cancel: texts %v, close %v", got.texts, got.close)
	}
}

func TestStreamShutdownCloses1001(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	app, ts := newTestServer(t, gatedRunner(gate))
	conn := dial(t, wsURL(ts.URL, "n=8"))
	defer conn.Close()
	feed(t, gate, 1)
	waitFrames(t, conn, 2) // the header and a record: mid-run
	app.CloseStreams()
	got := readAll(t, conn)
	if got.close == nil || got.close.Code != websocket.CloseGoingAway {
		t.Fatalf("shutdown: closed with %v", got.close)
	}
	// New streams are refused with 1001 too.
	late := dial(t, wsURL(ts.URL, "n=8"))
	defer late.Close()
	if got := readAll(t, late); got.close == nil || got.close.Code != websocket.CloseGoingAway {
		t.Fatalf("after shutdown: %v", got.close)
	}
}

func TestStreamRunFailureIsReportedAndServerGoesOn(t *testing.T) {
	t.Parallel()
	fail := true
	_, ts := newTestServer(t, fakeRunner{run: func(ctx context.Context, r kernels.Run, emit func([]byte) error) error {
		if fail {
			return errors.New("CUDA error: an illegal memory access was encountered")
		}
		return runner.Mirror{}.Run(ctx, r, emit)
	}})
	conn := dial(t, wsURL(ts.URL, "n=8"))
	got := readAll(t, conn)
	conn.Close()
	if got.close.Code != websocket.CloseInternalServerErr || len(got.texts) != 1 || !strings.Contains(got.texts[0]["error"].(string), "illegal memory access") {
		t.Fatalf("failed run: %v %v", got.texts, got.close)
	}
	fail = false
	conn = dial(t, wsURL(ts.URL, "n=8"))
	defer conn.Close()
	if got := readAll(t, conn); got.close.Code != websocket.CloseNormalClosure {
		t.Fatalf("the next run: %v", got.close)
	}
}

func TestStreamRejectsOtherOrigins(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	hdr := http.Header{"Origin": {"http://evil.example"}}
	_, res, err := websocket.DefaultDialer.Dial(wsURL(ts.URL, "n=8"), hdr)
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin dial: %v %v", err, res)
	}
	u, _ := url.Parse(ts.URL)
	conn, _, err := websocket.DefaultDialer.Dial(wsURL(ts.URL, "n=8"), http.Header{"Origin": {"http://" + u.Host}})
	if err != nil {
		t.Fatalf("same-origin dial: %v", err)
	}
	conn.Close()
}

// BenchmarkStreamFirstStep measures a traced run of one head with N=1024,
// d=64, Br=Bc=64 over a real websocket: from the request to the first step
// frame (after header and inputs), and to the whole trace.
func BenchmarkStreamFirstStep(b *testing.B) {
	_, ts := newTestServer(&testing.T{}, runner.Mirror{})
	defer ts.Close()
	u := wsURL(ts.URL, "n=1024&d=64&br=64&bc=64&seed="+strconv.Itoa(testrand.New(b).IntN(1000)))
	var first, whole time.Duration
	for b.Loop() {
		start := time.Now()
		conn := dial(b, u)
		var h *instrument.Header
		var buf []byte
		steps := 0
		for {
			kind, data, err := conn.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if kind == websocket.TextMessage {
				break
			}
			if h == nil {
				d, err := instrument.NewDecoder(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				h = d.Header()
				buf = data
				continue
			}
			buf = append(buf, data...)
			if steps == 0 && len(buf) > h.HeaderBytes()+h.RecordBytes(instrument.KindInputs) {
				first += time.Since(start)
				steps++
			}
		}
		whole += time.Since(start)
		conn.Close()
		if _, recs, err := instrument.ReadAll(bytes.NewReader(buf)); err != nil || len(recs) != h.Records {
			b.Fatalf("incomplete trace: %v", err)
		}
	}
	b.ReportMetric(float64(first.Microseconds())/1e3/float64(b.N), "ms-to-first-step")
	b.ReportMetric(float64(whole.Microseconds())/1e3/float64(b.N), "ms-whole-trace")
}

// TestGPUBusyAndLost: a full GPU queue answers 503 "GPU busy, N runs ahead
// of you" over HTTP and close 1013 over the websocket; a lost worker fails
// just that run with its message.
func TestGPUBusyAndLost(t *testing.T) {
	t.Parallel()
	var errToGive error
	_, ts := newTestServer(t, fakeRunner{run: func(ctx context.Context, _ kernels.Run, emit func([]byte) error) error {
		return errToGive
	}})
	errToGive = &problem.Error{Code: problem.Busy, Message: "GPU busy, 3 runs ahead of you", Ahead: 3}
	res, body := get(t, ts.URL+"/api/trace?n=8")
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "GPU busy, 3 runs ahead of you") {
		t.Fatalf("busy over HTTP: %d %s", res.StatusCode, body)
	}
	conn := dial(t, wsURL(ts.URL, "n=8"))
	got := readAll(t, conn)
	conn.Close()
	if got.close.Code != websocket.CloseTryAgainLater || len(got.texts) != 1 || got.texts[0]["error"] != "GPU busy, 3 runs ahead of you" {
		t.Fatalf("busy over the websocket: %v %v", got.texts, got.close)
	}
	errToGive = problem.New(problem.Lost, "the GPU worker died during the run; it has been restarted, run again")
	res, _ = get(t, ts.URL+"/api/trace?n=8")
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("lost worker over HTTP: %d", res.StatusCode)
	}
}
