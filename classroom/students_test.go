package classroom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"flashstep/classroom"
	"flashstep/labrun"
	"flashstep/labrun/labruntest"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/web"

	"github.com/gorilla/websocket"
)

// Who a room counts, and what its codes tell a guesser (issue 29).

// kernelTrackOn is a server whose lab runs kernels on the stand-in worker
// (labruntest).
func kernelTrackOn(t *testing.T) (*testApp, *labrun.Service, string) {
	t.Helper()
	svc := labrun.New(labrun.Options{Command: labruntest.Command(), Limit: 5 * time.Second})
	t.Cleanup(svc.Close)
	app, ts := serveDeps(t, web.Deps{Lab: svc})
	return app, svc, ts.URL
}

// postSource posts a kernel's source to path with the headers given.
func postSource(t *testing.T, url, source string, h http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(source))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestCookielessSocketsAreNoStudents: thirty websockets and an events
// stream that bring no identity the room issued (none, a made-up one, one
// with its MAC altered, another room's) beside one student: the tally
// counts one student, and their answers and lab results are refused with
// a notice that names the room's page and its cookie. The student's
// answer counts once.
func TestCookielessSocketsAreNoStudents(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{StudentRate: 1000})
	c := createRoom(t, ts.URL, roomRun)
	other := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	student := joinRoom(t, ts.URL, c.Code, "")
	tallies(t, pres, "the student", nil, func(tl map[string]any) bool { return num(tl["students"]) == 1 })
	want := openPoll(t, pres, student)

	altered := []byte(student.pass)
	altered[len(altered)-1] ^= 1
	forged := []string{"", "forged", rooms.NewStudent(), string(altered), rooms.NewStudent() + student.pass[strings.Index(student.pass, "."):], studentPass(t, ts.URL, other.Code)}
	var followers []*participant
	for k := range 30 {
		h := http.Header{}
		if f := forged[k%len(forged)]; f != "" {
			h.Set("Cookie", classroom.StudentCookie+"="+f)
		}
		p, res, err := dialRoom(ts.URL, c.Code, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.conn.Close() })
		if studentCookieOf(res) != nil {
			t.Fatal("a websocket issued an identity")
		}
		p.next(t, "hello")
		followers = append(followers, p)
	}
	for _, p := range followers {
		// One at a time: a mailbox keeps the latest notice only.
		for _, m := range []map[string]string{{"type": "answer", "answer": fmt.Sprintf("%.4f", want+50)}, {"type": "lab_result", "answer": "pass"}} {
			p.send(t, m)
			n := p.next(t, "notice")
			if n["field"] != "student" || !strings.Contains(n["error"].(string), "/r/"+c.Code) || !strings.Contains(n["error"].(string), "cookie") {
				t.Fatalf("a follower's message was answered %v", n)
			}
		}
	}
	// The events stream, without a cookie.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/r/"+c.Code+"/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if studentCookieOf(res) != nil {
		t.Fatal("an events stream issued an identity")
	}
	student.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want)})
	atMostOne := func(tl map[string]any) {
		if num(tl["students"]) > 1 || num(tl["answered"]) > 1 {
			t.Fatalf("followers counted: %v", tl)
		}
	}
	tl := tallies(t, pres, "32 connections", atMostOne, func(tl map[string]any) bool {
		return num(tl["connections"]) == 32 && num(tl["answered"]) == 1
	})
	if num(tl["students"]) != 1 {
		t.Fatalf("one student and 31 followers: %v", tl)
	}
}

// TestKernelTicketCountsForItsStudentOnly: a kernel submitted from a lab
// room's page is its student's. Its ticket, passed to another student or
// replayed from twenty cookieless sockets, is refused; a ticket from the
// API (no student), or from another room, counts for nobody; its own
// student's report counts once however often it is replayed.
func TestKernelTicketCountsForItsStudentOnly(t *testing.T) {
	t.Parallel()
	_, svc, base := kernelTrackOn(t)
	code, body := postSource(t, base+"/api/rooms", `{"page":"lab","query":"online-kernel"}`, http.Header{"Content-Type": {"application/json"}})
	if code != http.StatusCreated {
		t.Fatalf("a lab room: %d %s", code, body)
	}
	var c classroom.Created
	decodeJSON(t, body, &c)
	pres := joinRoom(t, base, c.Code, c.Token)
	a, b := joinRoom(t, base, c.Code, ""), joinRoom(t, base, c.Code, "")
	labTally := func(what string, tried, passed int) {
		t.Helper()
		tallies(t, pres, what, func(tl map[string]any) {
			if l, ok := tl["lab"].(map[string]any); ok && num(l["passed"]) > 1 {
				t.Fatalf("%d passes counted from one passing kernel: %v", num(l["passed"]), tl)
			}
		}, func(tl map[string]any) bool {
			l, ok := tl["lab"].(map[string]any)
			return ok && num(l["tried"]) == tried && num(l["passed"]) == passed
		})
	}
	done := func(code int, body string) string {
		t.Helper()
		var sub struct{ ID string }
		decodeJSON(t, body, &sub)
		if code != http.StatusAccepted {
			t.Fatalf("a submission: %d %s", code, body)
		}
		for range 400 {
			if st, _ := svc.Status(sub.ID); st.State == "done" {
				return sub.ID
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatal("no verdict in 10 s")
		return ""
	}
	fromPage := func(p *participant) http.Header {
		return http.Header{"Cookie": {classroom.StudentCookie + "=" + p.pass}}
	}
	aTicket := done(postSource(t, base+"/r/"+c.Code+"/lab/online-kernel/submissions", "// PASS", fromPage(a)))
	if st, _ := svc.Status(aTicket); st.Room != c.Code || st.Student == "" || st.Verdict.Verdict != "pass" {
		t.Fatalf("a's submission: %+v", st)
	}

	// b sends a's ticket: not b's.
	b.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass", Ticket: aTicket})
	if n := b.next(t, "notice"); n["field"] != "ticket" || !strings.Contains(n["error"].(string), "not yours") {
		t.Fatalf("another student's ticket: %v", n)
	}
	// Twenty sockets without a cookie replay it: no students at all.
	for range 20 {
		p, err := tryJoin(base, c.Code, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.conn.Close() })
		p.next(t, "hello")
		p.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass", Ticket: aTicket})
		if n := p.next(t, "notice"); n["field"] != "student" {
			t.Fatalf("a cookieless socket's ticket: %v", n)
		}
	}
	// A's own, five times over: one student tried, one passed.
	for range 5 {
		a.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail", Ticket: aTicket})
	}
	labTally("a's pass, once", 1, 1)

	// A kernel b posts to the API naming the room is nobody's there, and
	// so is one b submits from another room's page.
	apiTicket := done(postSource(t, base+"/api/lab/online-kernel/submissions?room="+c.Code, "// PASS", nil))
	code, body = postSource(t, base+"/api/rooms", `{"page":"lab","query":"online-kernel"}`, http.Header{"Content-Type": {"application/json"}})
	if code != http.StatusCreated {
		t.Fatalf("a second lab room: %d %s", code, body)
	}
	var elsewhere classroom.Created
	decodeJSON(t, body, &elsewhere)
	otherTicket := done(postSource(t, base+"/r/"+elsewhere.Code+"/lab/online-kernel/submissions", "// PASS", http.Header{"Cookie": {classroom.StudentCookie + "=" + studentPass(t, base, elsewhere.Code)}}))
	for _, ticket := range []string{apiTicket, otherTicket} {
		b.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass", Ticket: ticket})
		if n := b.next(t, "notice"); n["field"] != "ticket" || !strings.Contains(n["error"].(string), "not yours") {
			t.Fatalf("a ticket that is not b's in this room: %v", n)
		}
	}
	// b's own, from this room's page, counts.
	b.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass", Ticket: done(postSource(t, base+"/r/"+c.Code+"/lab/online-kernel/submissions", "// LSE", fromPage(b)))})
	labTally("b's failing kernel", 2, 1)
}

// TestWrongRoomCodesCountOnEveryRoute: every route that takes a room's
// code counts a wrong one against the address's wrong codes (30 a
// minute): a burst of guesses by any of them gets 30 answers of "no such
// room" and then 429s, after which the join form and the same route
// refuse the right code too, so no route tells a guesser which code is
// right. The kernel track is on, as in a classroom.
func TestWrongRoomCodesCountOnEveryRoute(t *testing.T) {
	t.Parallel()
	const limit = 30 // rooms.DefaultLimits.FailedJoinsPerMinute
	ws := func(base, code string) int {
		conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/r/"+code+"/ws", nil)
		if err != nil {
			if res != nil {
				return res.StatusCode
			}
			return 0
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				var ce *websocket.CloseError
				switch {
				case !errors.As(err, &ce):
					return 0
				case ce.Code == problem.CloseNotFound:
					return http.StatusNotFound
				case ce.Code == problem.CloseRateLimited:
					return http.StatusTooManyRequests
				}
				return ce.Code
			}
		}
	}
	do := func(method, url string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader("// PASS"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	routes := []struct {
		name    string
		guesses int
		try     func(base, code string) int
	}{
		{"POST /api/lab/{id}/submissions?room=", 300, func(base, code string) int {
			return do("POST", base+"/api/lab/online-kernel/submissions?room="+code)
		}},
		{"POST /r/{code}/lab/{id}/submissions", 300, func(base, code string) int {
			return do("POST", base+"/r/"+code+"/lab/online-kernel/submissions")
		}},
		{"GET /join", 60, func(base, code string) int { return do("GET", base+"/join?code="+code) }},
		{"GET /r/{code}", 60, func(base, code string) int { return do("GET", base+"/r/"+code) }},
		{"GET /r/{code}/events", 60, func(base, code string) int { return do("GET", base+"/r/"+code+"/events") }},
		{"GET /r/{code}/ws", 60, ws},
	}
	for _, route := range routes {
		t.Run(strings.ReplaceAll(route.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			_, _, base := kernelTrackOn(t)
			real := createRoom(t, base, roomRun)
			codes := map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := time.Now()
			for k := range route.guesses {
				wg.Go(func() {
					guess := fmt.Sprintf("ZZZZ%04d", k)
					if guess == real.Code {
						guess = "ZZZZZZZZ"
					}
					status := route.try(base, guess)
					mu.Lock()
					codes[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			took := time.Since(start)
			// A minute's allowance refills at half a guess a second.
			if codes[http.StatusNotFound] < limit || codes[http.StatusNotFound] > limit+1+int(took.Seconds()/2) ||
				codes[http.StatusNotFound]+codes[http.StatusTooManyRequests] != route.guesses {
				t.Fatalf("%d wrong codes in %v: answers %v, want %d not found and the rest 429", route.guesses, took, codes, limit)
			}
			res, body := get(t, base+"/join?code="+real.Code)
			if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "every code is refused") {
				t.Fatalf("the join form after the guesses, the right code: %s", res.Status)
			}
			if got := route.try(base, real.Code); got != http.StatusTooManyRequests {
				t.Fatalf("the right code by the same route after the guesses: %d", got)
			}
		})
	}
}

// TestKernelSubmissionRefusals: a kernel submission from another site's
// page is refused as a sweep is (403); a loop exercise is refused as one
// that runs in the browser (400); a body past the source's limit is a 413
// naming it; and a source that names a file is refused, naming the line,
// the same way whether the kernel track is on or off.
func TestKernelSubmissionRefusals(t *testing.T) {
	t.Parallel()
	_, _, on := kernelTrackOn(t)
	_, offServer := newRoomServer(t, rooms.Limits{})
	off := offServer.URL
	room := createRoom(t, on, roomRun)
	pass := studentPass(t, on, room.Code)
	crossSite := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"http://evil.example"}}
	for _, path := range []string{"/api/sweeps", "/api/lab/causal-kernel/submissions", "/r/" + room.Code + "/lab/causal-kernel/submissions"} {
		h := crossSite.Clone()
		h.Set("Cookie", classroom.StudentCookie+"="+pass)
		if code, body := postSource(t, on+path, "// PASS", h); code != http.StatusForbidden || !strings.Contains(body, "this site's own pages") {
			t.Errorf("%s from another site's page: %d %s", path, code, body)
		}
	}
	for _, base := range []string{on, off} {
		if code, body := postSource(t, base+"/api/lab/online-step/submissions", "function step() {}", nil); code != http.StatusBadRequest || !strings.Contains(body, "runs in the browser") || !strings.Contains(body, "exercise") {
			t.Errorf("a loop exercise for the GPU (%s): %d %s", base, code, body)
		}
		big := strings.Repeat("x", 10<<20)
		if code, body := postSource(t, base+"/api/lab/causal-kernel/submissions", big, nil); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "65536 bytes") {
			t.Errorf("a 10 MB source (%s): %d %.200s", base, code, body)
		}
		source := "// a kernel\n#include \"/proc/self/environ\"\n"
		for _, path := range []string{"/api/lab/causal-kernel/submissions", "/api/lab/online-step/submissions"} {
			if code, body := postSource(t, base+path, source, nil); code != http.StatusBadRequest || !strings.Contains(body, `"source"`) || !strings.Contains(body, "line 2") {
				t.Errorf("a source naming a file to %s (%s): %d %s", path, base, code, body)
			}
		}
	}
}

func decodeJSON(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %.300s", err, body)
	}
}
