package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

// student opens a tab in a second browser context (its own cookies: no
// presenter token) in the same Chromium, at the join URL; it ends with the
// presenter's.
func student(t *testing.T, parent context.Context, joinURL string) (context.Context, func() []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(takeTab(t))
	stop := context.AfterFunc(parent, cancel)
	t.Cleanup(func() { stop(); cancel() })
	problems := watchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 900), chromedp.Navigate(joinURL)); err != nil {
		t.Fatal(err)
	}
	return ctx, problems
}

func stepLabel(ctx context.Context, t *testing.T) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('step-label').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitLabel waits until the page's step label reads want.
func waitLabel(ctx context.Context, t *testing.T, who, want string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('step-label').textContent === %q`, want),
		chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		t.Fatalf("%s: the step label did not become %q (it says %q): %v", who, want, stepLabel(ctx, t), err)
	}
}

func click(ctx context.Context, t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// TestBrowserClassroom: a presenter presents a run; two students, each in
// a browser context of their own, follow its steps; one branches off and
// rejoins; a poll is answered by both and revealed to both.
func TestBrowserClassroom(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t)
	pres := browser(t)
	presProblems := watchConsole(pres)
	if err := chromedp.Do(pres, chromedp.Navigate(base+"/step?variant=flash2&n=12&d=4&br=4&bc=3&seed=3&step=2")); err != nil {
		t.Fatal(err)
	}
	waitText(pres, t, "#run-status", "Trace complete")
	click(pres, t, "#present")
	// The form posts and the page navigates to the room's: wait for it.
	for deadline := time.Now().Add(15 * time.Second); ; {
		path, err := chromedp.Run(pres, chromedp.Evaluate[string](`location.pathname + (document.querySelector('[data-testid=room-code]') ? '!' : '')`))
		if err == nil && strings.HasPrefix(path, "/r/") && strings.HasSuffix(path, "!") {
			break
		}
		if time.Now().After(deadline) {
			txt, _ := chromedp.Run(pres, chromedp.Evaluate[string](`document.querySelector('main')?.textContent`))
			t.Fatalf("Present did not open the room's page: %q %v: %s", path, err, txt)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitText(pres, t, "[data-testid=room-code]", "-")
	waitText(pres, t, "[data-testid=room-bytes]", "Each student downloads")
	joinURL, err := chromedp.Run(pres, chromedp.Evaluate[string](`document.querySelector('[data-testid=room-join-url]').href`))
	if err != nil || !strings.Contains(joinURL, "/r/") {
		t.Fatalf("join URL %q: %v", joinURL, err)
	}
	page, _ := chromedp.Run(pres, chromedp.Evaluate[string](`document.documentElement.outerHTML + document.cookie`))
	if strings.Contains(page, "fs_presenter") {
		t.Fatal("the presenter's page or script can read the control token")
	}
	waitText(pres, t, "#run-status", "Trace complete")
	if got := stepLabel(pres, t); !strings.HasPrefix(got, "2 / ") {
		t.Fatalf("the room did not open at the presenter's step 2: %q", got)
	}

	s1, s1Problems := student(t, pres, joinURL)
	s2, s2Problems := student(t, pres, joinURL)
	for _, s := range []context.Context{s1, s2} {
		waitText(s, t, "[data-testid=room-status]", "Following the presenter")
		waitLabel(s, t, "student", stepLabel(pres, t))
	}
	waitText(pres, t, "[data-testid=room-counts]", "2 students: 2 following")

	// The presenter steps: both follow.
	for range 3 {
		click(pres, t, "#next")
	}
	want := stepLabel(pres, t)
	if !strings.HasPrefix(want, "5 / ") {
		t.Fatalf("the presenter is at %q after three steps from 2", want)
	}
	waitLabel(s1, t, "student 1", want)
	waitLabel(s2, t, "student 2", want)

	// Student 1 branches off and steps back on their own; the room goes on.
	click(s1, t, "#prev")
	waitText(s1, t, "[data-testid=room-status]", "Branched off")
	waitText(pres, t, "[data-testid=room-counts]", "1 following, 1 branched")
	click(pres, t, "#next")
	click(pres, t, "#next")
	want = stepLabel(pres, t)
	waitLabel(s2, t, "student 2", want)
	if got := stepLabel(s1, t); !strings.HasPrefix(got, "4 / ") {
		t.Fatalf("the branched student was moved to %q", got)
	}
	// Rejoin snaps back to the presenter's step.
	click(s1, t, "[data-testid=room-rejoin]")
	waitLabel(s1, t, "student 1", want)
	waitText(s1, t, "[data-testid=room-status]", "Following the presenter")
	waitText(pres, t, "[data-testid=room-counts]", "2 following, 0 branched")

	// A poll: both answer, the presenter sees the count, reveals; both see it.
	click(pres, t, "[data-testid=poll-open]")
	for i, s := range []context.Context{s1, s2} {
		waitText(s, t, "[data-testid=room-question]", "Predict m for row")
		if err := chromedp.Do(s, chromedp.SendKeys(chromedp.CSS("[data-testid=room-answer]"), fmt.Sprint(i+1))); err != nil {
			t.Fatal(err)
		}
		click(s, t, "[data-testid=room-answer-send]")
		waitText(s, t, "[data-testid=room-note]", "Answer sent")
	}
	waitText(pres, t, "[data-testid=room-reveal]", "2 answered")
	click(pres, t, "[data-testid=poll-reveal]")
	for _, s := range []context.Context{pres, s1, s2} {
		waitText(s, t, "[data-testid=room-reveal]", "Answer: ")
		waitText(s, t, "[data-testid=room-reveal]", "of 2 right")
	}
	bars, _ := chromedp.Run(s2, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=room-hist] .bar').length`))
	if bars == 0 {
		t.Error("the revealed poll shows no histogram")
	}
	// The reveal moves the room to the step that shows the answer.
	want = stepLabel(pres, t)
	waitLabel(s2, t, "student 2", want)

	for who, p := range map[string]func() []string{"presenter": presProblems, "student 1": s1Problems, "student 2": s2Problems} {
		if probs := p(); len(probs) > 0 {
			t.Errorf("%s's console: %v", who, probs)
		}
	}
}

// roomClient is one participant's websocket, read into a channel in order.
type roomClient struct {
	conn   *websocket.Conn
	events chan map[string]any // ends with {"type":"_close"}
}

func dialRoom(t *testing.T, base, code, token string) *roomClient {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Cookie", "fs_presenter="+token)
	}
	return dialRoomWith(t, base, code, h)
}

// studentPass is the identity a room's page issues a browser (the
// fs_student cookie), which its sockets bring back to count as a student.
func studentPass(t *testing.T, base, code string) string {
	t.Helper()
	res, err := http.Get(base + "/r/" + code)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "fs_student" {
			return ck.Value
		}
	}
	t.Fatalf("the room's page on %s issued no identity: %s", base, res.Status)
	return ""
}

func dialRoomWith(t *testing.T, base, code string, h http.Header) *roomClient {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/r/"+code+"/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &roomClient{conn: conn, events: make(chan map[string]any, 10000)}
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				errors.As(err, &ce)
				c.events <- map[string]any{"type": "_close", "close": ce}
				return
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			c.events <- m
		}
	}()
	return c
}

func (c *roomClient) next(t *testing.T, typ string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-c.events:
			if e["type"] == typ {
				return e
			}
			if e["type"] == "_close" {
				t.Fatalf("closed (%v) while waiting for %s", e["close"], typ)
			}
		case <-timeout:
			t.Fatalf("no %s in 10 s", typ)
		}
	}
}

// TestTwoServersShareARoomThroughNATS: two flashstep servers and an
// embedded NATS broker; the presenter on one, the students on the other,
// and every step arrives, in order. The owner's shutdown reaches them too.
func TestTwoServersShareARoomThroughNATS(t *testing.T) {
	longOnly(t) // make test keeps rooms/natsrooms' own tests, on an embedded broker
	t.Parallel()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	a, stopA := startServer(t, "-worker", "none", "-nats", ns.ClientURL())
	b, _ := startServer(t, "-worker", "none", "-nats", ns.ClientURL())

	res, err := http.Post(a+"/api/rooms", "application/json", strings.NewReader(`{"page":"step","query":"variant=flash2&n=12&d=4&br=4&bc=3"}`))
	if err != nil {
		t.Fatal(err)
	}
	var room struct{ Code, Token, Query string }
	json.NewDecoder(res.Body).Decode(&room)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create on A: %s", res.Status)
	}
	// Server B knows the room: its page and its websockets.
	page, err := http.Get(b + "/r/" + room.Code)
	if err != nil || page.StatusCode != 200 {
		t.Fatalf("the room's page on B: %v %v", err, page.Status)
	}
	page.Body.Close()
	pres := dialRoom(t, a, room.Code, room.Token)
	if h := pres.next(t, "hello"); h["role"] != "presenter" {
		t.Fatalf("presenter on A: %v", h)
	}
	var studs []*roomClient
	for range 3 {
		// Each student's page comes from A, its socket through B: the
		// identity is the room's, whichever server issued it.
		s := dialRoomWith(t, b, room.Code, http.Header{"Cookie": {"fs_student=" + studentPass(t, a, room.Code)}})
		if h := s.next(t, "hello"); h["query"] != room.Query {
			t.Fatalf("a student's hello on B: %v", h)
		}
		studs = append(studs, s)
	}
	// A forged token through B is refused by A, the owner.
	h := http.Header{"Cookie": {"fs_presenter=" + room.Token + "x"}}
	if conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b, "http")+"/r/"+room.Code+"/ws", h); err == nil {
		_, _, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4003 {
			t.Fatalf("a forged token on B: %v", err)
		}
		conn.Close()
	}
	const steps = 100
	for k := 1; k <= steps; k++ {
		if err := pres.conn.WriteJSON(map[string]any{"type": "step", "step": k, "total": steps}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // 50 a second: under the presenter's limit
	}
	for i, s := range studs {
		for k := 1; k <= steps; k++ {
			if got := int(s.next(t, "step")["step"].(float64)); got != k {
				t.Fatalf("student %d on B: step %d where %d was due", i, got, k)
			}
		}
	}
	// Upstream from B reaches the presenter on A: a student branches.
	studs[0].conn.WriteJSON(map[string]string{"type": "status", "status": "branched"})
	for {
		tl := pres.next(t, "tally")["tally"].(map[string]any)
		if tl["branched"].(float64) == 1 && tl["students"].(float64) == 3 {
			break
		}
	}
	// The owner stops: the room ends, and B's students are told why.
	stopA()
	for _, s := range studs {
		if e := s.next(t, "closed"); e["why"] != "restart" {
			t.Fatalf("closed: %v", e)
		}
	}
}

// TestBrowserLessonClassroom: a teacher presses Present on a lesson's
// embedded stepper; the room opens on the widget's run; a student joins and
// follows; the teacher poses the lesson's checkpoint nearest the widget;
// the student answers; the reveal shows the course's own answer.
func TestBrowserLessonClassroom(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	pres := browser(t)
	presProblems := watchConsole(pres)
	if err := chromedp.Do(pres, chromedp.Navigate(base+"/lessons/tiling#ragged-run")); err != nil {
		t.Fatal(err)
	}
	click(pres, t, "#ragged-run [data-testid=widget-present] button")
	for deadline := time.Now().Add(15 * time.Second); ; {
		path, err := chromedp.Run(pres, chromedp.Evaluate[string](`location.pathname + (document.querySelector('[data-testid=room-code]') ? '!' : '')`))
		if err == nil && strings.HasPrefix(path, "/r/") && strings.HasSuffix(path, "!") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Present on the lesson's widget did not open a room: %q %v", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitText(pres, t, "#run-status", "Trace complete")
	waitText(pres, t, "[data-testid=room-lesson]", "Tiling")
	// The widget's run: the ragged preset (N = 11), at the widget's step 1.
	if got := stepLabel(pres, t); !strings.HasPrefix(got, "1 / ") {
		t.Fatalf("the room opened at %q, not the widget's step 1", got)
	}
	joinURL, _ := chromedp.Run(pres, chromedp.Evaluate[string](`document.querySelector('[data-testid=room-join-url]').href`))
	s, sProblems := student(t, pres, joinURL)
	waitText(s, t, "[data-testid=room-status]", "Following the presenter")
	click(pres, t, "#next")
	click(pres, t, "#next")
	want := stepLabel(pres, t)
	if !strings.HasPrefix(want, "3 / ") {
		t.Fatalf("the presenter is at %q", want)
	}
	waitLabel(s, t, "student", want)

	click(pres, t, "[data-testid=poll-checkpoint]")
	waitText(s, t, "[data-testid=room-question]", "How many tile steps")
	// The course's answer to the same checkpoint, as its page would get it.
	res, err := http.Post(base+"/api/checkpoints/tiling/ragged-steps", "application/json", strings.NewReader(`{"reveal":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var course struct{ Answer string }
	json.NewDecoder(res.Body).Decode(&course)
	res.Body.Close()
	if course.Answer == "" {
		t.Fatal("the course gave no answer")
	}
	if err := chromedp.Do(s, chromedp.SendKeys(chromedp.CSS("[data-testid=room-answer]"), course.Answer)); err != nil {
		t.Fatal(err)
	}
	click(s, t, "[data-testid=room-answer-send]")
	waitText(s, t, "[data-testid=room-note]", "Answer sent")
	waitText(pres, t, "[data-testid=room-reveal]", "1 answered")
	click(pres, t, "[data-testid=poll-reveal]")
	for _, c := range []context.Context{pres, s} {
		waitText(c, t, "[data-testid=room-reveal]", "Answer: "+course.Answer+". 1 of 1 right.")
	}
	waitText(s, t, "[data-testid=room-reveal]", "Your answer "+course.Answer+" is right")
	bars, _ := chromedp.Run(s, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=room-hist] .bar.correct').length`))
	if bars != 1 {
		t.Errorf("the revealed histogram marks %d right bars", bars)
	}
	for who, p := range map[string]func() []string{"presenter": presProblems, "student": sProblems} {
		if probs := p(); len(probs) > 0 {
			t.Errorf("%s's console: %v", who, probs)
		}
	}
}
