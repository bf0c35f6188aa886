package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"flashstep/runner"
)

// slowBodyDeadline is the body deadline of the servers that test it: long
// enough for any body a test sends whole, short enough to wait out.
const slowBodyDeadline = 300 * time.Millisecond

func newSlowBodyServer(t *testing.T, r runner.Runner) (*Server, *httptest.Server) {
	t.Helper()
	return serveDeps(t, Deps{Engines: testEngines{Runner: r}, BodyTimeout: slowBodyDeadline})
}

// rawConn is one connection to a test server from a loopback address of
// its own (the per-address limits stay out of the way), every read and
// write of it bounded by clientPatience.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, base string) *rawConn {
	t.Helper()
	n := clientAddrs.Add(1)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, byte(1+n>>16), byte(n>>8), byte(n))}, Timeout: clientPatience}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(clientPatience))
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// send writes a request's head, promising a body by headers ("Content-Length:
// 1000" or "Transfer-Encoding: chunked"), and what of the body is given.
func (c *rawConn) send(t *testing.T, method, path, promise, body string) {
	t.Helper()
	_, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: flashstep\r\nContent-Type: application/json\r\nSec-Fetch-Site: same-origin\r\n%s\r\n\r\n%s", method, path, promise, body)
	if err != nil {
		t.Fatal(err)
	}
}

// answer reads the next answer whole: its status and body.
func (c *rawConn) answer(t *testing.T) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("the answer's body: %v", err)
	}
	return res, string(body)
}

// wantBodyRefused checks a late body's answer: 408 within the deadline
// (and not before it), JSON naming the limit, then the connection closed.
func (c *rawConn) wantBodyRefused(t *testing.T, what string, sent time.Time) {
	t.Helper()
	if err := c.bodyRefused(sent); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// bodyRefused is wantBodyRefused's check, as an error: a goroutine of
// checkLateBodies calls it where it may not end the test.
func (c *rawConn) bodyRefused(sent time.Time) error {
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return fmt.Errorf("the answer's body: %v", err)
	}
	took := time.Since(sent)
	var e apiErrorBody
	json.Unmarshal(raw, &e)
	if res.StatusCode != http.StatusRequestTimeout || e.Error != "the request body did not arrive within 0.3 s" || !res.Close {
		return fmt.Errorf("%s %q (close %v), want 408 naming the limit", res.Status, raw, res.Close)
	}
	if took < slowBodyDeadline || took > slowBodyDeadline+answerWithin {
		return fmt.Errorf("answered after %v, the deadline is %v", took, slowBodyDeadline)
	}
	if _, err := c.br.ReadByte(); err != io.EOF {
		return fmt.Errorf("the connection stays open after the 408: %v", err)
	}
	return nil
}

// A body trickled in a byte at a time, each byte in time but the whole
// late, is cut at the deadline: the deadline is the body's, not a read's.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	_, ts := newSlowBodyServer(t, runner.Mirror{})
	c := dialRaw(t, ts.URL)
	const length = 100 // 10 s at a byte every 100 ms: far past the deadline
	sent := time.Now()
	c.send(t, "POST", "/api/rooms", fmt.Sprintf("Content-Length: %d", length), "")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(slowBodyDeadline / 3)
		defer tick.Stop()
		for range length {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	c.wantBodyRefused(t, "a trickled body", sent)
}

// A body that comes within the deadline, even in pieces, is served; the
// deadline is lifted with it, so the connection, kept alive, takes another
// request after a pause longer than the deadline.
func TestBodyInTimeIsServed(t *testing.T) {
	t.Parallel()
	_, ts := newSlowBodyServer(t, runner.Mirror{})
	c := dialRaw(t, ts.URL)
	body := `{"page":"step","query":"variant=flash2&n=12&d=4&br=4&bc=3&seed=3"}`
	for i := range 2 {
		c.send(t, "POST", "/api/rooms", fmt.Sprintf("Content-Length: %d", len(body)), body[:10])
		time.Sleep(slowBodyDeadline / 3)
		io.WriteString(c, body[10:])
		if res, got := c.answer(t); res.StatusCode != http.StatusCreated {
			t.Fatalf("request %d: %s %s", i, res.Status, got)
		}
		time.Sleep(2 * slowBodyDeadline) // idle on the kept connection
	}
}

// A handler that takes longer than the deadline after its body has come
// keeps its request's context: the server's watch on the connection (does
// the client go away?) must not time out under it.
func TestSlowHandlerAfterItsBodyKeepsItsContext(t *testing.T) {
	t.Parallel()
	s := &Server{bodyTimeout: slowBodyDeadline}
	ts := httptest.NewServer(s.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, fmt.Sprint("the context ended while the handler worked: ", r.Context().Err()), http.StatusInternalServerError)
		case <-time.After(3 * slowBodyDeadline):
			w.Write(body)
		}
	})))
	t.Cleanup(ts.Close)
	res, err := http.Post(ts.URL, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(got) != "hello" {
		t.Fatalf("%s %q", res.Status, got)
	}
}

// A body larger than what is read ahead still reaches its handler whole,
// and a handler's own limit still answers 413.
func TestLargeBodiesReachTheirHandler(t *testing.T) {
	t.Parallel()
	s := &Server{bodyTimeout: 10 * time.Second}
	ts := httptest.NewServer(s.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n, err)
	})))
	t.Cleanup(ts.Close)
	for _, n := range []int{0, 1, bodyPrefetch - 1, bodyPrefetch, bodyPrefetch + 1, 3 * bodyPrefetch} {
		res, err := http.Post(ts.URL, "text/plain", bytes.NewReader(make([]byte, n)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := fmt.Sprint(n, nil); string(got) != want {
			t.Errorf("%d bytes: the handler read %q", n, got)
		}
	}
	_, app := newSlowBodyServer(t, runner.Mirror{})
	res, err := http.Post(app.URL+"/api/rooms", "application/json", bytes.NewReader(make([]byte, 2*bodyPrefetch)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the route's limit: %s", res.Status)
	}
}

// A chunked body that stops coming is cut like one with a length.
func TestChunkedBodyThatStopsIsCut(t *testing.T) {
	t.Parallel()
	_, ts := newSlowBodyServer(t, runner.Mirror{})
	c := dialRaw(t, ts.URL)
	sent := time.Now()
	c.send(t, "POST", "/api/rooms", "Transfer-Encoding: chunked", "5\r\n{\"pag\r\n")
	c.wantBodyRefused(t, "a chunked body that stops", sent)
}

// A long-lived request carries no body and outlives the deadline: a
// trace's websocket whose run takes longer than the deadline (a room's
// websocket and events: package classroom's tests).
func TestLongRequestsOutliveTheBodyDeadline(t *testing.T) {
	t.Parallel()
	cr := &countingRunner{gate: make(chan struct{})}
	_, ts := newSlowBodyServer(t, cr)
	trace := dial(t, wsURL(ts.URL, "variant=flash2&n=16&d=4&br=4&bc=4&seed=11"))
	defer trace.Close()
	time.Sleep(3 * slowBodyDeadline)
	close(cr.gate)
	if r := readAll(t, trace); r.close == nil || r.close.Code != 1000 || len(r.frames) == 0 {
		t.Fatalf("the trace's websocket after the deadline: %+v", r.close)
	}
}

// checkLateBodies promises every route a body, by length and by chunks,
// and sends none: each answer is 408 naming the limit, at the deadline, and
// the connection closes. Every route, whether it reads a body or not: a
// body promised holds its connection wherever it is sent. The routes wait
// out their deadlines together, not one after another.
func checkLateBodies(t *testing.T, base string, routes map[string]routeCase) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for name, rc := range routes {
		method := strings.Fields(name)[0]
		for _, promise := range []string{"Content-Length: 1000", "Transfer-Encoding: chunked"} {
			c := dialRaw(t, base)
			sent := time.Now()
			c.send(t, method, rc.path, promise, "")
			wg.Go(func() {
				if err := c.bodyRefused(sent); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s promising a body (%s): %v", method, rc.path, promise, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
}
