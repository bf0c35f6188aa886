package classroom_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"flashstep/classroom"
	"flashstep/internal/testrand"
	"flashstep/labrun"
	"flashstep/labrun/labruntest"
	"flashstep/rooms"
	"flashstep/web"
)

// TestLabRoom: a presenter puts lab exercises in front of a class of 300
// over real websockets and sees, of the students present, who ran their
// code and who passed. A loop exercise's verdict is the student's page's;
// a kernel exercise's is read by the server from the submission's ticket,
// whatever the page claims. The presenter turns the kernel track off for
// the room: the room's pages say so and their submissions are refused.
func TestLabRoom(t *testing.T) {
	t.Parallel()
	svc := labrun.New(labrun.Options{Command: labruntest.Command(), Limit: 5 * time.Second})
	t.Cleanup(svc.Close)
	_, ts := serveDeps(t, web.Deps{Lab: svc})

	post := func(path, ctype, body string) (int, string) {
		t.Helper()
		res, err := http.Post(ts.URL+path, ctype, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := post("/api/rooms", "application/json", `{"page":"lab","query":"no-such-exercise"}`); code != http.StatusBadRequest || !strings.Contains(body, "query") || !strings.Contains(body, "online-step") {
		t.Errorf("a lab room for an unknown exercise: %d %s", code, body)
	}
	code, body := post("/api/rooms", "application/json", `{"page":"lab","query":"online-step"}`)
	var c classroom.Created
	json.Unmarshal([]byte(body), &c)
	if code != http.StatusCreated || c.Query != "online-step" {
		t.Fatalf("a lab room: %d %s", code, body)
	}
	pres := joinRoom(t, ts.URL, c.Code, c.Token)
	if h := pres.next(t, "hello"); h["page"] != rooms.PageLab || h["query"] != "online-step" {
		t.Fatalf("the presenter's hello: %v", h)
	}

	// 300 students; a random part of them pass, some fail first.
	const class = 300
	rng := testrand.New(t)
	students := make([]*participant, class)
	for k := range students {
		students[k] = joinRoom(t, ts.URL, c.Code, "")
	}
	passed, tried := 0, 0
	for _, s := range students {
		s.next(t, "hello")
		switch rng.IntN(4) {
		case 0: // not run yet
		case 1:
			s.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail"})
			tried++
		case 2:
			s.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail"})
			s.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass"})
			tried, passed = tried+1, passed+1
		case 3:
			s.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass"})
			s.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail"}) // a pass stays a pass
			tried, passed = tried+1, passed+1
		}
	}
	labTally := func(what string, students, tried, passed int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var last map[string]any
		for time.Now().Before(deadline) {
			tl := pres.next(t, "tally")["tally"].(map[string]any)
			last = tl
			if l, ok := tl["lab"].(map[string]any); ok && num(tl["students"]) == students && num(l["tried"]) == tried && num(l["passed"]) == passed {
				return
			}
		}
		t.Fatalf("%s: the presenter's tally never showed %d students, %d tried, %d passed; last %v", what, students, tried, passed, last)
	}
	labTally("the class on exercise 1", class, tried, passed)

	// The next exercise, a kernel one: every page is told, and the tally
	// starts over.
	pres.send(t, rooms.Up{Type: rooms.CmdRun, Page: rooms.PageLab, Query: "online-kernel"})
	for _, s := range students {
		if e := s.next(t, "run"); e["page"] != rooms.PageLab || e["query"] != "online-kernel" {
			t.Fatalf("a student's run event: %v", e)
		}
	}
	labTally("the kernel exercise, before any verdict", class, 0, 0)
	a, b := students[0], students[1]
	a.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass"})
	if n := a.next(t, "notice"); n["field"] != "ticket" {
		t.Errorf("a kernel pass without a ticket: %v", n)
	}
	submit := func(source, query string) (int, string) {
		t.Helper()
		return post("/api/lab/online-kernel/submissions"+query, "text/plain", source)
	}
	// A student's kernel goes from the room's page, with its cookie.
	submitAs := func(s *participant, source string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/r/"+c.Code+"/lab/online-kernel/submissions", strings.NewReader(source))
		req.Header.Set("Content-Type", "text/plain")
		req.AddCookie(&http.Cookie{Name: classroom.StudentCookie, Value: s.pass})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	verdictOf := func(s *participant, source string) string {
		t.Helper()
		code, body := submitAs(s, source)
		var sub struct{ ID string }
		json.Unmarshal([]byte(body), &sub)
		if code != http.StatusAccepted {
			t.Fatalf("a submission from the room: %d %s", code, body)
		}
		for range 400 {
			st, _ := svc.Status(sub.ID)
			if st.State == "done" {
				return sub.ID
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatal("no verdict in 10 s")
		return ""
	}
	// a's kernel passes, and a's page says "fail"; b's fails, and says so;
	// then c's fails, and its page says "pass": the server counts what it
	// knows.
	a.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail", Ticket: verdictOf(a, "// PASS")})
	b.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "fail", Ticket: verdictOf(b, "// LSE")})
	labTally("two kernels, one passing", class, 2, 1)
	students[2].send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass", Ticket: verdictOf(students[2], "// NEGINF")})
	labTally("a failing kernel that claims a pass", class, 3, 1)

	// Kernels off for the room: every page hears it; the room's
	// submissions are refused, naming the room; its page says so.
	a.send(t, rooms.Up{Type: rooms.CmdKernels, Answer: "off"})
	if n := a.next(t, "notice"); !strings.Contains(n["error"].(string), "only the presenter") {
		t.Errorf("a student's switch: %v", n)
	}
	pres.send(t, rooms.Up{Type: rooms.CmdKernels, Answer: "off"})
	for _, s := range []*participant{a, b, students[class-1]} {
		if e := s.next(t, "kernels"); e["kernels_off"] != true {
			t.Errorf("kernels event: %v", e)
		}
	}
	if code, body := submitAs(a, "// PASS"); code != http.StatusForbidden || !strings.Contains(body, "turned the kernel track off") {
		t.Errorf("a submission from the room with its track off: %d %s", code, body)
	}
	if code, body := submit("// PASS", "?room="+c.Code); code != http.StatusForbidden || !strings.Contains(body, "turned the kernel track off") {
		t.Errorf("a submission naming the room with its track off: %d %s", code, body)
	}
	if code, body := submit("// PASS", "?room=nope!"); code != http.StatusBadRequest || !strings.Contains(body, "room") {
		t.Errorf("a submission naming a bad room: %d %s", code, body)
	}
	res, err := http.Get(ts.URL + "/r/" + c.Code)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Contains(page, []byte("The presenter turned the kernel track off")) || !bytes.Contains(page, []byte(`"kernel_track":false`)) || !bytes.Contains(page, []byte(`"server_kernels":true`)) {
		t.Errorf("the room's page with the track off does not say so")
	}
	// Back to the stepper: verdicts are not taken there.
	pres.send(t, rooms.Up{Type: rooms.CmdRun, Page: rooms.PageStepper, Query: roomRun})
	a.next(t, "run")
	a.send(t, rooms.Up{Type: rooms.CmdLabResult, Answer: "pass"})
	if n := a.next(t, "notice"); !strings.Contains(n["error"].(string), "no lab exercise") {
		t.Errorf("a verdict in a stepper room: %v", n)
	}
}

// TestRoomTakesKernelsForItsExerciseOnly: a room's identities are free
// (one GET of its page each), so a room takes kernels, on either route,
// only for the lab exercise in front of it: a room of another exercise,
// or of no exercise, is refused with 409, naming what it shows.
func TestRoomTakesKernelsForItsExerciseOnly(t *testing.T) {
	t.Parallel()
	svc := labrun.New(labrun.Options{Command: labruntest.Command(), Limit: 5 * time.Second})
	t.Cleanup(svc.Close)
	_, ts := serveDeps(t, web.Deps{Lab: svc})
	create := func(page, query string) string {
		t.Helper()
		body, _ := json.Marshal(classroom.Request{Page: page, Query: query})
		res, err := http.Post(ts.URL+"/api/rooms", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var c classroom.Created
		json.NewDecoder(res.Body).Decode(&c)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("a %s room: %d", page, res.StatusCode)
		}
		return c.Code
	}
	// submit sends a kernel for online-kernel naming room code: from its
	// page, as a student it issued (inRoom), or with ?room=.
	submit := func(code string, inRoom bool) (int, string) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar, Timeout: clientPatience}
		url := ts.URL + "/api/lab/online-kernel/submissions?room=" + code
		if inRoom {
			res, err := client.Get(ts.URL + "/r/" + code) // an identity
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			url = ts.URL + "/r/" + code + "/lab/online-kernel/submissions"
		}
		res, err := client.Post(url, "text/plain", strings.NewReader("// SLEEP"))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	other, stepper, shown := create(rooms.PageLab, "online-step"), create("step", roomRun), create(rooms.PageLab, "online-kernel")
	for _, inRoom := range []bool{true, false} {
		if code, body := submit(other, inRoom); code != http.StatusConflict || !strings.Contains(body, "shows exercise online-step, not online-kernel") {
			t.Errorf("in room %v, a room showing another exercise: %d %s", inRoom, code, body)
		}
		if code, body := submit(stepper, inRoom); code != http.StatusConflict || !strings.Contains(body, "shows no lab exercise") {
			t.Errorf("in room %v, a room showing the stepper: %d %s", inRoom, code, body)
		}
		if code, body := submit(shown, inRoom); code != http.StatusAccepted {
			t.Errorf("in room %v, the room's own exercise: %d %s", inRoom, code, body)
		}
	}
}
