package classroom_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashstep/classroom"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/rooms/natsrooms"
	"flashstep/rooms/roomstest"
	"flashstep/runner"
	"flashstep/web"

	"github.com/gorilla/websocket"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// A small flash2 run: every test's room shows it.
const roomRun = "variant=flash2&n=12&d=4&br=4&bc=3&seed=3"

func newRoomServer(t *testing.T, l rooms.Limits) (*testApp, *httptest.Server) {
	t.Helper()
	return serveDeps(t, web.Deps{Classroom: classroom.Options{Limits: l}})
}

// createRoom opens a room over the API and returns what the presenter got.
func createRoom(t *testing.T, base, query string) classroom.Created {
	t.Helper()
	body, _ := json.Marshal(classroom.Request{Page: "step", Query: query})
	res, err := http.Post(base+"/api/rooms", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c classroom.Created
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("create: %s %s", res.Status, b)
	}
	json.NewDecoder(res.Body).Decode(&c)
	return c
}

// participant is one websocket of a room, read by its own goroutine.
type participant struct {
	conn   *websocket.Conn
	events chan map[string]any // ends with {"type":"_close","close":*websocket.CloseError}
	pass   string              // a student's: the fs_student cookie the room's page issued
}

// joinRoom joins as a browser does: the presenter with the token's
// cookie; a student with the identity the room's page issues it.
func joinRoom(t *testing.T, base, code, token string) *participant {
	t.Helper()
	h := http.Header{}
	pass := ""
	if token != "" {
		h.Set("Cookie", classroom.PresenterCookie+"="+token)
	} else {
		pass = studentPass(t, base, code)
		h.Set("Cookie", classroom.StudentCookie+"="+pass)
	}
	p, _, err := dialRoom(base, code, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.pass = pass
	t.Cleanup(func() { p.conn.Close() })
	return p
}

// studentPass is the fs_student cookie the room's page issues a browser
// that brings none.
func studentPass(t *testing.T, base, code string) string {
	t.Helper()
	res, body := get(t, base+"/r/"+code)
	ck := studentCookieOf(res)
	if ck == nil {
		t.Fatalf("the room's page issued no identity: %s %.300s", res.Status, body)
	}
	return ck.Value
}

// tryJoin opens a room's websocket as a program that keeps no cookie
// does: a student's socket so follows the room as no student.
func tryJoin(base, code, token string, dialer *websocket.Dialer) (*participant, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Cookie", classroom.PresenterCookie+"="+token)
	}
	p, _, err := dialRoom(base, code, h, dialer)
	return p, err
}

// dialRoom opens a room's websocket with the headers given, and returns
// the upgrade's answer too (its cookies).
func dialRoom(base, code string, h http.Header, dialer *websocket.Dialer) (*participant, *http.Response, error) {
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	conn, res, err := dialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/r/"+code+"/ws", h)
	if err != nil {
		return nil, res, err
	}
	p := &participant{conn: conn, events: make(chan map[string]any, 100000)}
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				errors.As(err, &ce)
				p.events <- map[string]any{"type": "_close", "close": ce} // after every event, in order
				return
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			p.events <- m
		}
	}()
	return p, res, nil
}

func (p *participant) send(t *testing.T, msg any) {
	t.Helper()
	if err := p.conn.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
}

// next waits for the next event of type typ, skipping others.
func (p *participant) next(t *testing.T, typ string) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-p.events:
			if e["type"] == typ {
				return e
			}
			if e["type"] == "_close" {
				t.Fatalf("closed (%v) while waiting for %s", e["close"], typ)
			}
		case <-deadline:
			t.Fatalf("no %s event in 5 s", typ)
		}
	}
}

func (p *participant) closeCode(t *testing.T) *websocket.CloseError {
	t.Helper()
	for {
		select {
		case e := <-p.events:
			if e["type"] != "_close" {
				continue
			}
			ce, _ := e["close"].(*websocket.CloseError)
			if ce == nil {
				t.Fatal("the connection ended without a close frame")
			}
			return ce
		case <-time.After(5 * time.Second):
			t.Fatal("no close in 5 s")
		}
	}
}

func num(v any) int { f, _ := v.(float64); return int(f) }

func TestRoomStepsReachEveryStudentInOrder(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{PresenterRate: 1e5})
	c := createRoom(t, ts.URL, roomRun)
	canon := canonical(t, roomRun)
	if c.Query != canon || len(c.Code) != rooms.CodeLength || c.Token == "" {
		t.Fatalf("created: %+v", c)
	}
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	if h := pres.next(t, "hello"); h["role"] != "presenter" {
		t.Fatalf("the token's holder is %v", h["role"])
	}
	students := []*participant{joinRoom(t, ts.URL, c.Code, ""), joinRoom(t, ts.URL, c.Code, "")}
	for _, s := range students {
		if h := s.next(t, "hello"); h["role"] != "student" || h["query"] != c.Query {
			t.Fatalf("a student's hello: %v", h)
		}
	}
	if tl := pres.next(t, "tally"); num(tl["tally"].(map[string]any)["students"]) == 0 {
		pres.next(t, "tally")
	}
	const steps = 200
	for k := 1; k <= steps; k++ {
		pres.send(t, rooms.Up{Type: "step", Step: k, Total: steps})
	}
	for i, s := range students {
		last := 0
		for last < steps {
			e := s.next(t, "step")
			if num(e["step"]) <= last {
				t.Fatalf("student %d: step %d after %d", i, num(e["step"]), last)
			}
			last = num(e["step"])
		}
	}
	// A student may not step the room: it is told, the room goes on.
	students[0].send(t, rooms.Up{Type: "step", Step: 1, Total: steps})
	if n := students[0].next(t, "notice"); !strings.Contains(n["error"].(string), "only the presenter") {
		t.Fatalf("notice: %v", n)
	}
	pres.send(t, rooms.Up{Type: "step", Step: 7, Total: steps})
	if e := students[1].next(t, "step"); num(e["step"]) != 7 {
		t.Fatalf("after the refusal the room went to %v", e["step"])
	}
}

func TestRoomRefusesForgedTokensAndUnknownCodes(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	forged := []byte(c.Token)
	forged[0] ^= 1
	p, err := tryJoin(ts.URL, c.Code, string(forged), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ce := p.closeCode(t); ce.Code != problem.CloseForbidden {
		t.Fatalf("a forged token: close %d, want %d", ce.Code, problem.CloseForbidden)
	}
	p, _ = tryJoin(ts.URL, "ZZZZZZZZ", "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseNotFound || !strings.Contains(ce.Text, "no room has this code") {
		t.Fatalf("an unknown code: %v", ce)
	}
	// Another site's page may not open a room's websocket.
	h := http.Header{"Origin": {"http://evil.example"}}
	if _, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/r/"+c.Code+"/ws", h); err == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-origin websocket was accepted: %v", err)
	}
}

func TestRoomPagesKeepTheTokenSecret(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	// The Present button: a form post that answers with a cookie and a redirect.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(ts.URL+"/rooms", map[string][]string{"page": {"step"}, "query": {roomRun}, "step": {"4"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == classroom.PresenterCookie {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/r/") || cookie == nil || !cookie.HttpOnly ||
		cookie.SameSite != http.SameSiteStrictMode || cookie.Path != loc || strings.Contains(loc, cookie.Value) {
		t.Fatalf("present: %s, Location %q, cookie %+v", res.Status, loc, cookie)
	}
	for _, who := range []string{"presenter", "student"} {
		req, _ := http.NewRequest("GET", ts.URL+loc, nil)
		if who == "presenter" {
			req.AddCookie(cookie)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		page := string(body)
		if res.StatusCode != 200 || strings.Contains(page, cookie.Value) {
			t.Fatalf("%s page: %s, holds the token: %v", who, res.Status, strings.Contains(page, cookie.Value))
		}
		if !strings.Contains(page, `/static/js/classroom.js`) || !strings.Contains(page, `&#34;step&#34;:4`) && !strings.Contains(page, `"step":4`) {
			t.Fatalf("%s page lacks the classroom or the room's step 4", who)
		}
		if got := strings.Contains(page, `data-testid="poll-open"`); got != (who == "presenter") {
			t.Errorf("%s page has the presenter's controls: %v", who, got)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if res.Header.Get(k) != v {
				t.Errorf("%s: %s is %q", who, k, res.Header.Get(k))
			}
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "script-src 'self' 'unsafe") {
			t.Errorf("CSP %q", csp)
		}
	}
	// A plain stepper page has the Present button, and the headers too.
	res, body := get(t, ts.URL+"/step?"+roomRun)
	if !strings.Contains(string(body), `id="present-form"`) || res.Header.Get("Content-Security-Policy") == "" {
		t.Fatal("the stepper lacks the Present button or the CSP")
	}
	// The QR code is an SVG of the join URL.
	res, body = get(t, ts.URL+loc+"/qr.svg")
	if res.Header.Get("Content-Type") != "image/svg+xml" || !bytes.HasPrefix(body, []byte("<svg")) || bytes.Count(body, []byte("h1v1")) < 200 {
		t.Fatalf("QR: %s, %d bytes", res.Header.Get("Content-Type"), len(body))
	}
}

// TestJoinFloodIsRateLimited: wrong codes are limited per address; once an
// address has spent them, every code from it is refused, the right one
// too (or the refusals would tell a guesser which code is right), with the
// seconds to wait; after the wait the right code joins.
func TestJoinFloodIsRateLimited(t *testing.T) {
	t.Parallel()
	clk := roomstest.NewClock()
	_, ts := serveDeps(t, web.Deps{Classroom: classroom.Options{Limits: rooms.Limits{FailedJoinsPerMinute: 5}, Now: clk.Now}})
	c := createRoom(t, ts.URL, roomRun)
	limited := 0
	for i := range 20 {
		res, body := get(t, ts.URL+fmt.Sprintf("/join?code=ZZZZZZ%02d", i))
		switch res.StatusCode {
		case http.StatusTooManyRequests:
			limited++
			if !strings.Contains(string(body), "at most 5 a minute") || !strings.Contains(string(body), "retry in 12 s") || res.Header.Get("Retry-After") != "12" {
				t.Fatalf("the refusal does not state the limit and the wait (Retry-After %q): %s", res.Header.Get("Retry-After"), body)
			}
		case http.StatusNotFound:
		default:
			t.Fatalf("a wrong code: %s", res.Status)
		}
	}
	if limited != 15 {
		t.Fatalf("20 wrong codes at 5 a minute: %d refused, want 15", limited)
	}
	// The right code is refused too, by every way in, with the wait.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/join?code=" + strings.ToLower(rooms.FormatCode(c.Code)), "/r/" + c.Code, "/r/" + c.Code + "/events"} {
		res, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "12" || !strings.Contains(string(body), "every code is refused; retry in 12 s") {
			t.Fatalf("the right code at %s while the wrong codes are spent: %s, Retry-After %q: %.300s", path, res.Status, res.Header.Get("Retry-After"), body)
		}
	}
	p, _ := tryJoin(ts.URL, c.Code, "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseRateLimited || !strings.Contains(ce.Text, "retry in 12 s") || strings.HasSuffix(ce.Text, "…") {
		t.Fatalf("the right code over the websocket: %v", ce)
	}
	// The wait is over: the right code joins, typed loosely.
	clk.Advance(12 * time.Second)
	res, err := client.Get(ts.URL + "/join?code=" + strings.ToLower(rooms.FormatCode(c.Code)))
	if err != nil || res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/r/"+c.Code {
		t.Fatalf("the right code after the wait: %v %v", err, res.Status)
	}
	s := joinRoom(t, ts.URL, c.Code, "")
	if h := s.next(t, "hello"); h["code"] != c.Code {
		t.Fatalf("hello: %v", h)
	}
	// One wrong code's allowance came back in 12 s: one guess, then refused.
	p, _ = tryJoin(ts.URL, "ZZZZZZZZ", "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseNotFound {
		t.Fatalf("a guess after the wait: close %d", ce.Code)
	}
	p, _ = tryJoin(ts.URL, "ZZZZZZZZ", "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseRateLimited {
		t.Fatalf("a guess over the limit: close %d", ce.Code)
	}
}

// TestWrongCodesDoNotEatTheJoins: a wrong code counts against the wrong
// codes only, so an address's guesses (or its class's typos) never refuse
// its good joins; the good joins have their own limit.
func TestWrongCodesDoNotEatTheJoins(t *testing.T) {
	t.Parallel()
	clk := roomstest.NewClock()
	_, ts := serveDeps(t, web.Deps{Classroom: classroom.Options{Limits: rooms.Limits{JoinsPerMinute: 3, FailedJoinsPerMinute: 100}, Now: clk.Now}})
	c := createRoom(t, ts.URL, roomRun)
	for i := range 50 {
		if res, _ := get(t, ts.URL+fmt.Sprintf("/join?code=ZZZZZZ%02d", i)); res.StatusCode != http.StatusNotFound {
			t.Fatalf("wrong code %d of 50 at 100 a minute: %s", i+1, res.Status)
		}
	}
	// The room's page counts as a join when it issues an identity, not
	// when the browser brings it back; its connections count each.
	pass := studentPass(t, ts.URL, c.Code)
	withCookie := http.Header{"Cookie": {classroom.StudentCookie + "=" + pass}}
	for range 3 {
		req, _ := http.NewRequest("GET", ts.URL+"/r/"+c.Code, nil)
		req.Header = withCookie
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || studentCookieOf(res) != nil {
			t.Fatalf("the room's page with its identity: %s, set %v", res.Status, studentCookieOf(res))
		}
	}
	for i := range 2 {
		s, _, err := dialRoom(ts.URL, c.Code, withCookie, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.conn.Close() })
		if h := s.next(t, "hello"); h["code"] != c.Code {
			t.Fatalf("good join %d of 2 after the page and 50 wrong codes: %v", i+1, h)
		}
	}
	p, _ := tryJoin(ts.URL, c.Code, "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseRateLimited || !strings.Contains(ce.Text, "too many joins") || !strings.Contains(ce.Text, "at most 3 a minute") || !strings.Contains(ce.Text, "retry in 20 s") {
		t.Fatalf("the fourth join at 3 a minute: %v", ce)
	}
}

// tallies reads the presenter's tallies until one satisfies done, checking
// each against every: the invariant of the room.
func tallies(t *testing.T, pres *participant, what string, every func(map[string]any), done func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-pres.events:
			if e["type"] == "_close" {
				t.Fatalf("the presenter's connection closed (%v) while waiting for %s", e["close"], what)
			}
			if e["type"] != "tally" {
				continue
			}
			tl := e["tally"].(map[string]any)
			if every != nil {
				every(tl)
			}
			if done(tl) {
				return tl
			}
		case <-deadline:
			t.Fatalf("the tally never showed %s", what)
		}
	}
}

// openPoll has the presenter pose "predict m" on step 2 and returns its
// right answer, once every student given has the poll.
func openPoll(t *testing.T, pres *participant, students ...*participant) float64 {
	t.Helper()
	pres.send(t, rooms.Up{Type: "step", Step: 2, Total: 20})
	pres.send(t, map[string]string{"type": "poll"})
	var q string
	for _, s := range students {
		for {
			if p, ok := s.next(t, "poll")["poll"].(map[string]any); ok && p["status"] == "open" {
				q = p["question"].(string)
				break
			}
		}
	}
	var row, kv, step int
	fmt.Sscanf(q[strings.Index(q, "row"):], "row %d after kv-tile %d (step %d)", &row, &kv, &step)
	return mirrorM(t, roomRun, step, row%4)
}

// TestPollStuffingCountsOnlyStudentsPresent: a script that connects,
// answers and disconnects, 30 times over, from the address of a room of 2
// students: the tally never counts more answers than students present, and
// the revealed histogram holds the 2 students' answers only.
func TestPollStuffingCountsOnlyStudentsPresent(t *testing.T) {
	t.Parallel()
	app, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	a, b := joinRoom(t, ts.URL, c.Code, ""), joinRoom(t, ts.URL, c.Code, "")
	atMostPresent := func(tl map[string]any) {
		if num(tl["answered"]) > num(tl["students"]) {
			t.Fatalf("a tally counts %d answers from %d students present: %v", num(tl["answered"]), num(tl["students"]), tl)
		}
	}
	tallies(t, pres, "2 students", atMostPresent, func(tl map[string]any) bool { return num(tl["students"]) == 2 })
	want := openPoll(t, pres, a, b)
	for range 30 {
		s, err := tryJoin(ts.URL, c.Code, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		s.next(t, "hello")
		s.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want+50)})
		s.conn.Close()
	}
	a.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want)})
	b.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want+3)})
	a.send(t, map[string]string{"type": "status", "status": "branched"})
	// The stuffing connections leave the server in their own time; every
	// tally on the way counts no more answers than students, and the room
	// comes to hold a and b with their answers only.
	tallies(t, pres, "a branched, and a's and b's answers only", atMostPresent, func(tl map[string]any) bool {
		return num(tl["branched"]) == 1 && num(tl["answered"]) == 2 && num(tl["students"]) == 2
	})
	// The stuffing connections (followers, no students: the tally above
	// never counted them) leave in their own time.
	for deadline := time.Now().Add(5 * time.Second); app.rooms.Stats().Members != 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := app.rooms.Stats().Members; n != 3 {
		t.Fatalf("5 s after 30 stuffing cycles the room has %d members, want the presenter and 2 students", n)
	}
	pres.send(t, map[string]string{"type": "reveal"})
	var rev map[string]any
	for rev == nil || rev["status"] != "revealed" {
		rev = b.next(t, "poll")["poll"].(map[string]any)
	}
	counted := 0
	for _, bin := range rev["bins"].([]any) {
		counted += num(bin.(map[string]any)["count"])
	}
	if num(rev["answered"]) != 2 || num(rev["correct"]) != 1 || counted != 2 {
		t.Fatalf("revealed to the class: %d answered, %d right, %d in the histogram; want a's and b's only", num(rev["answered"]), num(rev["correct"]), counted)
	}
}

// studentCookieOf is the fs_student cookie an answer sets, or nil.
func studentCookieOf(res *http.Response) *http.Cookie {
	for _, ck := range res.Cookies() {
		if ck.Name == classroom.StudentCookie {
			return ck
		}
	}
	return nil
}

// TestRoomStudentIdentitySurvivesReconnects: the room's page gives a student an
// identity in a cookie scoped to the room; with it a reconnect replaces the
// student's answer, a student who left counts again when back, and two tabs
// are one student. The websocket and the events stream never issue one: a
// connection without it, or with a made-up or altered one, follows the
// room as no student (TestCookielessSocketsAreNoStudents).
func TestRoomStudentIdentitySurvivesReconnects(t *testing.T) {
	t.Parallel()
	app, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	res, _ := get(t, ts.URL+"/r/"+c.Code)
	ck := studentCookieOf(res)
	st, _ := app.rooms.Peek(context.Background(), c.Code, "")
	if ck == nil || ck.Path != "/r/"+c.Code || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.MaxAge < 3600 || st.IssuedStudent(ck.Value) == "" {
		t.Fatalf("the room's page set %+v, want an HttpOnly, SameSite=Lax identity scoped to the room", ck)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/r/"+c.Code, nil)
	req.AddCookie(&http.Cookie{Name: classroom.PresenterCookie, Value: c.Token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if studentCookieOf(res) != nil {
		t.Fatal("the presenter's page gave the presenter a student identity")
	}
	cookie := http.Header{"Cookie": {classroom.StudentCookie + "=" + ck.Value}}
	as := func() *participant {
		p, res, err := dialRoom(ts.URL, c.Code, cookie, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.conn.Close() })
		if studentCookieOf(res) != nil {
			t.Fatal("a websocket with an identity was given another")
		}
		p.next(t, "hello")
		return p
	}
	// Without the page's cookie, or with a made-up one, the websocket sets none.
	for _, h := range []http.Header{{}, {"Cookie": {classroom.StudentCookie + "=forged"}}, {"Cookie": {classroom.StudentCookie + "=" + rooms.NewStudent()}}} {
		p, res, err := dialRoom(ts.URL, c.Code, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := studentCookieOf(res)
		p.conn.Close()
		if got != nil {
			t.Fatalf("a websocket with cookie %q was given %+v", h.Get("Cookie"), got)
		}
	}

	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	other := joinRoom(t, ts.URL, c.Code, "") // another student, who does not answer
	x := as()
	oneAnswer := func(tl map[string]any) {
		if num(tl["answered"]) > 1 {
			t.Fatalf("x's answers counted %d times: %v", num(tl["answered"]), tl)
		}
	}
	openPoll(t, pres, other, x)
	x.send(t, map[string]string{"type": "answer", "answer": "1"})
	tallies(t, pres, "x's answer", oneAnswer, func(tl map[string]any) bool { return num(tl["answered"]) == 1 })
	x.conn.Close()
	tallies(t, pres, "x gone, and its answer", oneAnswer, func(tl map[string]any) bool {
		return num(tl["students"]) == 1 && num(tl["answered"]) == 0
	})
	x = as()
	tallies(t, pres, "x back, and its answer", oneAnswer, func(tl map[string]any) bool {
		return num(tl["students"]) == 2 && num(tl["answered"]) == 1
	})
	x.send(t, map[string]string{"type": "answer", "answer": "2"}) // replaces the first
	tab := as()                                                   // x's second tab
	tab.send(t, map[string]string{"type": "answer", "answer": "3"})
	tl := tallies(t, pres, "x's two tabs", oneAnswer, func(tl map[string]any) bool { return num(tl["connections"]) == 3 })
	if num(tl["students"]) != 2 || num(tl["answered"]) != 1 {
		t.Fatalf("two tabs of x beside one other student: %v", tl)
	}
	// The events stream: the same identity with the cookie, none without.
	req, _ = http.NewRequest("GET", ts.URL+"/r/"+c.Code+"/events", nil)
	req.Header.Set("Cookie", cookie.Get("Cookie"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err = http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if studentCookieOf(res) != nil {
		t.Fatal("an events stream with an identity was given another")
	}
	tl = tallies(t, pres, "x's third connection", oneAnswer, func(tl map[string]any) bool { return num(tl["connections"]) == 4 })
	if num(tl["students"]) != 2 {
		t.Fatalf("x over the events stream too: %v", tl)
	}
	res2, err := http.Get(ts.URL + "/r/" + c.Code + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	if got := studentCookieOf(res2); got != nil {
		t.Fatalf("an events stream without an identity was given %+v", got)
	}
	tl = tallies(t, pres, "a follower's events stream", oneAnswer, func(tl map[string]any) bool { return num(tl["connections"]) == 5 })
	if num(tl["students"]) != 2 {
		t.Fatalf("an events stream without an identity counted as a student: %v", tl)
	}
}

// TestRoomsPerAddressOverHTTP: one address may hold 20 open rooms; the
// 21st is refused with 429 naming the limit, while another address still
// opens one.
func TestRoomsPerAddressOverHTTP(t *testing.T) {
	t.Parallel()
	clk := roomstest.NewClock() // 20 creations a minute: spread them out
	app, _ := serveDeps(t, web.Deps{Classroom: classroom.Options{Now: clk.Now}})
	create := func(addr string) *httptest.ResponseRecorder {
		body, _ := json.Marshal(classroom.Request{Page: "step", Query: roomRun})
		req := httptest.NewRequest("POST", "/api/rooms", bytes.NewReader(body))
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		clk.Advance(10 * time.Second)
		return rec
	}
	for i := range 20 {
		if rec := create("192.0.2.1:4000"); rec.Code != http.StatusCreated {
			t.Fatalf("room %d of 20: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	rec := create("192.0.2.1:4001")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "at most 20 open rooms per address") {
		t.Fatalf("the 21st room from one address: %d %s", rec.Code, rec.Body)
	}
	if rec := create("192.0.2.2:4000"); rec.Code != http.StatusCreated {
		t.Fatalf("another address: %d %s", rec.Code, rec.Body)
	}
}

func TestOversizedMessageEndsOnlyItsConnection(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	bad := joinRoom(t, ts.URL, c.Code, "")
	good := joinRoom(t, ts.URL, c.Code, "")
	good.next(t, "hello")
	bad.send(t, map[string]string{"type": "answer", "answer": strings.Repeat("9", 4000)})
	if ce := bad.closeCode(t); ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("an oversized message: close %d, want 1009", ce.Code)
	}
	// A malformed one is refused with a notice naming the field.
	good.send(t, map[string]any{"type": "status", "status": "asleep"})
	if n := good.next(t, "notice"); n["field"] != "status" {
		t.Fatalf("notice: %v", n)
	}
	pres.send(t, rooms.Up{Type: "step", Step: 3, Total: 9})
	if e := good.next(t, "step"); num(e["step"]) != 3 {
		t.Fatal("the room stopped")
	}
}

// TestSlowStudentIsCoalesced: a student whose page stops reading must not
// slow anyone else; its mailbox keeps only the latest step, and when it
// reads again it lands on the current step.
func TestSlowStudentIsCoalesced(t *testing.T) {
	t.Parallel()
	app, ts := newRoomServer(t, rooms.Limits{PresenterRate: 1e6})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	// A tiny receive buffer, and nobody reading: the server's writes to it
	// block once the kernel's buffers fill.
	stuckDialer := &websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		conn, err := net.Dial(network, addr)
		if err == nil {
			conn.(*net.TCPConn).SetReadBuffer(4096)
		}
		return conn, err
	}}
	h := http.Header{}
	stuck, _, err := stuckDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/r/"+c.Code+"/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	good := joinRoom(t, ts.URL, c.Code, "")
	good.next(t, "hello")
	const steps = 30000
	start := time.Now()
	var slowest time.Duration
	for k := 1; k <= steps; k++ {
		sent := time.Now()
		pres.send(t, rooms.Up{Type: "step", Step: k, Total: steps})
		if k%1000 == 0 {
			for {
				e := good.next(t, "step")
				if num(e["step"]) == k {
					break
				}
			}
			slowest = max(slowest, time.Since(sent))
		}
	}
	if slowest > 2*time.Second {
		t.Fatalf("the reading student waited %v for a step while another stopped reading", slowest)
	}
	if app.rooms.Stats().Coalesced == 0 {
		t.Fatal("nothing was coalesced: the stuck student's writer never blocked, so the test proves nothing")
	}
	// The stuck student reads again: fewer messages than steps, ending on the last.
	received, last := 0, 0
	stuck.SetReadDeadline(time.Now().Add(10 * time.Second))
	for last < steps {
		_, data, err := stuck.ReadMessage()
		if err != nil {
			t.Fatalf("after %d messages (last step %d): %v", received, last, err)
		}
		var e map[string]any
		json.Unmarshal(data, &e)
		if e["type"] == "step" {
			received++
			if num(e["step"]) <= last {
				t.Fatalf("step %d after %d", num(e["step"]), last)
			}
			last = num(e["step"])
		}
	}
	if received >= steps {
		t.Fatalf("the stuck student got all %d steps: nothing coalesced", received)
	}
	t.Logf("%d steps in %v; the stuck student got %d step messages, coalesced %d", steps, time.Since(start), received, app.rooms.Stats().Coalesced)
}

func TestPresenterReconnectsAndResumes(t *testing.T) {
	t.Parallel()
	app, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	stud := joinRoom(t, ts.URL, c.Code, "")
	pres.send(t, rooms.Up{Type: "step", Step: 5, Total: 40})
	stud.next(t, "step")
	pres.conn.Close() // the presenter's network drops
	waitUntil(t, "the server to see the presenter gone", func() bool { return app.rooms.Stats().Members == 1 })
	pres = joinRoom(t, ts.URL, c.Code, c.Token)
	h := pres.next(t, "hello")
	if h["role"] != "presenter" || num(h["step"]) != 5 {
		t.Fatalf("the presenter came back to %v at step %v", h["role"], h["step"])
	}
	pres.send(t, rooms.Up{Type: "step", Step: 6, Total: 40})
	if e := stud.next(t, "step"); num(e["step"]) != 6 {
		t.Fatalf("after the reconnect the student got step %v", e["step"])
	}
	// A student who reconnects lands on the current step without the trace.
	late := joinRoom(t, ts.URL, c.Code, "")
	if h := late.next(t, "hello"); num(h["step"]) != 6 || h["query"] != c.Query {
		t.Fatalf("a reconnecting student's hello: %v", h)
	}
}

func TestServerRestartTellsEveryStudent(t *testing.T) {
	t.Parallel()
	app, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	var studs []*participant
	for range 3 {
		s := joinRoom(t, ts.URL, c.Code, "")
		s.next(t, "hello")
		studs = append(studs, s)
	}
	app.CloseStreams()
	for _, s := range studs {
		e := s.next(t, "closed")
		if e["why"] != rooms.WhyRestart || !strings.Contains(e["reason"].(string), "server is restarting") {
			t.Fatalf("closed: %v", e)
		}
		if ce := s.closeCode(t); ce.Code != classroom.CloseRestart || !strings.Contains(ce.Text, "restarting") {
			t.Fatalf("close frame: %v", ce)
		}
	}
	p, _ := tryJoin(ts.URL, c.Code, "", nil)
	if ce := p.closeCode(t); ce.Code != problem.CloseNotFound {
		t.Fatalf("joining after the restart: %d", ce.Code)
	}
}

func TestPollFromTheTrace(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	a := joinRoom(t, ts.URL, c.Code, "")
	b := joinRoom(t, ts.URL, c.Code, "")
	pres.send(t, rooms.Up{Type: "step", Step: 2, Total: 20})
	a.next(t, "step")
	a.send(t, map[string]string{"type": "poll"})
	if n := a.next(t, "notice"); !strings.Contains(n["error"].(string), "only the presenter") {
		t.Fatalf("a student opened a poll: %v", n)
	}
	pres.send(t, map[string]string{"type": "poll"})
	open := a.next(t, "poll")["poll"].(map[string]any)
	q := open["question"].(string)
	if !strings.Contains(q, "Predict m for row") || open["status"] != "open" || open["answer"] != nil {
		t.Fatalf("open poll: %v", open)
	}
	// The answer, computed here from the mirror's trace of the same run.
	var row, kv, step int
	fmt.Sscanf(q[strings.Index(q, "row"):], "row %d after kv-tile %d (step %d)", &row, &kv, &step)
	want := mirrorM(t, roomRun, step, row%4)
	a.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want)})
	b.send(t, map[string]string{"type": "answer", "answer": fmt.Sprintf("%.4f", want+3)})
	for {
		tl := pres.next(t, "tally")["tally"].(map[string]any)
		if num(tl["answered"]) == 2 {
			break
		}
	}
	pres.send(t, map[string]string{"type": "reveal"})
	rev := b.next(t, "poll")["poll"].(map[string]any)
	if rev["status"] == "open" {
		rev = b.next(t, "poll")["poll"].(map[string]any)
	}
	if rev["status"] != "revealed" || num(rev["correct"]) != 1 || num(rev["answered"]) != 2 || rev["explain"] == "" {
		t.Fatalf("revealed: %v", rev)
	}
	if got := rev["number"].(float64); got != float64(float32(want)) && fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", want) {
		t.Fatalf("the revealed answer %v is not the mirror's m %v", got, want)
	}
}

// mirrorM is m_new of a row at a step (from 1) of the mirror's trace.
func mirrorM(t *testing.T, query string, step, row int) float64 {
	t.Helper()
	q, _ := url.ParseQuery(query)
	c, err := kernels.ParseRun(q)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := (runner.Mirror{}).Run(context.Background(), c, func(b []byte) error { buf.Write(b); return nil }); err != nil {
		t.Fatal(err)
	}
	_, recs, err := instrument.ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var steps []*instrument.Record
	for _, r := range recs {
		if r.Kind != instrument.KindInputs {
			steps = append(steps, r)
		}
	}
	r := steps[step-1]
	if r.Kind != instrument.KindFlashStep {
		t.Fatalf("step %d is a %v, not a tile step", step, r.Kind)
	}
	return float64(r.MNew[row])
}

func TestRoomOverServerSentEvents(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	res, next := studentEvents(t, ts.URL, c.Code)
	if res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s", res.Header.Get("Content-Type"))
	}
	session := next()
	if session["type"] != "session" || next()["type"] != "hello" {
		t.Fatal("the stream does not start with session and hello")
	}
	pres.send(t, rooms.Up{Type: "step", Step: 4, Total: 9})
	for {
		if e := next(); e["type"] == "step" {
			if num(e["step"]) != 4 {
				t.Fatalf("step %v", e["step"])
			}
			break
		}
	}
	post := func(key string) *http.Response {
		body, _ := json.Marshal(map[string]any{"member": session["member"], "key": key, "message": map[string]string{"type": "status", "status": "branched"}})
		res, err := http.Post(ts.URL+"/r/"+c.Code+"/send", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post("forged"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged key: %s", res.Status)
	}
	if res := post(session["key"].(string)); res.StatusCode != http.StatusNoContent {
		t.Fatalf("the real key: %s", res.Status)
	}
	for {
		tl := pres.next(t, "tally")["tally"].(map[string]any)
		if num(tl["branched"]) == 1 {
			break
		}
	}
}

// TestLessonRoomPosesItsCheckpoint: a room presented from a lesson's
// widget shows the widget's run at its step, and its checkpoint poll is the
// lesson's checkpoint nearest the widget, graded as the course grades it.
func TestLessonRoomPosesItsCheckpoint(t *testing.T) {
	t.Parallel()
	_, ts := newRoomServer(t, rooms.Limits{})
	body := `{"lesson":"tiling","widget":"ragged-run","step":3,"query":"variant=naive&n=4"}`
	res, err := http.Post(ts.URL+"/api/rooms", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var c classroom.Created
	json.NewDecoder(res.Body).Decode(&c)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || c.Page != "step" || !strings.Contains(c.Query, "variant=flash2") {
		t.Fatalf("create from a lesson: %s %+v", res.Status, c)
	}
	for _, bad := range []string{`{"lesson":"tiling","widget":"nope"}`, `{"lesson":"nope","widget":"ragged-run"}`, `{"lesson":"naive","widget":"memory-calc"}`} {
		res, _ := http.Post(ts.URL+"/api/rooms", "application/json", strings.NewReader(bad))
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", bad, res.Status)
		}
	}
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	if h := pres.next(t, "hello"); num(h["step"]) != 3 {
		t.Fatalf("the room did not open at the widget's step: %v", h)
	}
	a, b := joinRoom(t, ts.URL, c.Code, ""), joinRoom(t, ts.URL, c.Code, "")
	pres.send(t, map[string]string{"type": "poll", "poll": "checkpoint"})
	open := a.next(t, "poll")["poll"].(map[string]any)
	if open["checkpoint"] != "tiling/ragged-steps" || open["status"] != "open" || open["answer"] != nil || strings.Contains(open["question"].(string), "<") {
		t.Fatalf("open poll: %v", open)
	}
	// The course's own answer to the same checkpoint.
	res, err = http.Post(ts.URL+"/api/checkpoints/tiling/ragged-steps", "application/json", strings.NewReader(`{"reveal":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var course struct{ Answer, Explanation string }
	json.NewDecoder(res.Body).Decode(&course)
	res.Body.Close()
	a.send(t, map[string]string{"type": "answer", "answer": course.Answer})
	b.send(t, map[string]string{"type": "answer", "answer": course.Answer + "1"})
	for {
		if tl := pres.next(t, "tally")["tally"].(map[string]any); num(tl["answered"]) == 2 {
			break
		}
	}
	pres.send(t, map[string]string{"type": "reveal"})
	rev := b.next(t, "poll")["poll"].(map[string]any)
	if rev["status"] == "open" {
		rev = b.next(t, "poll")["poll"].(map[string]any)
	}
	if rev["status"] != "revealed" || rev["answer"] != course.Answer || num(rev["correct"]) != 1 ||
		!strings.HasPrefix(rev["explain"].(string), strings.TrimSpace(course.Explanation)) {
		t.Fatalf("revealed %v; the course says %+v", rev, course)
	}
	// A room not presented from a lesson has no checkpoint to pose.
	plain := createRoom(t, ts.URL, roomRun)
	pp := joinRoom(t, ts.URL, plain.Code, plain.Token)
	pp.send(t, map[string]string{"type": "poll", "poll": "checkpoint"})
	if n := pp.next(t, "notice"); n["field"] != "poll" {
		t.Fatalf("a checkpoint poll in a plain room: %v", n)
	}
}

// natsRoomServer is a whole web server whose rooms go through the broker
// at url on a connection of its own, which a test may cut as a crash. Its
// rooms' time is clk's, and their heartbeat never beats by itself: the
// test calls Beat on the rooms service returned.
func natsRoomServer(t *testing.T, url string, clk *roomstest.Clock) (*testApp, *httptest.Server, *nats.Conn, *natsrooms.Service) {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	svc := natsrooms.NewWithOptions(nc, rooms.Limits{}, natsrooms.Options{Beat: time.Hour, LostAfter: lostAfter, Now: clk.Now})
	app, ts := serveDeps(t, web.Deps{Classroom: classroom.Options{Rooms: svc}})
	return app, ts, nc, svc
}

// lostAfter is the silence after which natsRoomServer's rooms count a room
// or a server as gone.
const lostAfter = 4 * time.Second

func embeddedNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	return ns.ClientURL()
}

// TestRoomOwnerCrashReachesOtherServersStudents: two servers and a
// broker; the room's owner crashes (its broker connection and its sockets
// cut, no word said); the students on the other server are told the room
// is lost, with its own close code, at that server's first beat past the
// loss limit.
func TestRoomOwnerCrashReachesOtherServersStudents(t *testing.T) {
	t.Parallel()
	url := embeddedNATS(t)
	clk := roomstest.NewClock()
	_, tsA, ncA, _ := natsRoomServer(t, url, clk)
	appB, tsB, _, svcB := natsRoomServer(t, url, clk)
	c := createRoom(t, tsA.URL, roomRun)
	pres := joinRoom(t, tsA.URL, c.Code, c.Token)
	pres.next(t, "hello")
	var studs []*participant
	for range 2 {
		s := joinRoom(t, tsB.URL, c.Code, "")
		s.next(t, "hello")
		studs = append(studs, s)
	}
	pres.send(t, rooms.Up{Type: "step", Step: 2, Total: 9})
	for _, s := range studs {
		s.next(t, "step")
	}
	ncA.Close()
	tsA.CloseClientConnections()
	// B heard the owner last at the step (clk has not moved): at the loss
	// limit it still holds the room's students, a beat later they are told.
	svcB.Beat(clk.Advance(lostAfter))
	if n := appB.rooms.Stats().Members; n != 2 {
		t.Fatalf("at the loss limit B holds %d students of the room, want 2", n)
	}
	svcB.Beat(clk.Advance(time.Second))
	for _, s := range studs {
		if e := s.next(t, "closed"); e["why"] != rooms.WhyLost {
			t.Fatalf("closed: %v", e)
		}
		if ce := s.closeCode(t); ce.Code != classroom.CloseLost {
			t.Fatalf("close frame: %v", ce)
		}
	}
}

// TestLeavingServerSendsItsStudentsToAnother: a server that shuts down
// while another owns the room closes its students' sockets with 1001
// (going away, not the room's end); they reconnect through the other server
// and land on the current step.
func TestLeavingServerSendsItsStudentsToAnother(t *testing.T) {
	t.Parallel()
	url := embeddedNATS(t)
	clk := roomstest.NewClock()
	_, tsA, _, _ := natsRoomServer(t, url, clk)
	appB, tsB, _, _ := natsRoomServer(t, url, clk)
	c := createRoom(t, tsA.URL, roomRun)
	pres := joinRoom(t, tsA.URL, c.Code, c.Token)
	s := joinRoom(t, tsB.URL, c.Code, "")
	s.next(t, "hello")
	pres.send(t, rooms.Up{Type: "step", Step: 5, Total: 9})
	s.next(t, "step")
	appB.CloseRooms()
	if e := s.next(t, "closed"); e["why"] != rooms.WhyMoved {
		t.Fatalf("closed: %v", e)
	}
	if ce := s.closeCode(t); ce.Code != classroom.CloseGoingAway {
		t.Fatalf("close frame: %v", ce)
	}
	p, _ := tryJoin(tsB.URL, c.Code, "", nil)
	if ce := p.closeCode(t); ce.Code != websocket.CloseTryAgainLater {
		t.Fatalf("joining the leaving server: %v", ce)
	}
	back := joinRoom(t, tsA.URL, c.Code, "")
	if h := back.next(t, "hello"); num(h["step"]) != 5 {
		t.Fatalf("back at %v", h)
	}
}

// heldRooms holds every lookup of a code until the test lets them go, as
// a broker a network away would hold them for a while, and counts them.
type heldRooms struct {
	rooms.Service
	lookups atomic.Int64
	looking chan struct{} // a lookup has begun
	release chan struct{} // closed: the lookups go on
}

func (s *heldRooms) Peek(ctx context.Context, code, token string) (rooms.State, error) {
	s.lookups.Add(1)
	s.looking <- struct{}{}
	<-s.release
	return s.Service.Peek(ctx, code, token)
}

// Guesses sent at once count at once: 300 wrong codes from one address,
// every one in flight while the lookups are held, get no more lookups than
// the address's wrong codes a minute.
func TestConcurrentGuessesCountAtOnce(t *testing.T) {
	t.Parallel()
	const guesses = 300
	held := &heldRooms{Service: rooms.NewMemory(rooms.Limits{}), looking: make(chan struct{}, guesses), release: make(chan struct{})}
	t.Cleanup(func() { held.Close("test over") })
	_, ts := serveDeps(t, web.Deps{Classroom: classroom.Options{Rooms: held}})
	answered := make(chan struct{}, guesses)
	var wg sync.WaitGroup
	for i := range guesses {
		wg.Go(func() {
			res, err := http.Get(ts.URL + fmt.Sprintf("/join?code=ZZZZ%04d", i))
			if err == nil {
				res.Body.Close()
			}
			answered <- struct{}{}
		})
	}
	// Each guess is refused, or its lookup begins and waits: once every
	// one is either, all 300 have been in flight at once.
	deadline := time.After(clientPatience)
	for settled := 0; settled < guesses; settled++ {
		select {
		case <-held.looking:
		case <-answered:
		case <-deadline:
			t.Fatalf("%d of %d guesses refused or looked up", settled, guesses)
		}
	}
	close(held.release)
	wg.Wait()
	if n, limit := held.lookups.Load(), int64(rooms.DefaultLimits.FailedJoinsPerMinute); n > limit {
		t.Fatalf("%d codes looked up for one address at once, against an allowance of %d", n, limit)
	}
}

// A room's websocket and its server-sent events carry no body and outlive
// the server's body deadline (web.Deps.BodyTimeout): both still hear the
// room, and the events' upstream still takes a student's message.
func TestRoomConnectionsOutliveTheBodyDeadline(t *testing.T) {
	t.Parallel()
	const deadline = 300 * time.Millisecond
	_, ts := serveDeps(t, web.Deps{BodyTimeout: deadline})
	c := createRoom(t, ts.URL, roomRun)
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	_, event := studentEvents(t, ts.URL, c.Code)
	next := func(typ string) map[string]any {
		t.Helper()
		for {
			if m := event(); m["type"] == typ {
				return m
			}
		}
	}
	session := next("session")
	next("hello")

	time.Sleep(3 * deadline)
	pres.send(t, rooms.Up{Type: "step", Step: 2, Total: 9})
	next("step") // the events stream still hears the room
	body, _ := json.Marshal(map[string]any{"member": session["member"], "key": session["key"], "message": map[string]string{"type": "status", "status": "branched"}})
	sent, err := http.Post(ts.URL+"/r/"+c.Code+"/send", "application/json", bytes.NewReader(body))
	if err != nil || sent.StatusCode != http.StatusNoContent {
		t.Fatalf("the student's message: %v %v", err, sent)
	}
	sent.Body.Close()
	for i := 0; ; i++ { // the presenter's socket still hears the room
		if num(pres.next(t, "tally")["tally"].(map[string]any)["branched"]) == 1 {
			break
		}
		if i == 20 {
			t.Fatal("the presenter never heard the student branch off")
		}
	}
}

// studentEvents opens a room's events as a student's browser does, the
// identity its room's page issued coming along, and returns the answer
// and a reader of the events in order (the test fails when they end).
func studentEvents(t *testing.T, base, code string) (*http.Response, func() map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/r/"+code+"/events", nil)
	req.AddCookie(&http.Cookie{Name: classroom.StudentCookie, Value: studentPass(t, base, code)})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	lines := bufio.NewScanner(res.Body)
	return res, func() map[string]any {
		t.Helper()
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var m map[string]any
				json.Unmarshal([]byte(data), &m)
				return m
			}
		}
		t.Fatalf("the event stream ended: %v", lines.Err())
		return nil
	}
}
