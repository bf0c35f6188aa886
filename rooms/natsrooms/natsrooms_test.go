package natsrooms

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flashstep/grading"
	"flashstep/rooms"
	"flashstep/rooms/roomstest"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func broker(t *testing.T) string {
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

func service(t *testing.T, url string) *Service {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	s := New(nc, rooms.Limits{})
	t.Cleanup(func() { s.Close("test over"); nc.Close() })
	return s
}

func take(t *testing.T, m *rooms.Member, typ string) *rooms.Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-m.Box.Ready():
			for _, e := range m.Box.Take() {
				if e.Type == typ {
					return e
				}
			}
		case <-deadline:
			t.Fatalf("no %s in 5 s", typ)
		}
	}
}

// TestRoomAcrossServices: the room lives on A; B's members follow it, and
// B's refusals come from A.
func TestRoomAcrossServices(t *testing.T) {
	t.Parallel()
	url := broker(t)
	a, b := service(t, url), service(t, url)
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, c.Code, c.Token+"x", ""); !errors.Is(err, rooms.ErrBadToken) {
		t.Fatalf("a forged token through B: %v", err)
	}
	if _, err := b.Join(ctx, "ZZZZZZZZ", "", ""); !errors.Is(err, rooms.ErrNoRoom) {
		t.Fatalf("an unknown code through B: %v", err)
	}
	p, err := b.Join(ctx, c.Code, c.Token, "")
	if err != nil || !p.Presenter {
		t.Fatalf("the presenter through B: %v", err)
	}
	s, err := b.Join(ctx, c.Code, "", "")
	if err != nil {
		t.Fatal(err)
	}
	take(t, s, rooms.EventHello)
	if err := p.Send(rooms.Up{Type: rooms.CmdStep, Step: 3, Total: 9}); err != nil {
		t.Fatal(err)
	}
	if e := take(t, s, rooms.EventStep); e.Step != 3 {
		t.Fatalf("step %d", e.Step)
	}
	if err := s.Send(rooms.Up{Type: rooms.CmdStep, Step: 1, Total: 9}); err == nil {
		t.Fatal("a student stepped the room through B")
	}
	st, err := a.Peek(ctx, c.Code, "")
	if err != nil || st.Step != 3 || st.Presenter {
		t.Fatalf("peek on A: %+v %v", st, err)
	}
}

// fast is a service on its own connection with a quick heartbeat; the
// connection is returned so a test can cut it as a crash would.
func fast(t *testing.T, url string) (*Service, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	s := NewWithOptions(nc, rooms.Limits{}, Options{Beat: 100 * time.Millisecond, LostAfter: 600 * time.Millisecond})
	t.Cleanup(func() { s.Close("test over"); nc.Close() })
	return s, nc
}

// TestOwnerCrashIsToldAndQuietRoomsLive: a quiet room outlives the loss
// limit many times over (the owner's beats keep it); when the owner's
// connection is cut without a word, B's students are told the room is lost
// at B's first beat past the limit. The test beats for both servers, on a
// clock of its own.
func TestOwnerCrashIsToldAndQuietRoomsLive(t *testing.T) {
	t.Parallel()
	url := broker(t)
	clk := roomstest.NewClock()
	a, ncA := still(t, url, clk)
	b, _ := still(t, url, clk)
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Join(ctx, c.Code, "", "")
	if err != nil {
		t.Fatal(err)
	}
	take(t, s, rooms.EventHello)
	lost := func() bool {
		for _, e := range s.Box.Take() {
			if e.Type == rooms.EventClosed {
				return true
			}
		}
		return false
	}
	const beat = time.Second // still's loss limit is 4 s
	for k := range 13 {      // over three loss limits, with no event but beats
		now := clk.Advance(beat)
		a.Beat(now)
		heard(t, b, c.Code, now)
		b.Beat(now) // B's verdict on the room, given now
		if lost() {
			t.Fatalf("a quiet room was declared lost at beat %d while its owner lived", k+1)
		}
	}
	ncA.Close() // the owner crashes: no "ended", no "restart"
	b.Beat(clk.Advance(4 * beat))
	if lost() {
		t.Fatal("B declared the room lost at the loss limit, not past it")
	}
	b.Beat(clk.Advance(beat))
	if e := take(t, s, rooms.EventClosed); e.Why != rooms.WhyLost || !strings.Contains(e.Reason, "stopped answering") {
		t.Fatalf("closed: %+v", e)
	}
	if b.Stats().Members != 0 {
		t.Fatalf("B still holds %d members of the lost room", b.Stats().Members)
	}
}

// heard waits until s has heard room code's owner at now: a beat published
// then has reached it. (The beat carries no event, so no member is told:
// the service's own record of it is all there is to wait on.)
func heard(t *testing.T, s *Service, code string, now time.Time) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for {
		s.mu.Lock()
		at := s.heard[code]
		s.mu.Unlock()
		if at.Equal(now) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the owner's beat at %v did not reach the follower in 5 s (last heard %v)", now, at)
		}
	}
}

// TestCrashedServersStudentsLeaveTheTally: B's students count on the
// owner's tally until B's connection is cut; then they leave it.
func TestCrashedServersStudentsLeaveTheTally(t *testing.T) {
	t.Parallel()
	url := broker(t)
	a, _ := fast(t, url)
	b, ncB := fast(t, url)
	ctx := context.Background()
	c, _ := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	p, err := a.Join(ctx, c.Code, c.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Join(ctx, c.Code, "", rooms.NewStudent()); err != nil {
			t.Fatal(err)
		}
	}
	students := func(want int) {
		t.Helper()
		deadline := time.After(4 * time.Second)
		for {
			select {
			case <-p.Box.Ready():
				for _, e := range p.Box.Take() {
					if e.Type == rooms.EventTally && e.Tally.Students == want {
						return
					}
				}
			case <-deadline:
				t.Fatalf("the tally never showed %d students", want)
			}
		}
	}
	students(2)
	ncB.Close() // B crashes: its students never say they left
	students(0)
}

// TestLeavingServerSendsStudentsElsewhere: a server that shuts down while
// another owns the room tells its students to reconnect; it refuses new
// joins, and the owner takes them back at the current step.
func TestLeavingServerSendsStudentsElsewhere(t *testing.T) {
	t.Parallel()
	url := broker(t)
	a, _ := fast(t, url)
	b, _ := fast(t, url)
	ctx := context.Background()
	c, _ := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	p, _ := a.Join(ctx, c.Code, c.Token, "")
	s, _ := b.Join(ctx, c.Code, "", "")
	take(t, s, rooms.EventHello)
	p.Send(rooms.Up{Type: rooms.CmdStep, Step: 4, Total: 9})
	take(t, s, rooms.EventStep)
	b.Close("shutting down")
	if e := take(t, s, rooms.EventClosed); e.Why != rooms.WhyMoved {
		t.Fatalf("closed: %+v", e)
	}
	if _, err := b.Join(ctx, c.Code, "", ""); !errors.Is(err, rooms.ErrShuttingDown) {
		t.Fatalf("a join on the leaving server: %v", err)
	}
	again, err := a.Join(ctx, c.Code, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if h := take(t, again, rooms.EventHello); h.Step != 4 {
		t.Fatalf("back at step %d, want 4", h.Step)
	}
}

// still is a service on its own connection whose time is clk's and whose
// heartbeat never beats by itself: the test calls Beat.
func still(t *testing.T, url string, clk *roomstest.Clock) (*Service, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	s := NewWithOptions(nc, rooms.Limits{StudentRate: 1000}, Options{Beat: time.Hour, LostAfter: 4 * time.Second, Now: clk.Now})
	t.Cleanup(func() { s.Close("test over"); nc.Close() })
	return s, nc
}

// tallyUntil waits for the presenter's tally to satisfy ok.
func tallyUntil(t *testing.T, p *rooms.Member, what string, ok func(*rooms.Tally) bool) *rooms.Tally {
	t.Helper()
	deadline := time.After(5 * time.Second)
	var last *rooms.Tally
	for {
		select {
		case <-p.Box.Ready():
			for _, e := range p.Box.Take() {
				if e.Type == rooms.EventTally {
					last = e.Tally
				}
			}
			if last != nil && ok(last) {
				return last
			}
		case <-deadline:
			t.Fatalf("the tally never showed %s; the last: %+v", what, last)
		}
	}
}

// TestPresenceCountsStudentsAcrossServers: each server reports its
// students by identity; the owner counts a student with tabs on two
// servers once, counts the answers of the students present only, keeps
// those of a student who left for when it is back, and drops the students
// (and answers) of a server that falls silent.
func TestPresenceCountsStudentsAcrossServers(t *testing.T) {
	t.Parallel()
	url := broker(t)
	a, _ := fast(t, url)
	b, ncB := fast(t, url)
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Join(ctx, c.Code, c.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.OpenPoll(&rooms.Poll{Question: "m?", Number: 1, Tolerance: grading.Absolute(0.1), Lo: -9, Hi: 9}); err != nil {
		t.Fatal(err)
	}
	x, y := rooms.NewStudent(), rooms.NewStudent()
	xa, _ := a.Join(ctx, c.Code, "", x)
	xb, _ := b.Join(ctx, c.Code, "", x) // x's second tab, through B
	yb, _ := b.Join(ctx, c.Code, "", y)
	for _, m := range []*rooms.Member{xa, xb, yb} {
		if err := m.Send(rooms.Up{Type: rooms.CmdAnswer, Answer: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	tl := tallyUntil(t, p, "x and y on 3 connections", func(tl *rooms.Tally) bool { return tl.Connections == 3 && tl.Answered == 2 })
	if tl.Students != 2 || tl.Following != 2 {
		t.Fatalf("x on A and B, y on B: %+v", tl)
	}
	xb.Leave()
	xa.Leave()
	tallyUntil(t, p, "x gone, its answer with it", func(tl *rooms.Tally) bool { return tl.Students == 1 && tl.Answered == 1 })
	b.Join(ctx, c.Code, "", x)
	tallyUntil(t, p, "x back with its answer", func(tl *rooms.Tally) bool { return tl.Students == 2 && tl.Answered == 2 })
	// Every student is on B now; B's connection is cut without a word, and
	// A's beats forget B's students, and their answers, after the limit.
	ncB.Close()
	tallyUntil(t, p, "B's students gone", func(tl *rooms.Tally) bool { return tl.Students == 0 && tl.Connections == 0 && tl.Answered == 0 })
}

// TestRoomLifetimesAcrossServers: the owner ends a room nobody presented
// five minutes after it opened (its students elsewhere are told), keeps a
// presented one while its presenter is connected through another server,
// and ends it an hour after the presenter left; and it bounds the open
// rooms created from one address.
func TestRoomLifetimesAcrossServers(t *testing.T) {
	t.Parallel()
	url := broker(t)
	clk := roomstest.NewClock()
	a, _ := still(t, url, clk)
	b, _ := still(t, url, clk)
	ctx := context.Background()
	run := rooms.Run{Page: rooms.PageStepper, Query: "n=8"}
	probe, err := a.Create(ctx, run, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	class, _ := a.Create(ctx, run, "192.0.2.1")
	alive := func(code string) bool {
		_, err := b.Peek(ctx, code, "")
		return err == nil
	}
	watcher, _ := b.Join(ctx, probe.Code, "", "")
	take(t, watcher, rooms.EventHello)
	pres, err := b.Join(ctx, class.Code, class.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(5*time.Minute - time.Second)
	a.ExpireNow()
	if !alive(probe.Code) {
		t.Fatal("a room nobody presented ended before 5 minutes")
	}
	clk.Advance(2 * time.Second)
	a.ExpireNow()
	if e := take(t, watcher, rooms.EventClosed); e.Why != rooms.WhyExpired || !strings.Contains(e.Reason, "5 minutes") {
		t.Fatalf("the probe's student on B was told %+v", e)
	}
	if alive(probe.Code) {
		t.Fatal("a room nobody presented outlived 5 minutes")
	}
	clk.Advance(2 * time.Hour)
	a.ExpireNow()
	if !alive(class.Code) {
		t.Fatal("a room ended while its presenter was connected through B")
	}
	pres.Leave()
	clk.Advance(59 * time.Minute)
	a.ExpireNow()
	if !alive(class.Code) {
		t.Fatal("a room ended within the hour after its presenter left")
	}
	clk.Advance(2 * time.Minute)
	a.ExpireNow()
	if alive(class.Code) {
		t.Fatal("a room outlived its presenter's absence by an hour")
	}

	// 20 open rooms per address on a server; the 21st is refused, another
	// address is not; expired ones free their places.
	for i := range 20 {
		if _, err := a.Create(ctx, run, "192.0.2.7"); err != nil {
			t.Fatalf("room %d of 20: %v", i+1, err)
		}
	}
	if _, err := a.Create(ctx, run, "192.0.2.7"); !errors.Is(err, rooms.ErrAddressRooms) || !strings.Contains(err.Error(), "at most 20") {
		t.Fatalf("the 21st room from one address: %v", err)
	}
	if _, err := a.Create(ctx, run, "192.0.2.8"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	clk.Advance(6 * time.Minute)
	a.ExpireNow()
	if _, err := a.Create(ctx, run, "192.0.2.7"); err != nil {
		t.Fatalf("after its rooms expired: %v", err)
	}
	if n := a.Stats().Rooms; n != 1 {
		t.Fatalf("%d rooms open, want the last one", n)
	}
}

// TestPresenterIdleAcrossServers: the owner ends a room whose presenter,
// connected through another server, sends nothing for the limit the
// service was given, and every server's participants are told; a room
// page drawn through one server and a socket through another agree on
// the students the room issued, since its key travels with its state.
func TestPresenterIdleAcrossServers(t *testing.T) {
	t.Parallel()
	url := broker(t)
	clk := roomstest.NewClock()
	idleLimits := rooms.Limits{PresenterIdle: 40 * time.Minute}
	service := func() *Service {
		nc, err := nats.Connect(url, nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		s := NewWithOptions(nc, idleLimits, Options{Beat: time.Hour, LostAfter: 4 * time.Second, Now: clk.Now})
		t.Cleanup(func() { s.Close("test over"); nc.Close() })
		return s
	}
	a, b := service(), service()
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"}, "")
	if err != nil {
		t.Fatal(err)
	}
	onA, _ := a.Peek(ctx, c.Code, "")
	onB, _ := b.Peek(ctx, c.Code, "")
	id, pass := onA.IssueStudent()
	if id == "" || onB.IssuedStudent(pass) != id {
		t.Fatalf("a student issued through A is %q through B", onB.IssuedStudent(pass))
	}
	pres, err := b.Join(ctx, c.Code, c.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	stud, _ := b.Join(ctx, c.Code, "", id)
	take(t, stud, rooms.EventHello)
	if err := pres.Send(rooms.Up{Type: rooms.CmdStep, Step: 2, Total: 3}); err != nil {
		t.Fatal(err)
	}
	take(t, stud, rooms.EventStep)
	clk.Advance(39 * time.Minute)
	a.ExpireNow()
	if _, err := b.Peek(ctx, c.Code, ""); err != nil {
		t.Fatalf("the room ended within 40 minutes of its presenter's step: %v", err)
	}
	clk.Advance(2 * time.Minute)
	a.ExpireNow()
	if e := take(t, stud, rooms.EventClosed); e.Why != rooms.WhyExpired || !strings.Contains(e.Reason, "after 40 minutes of the presenter's inactivity") {
		t.Fatalf("B's student was told %+v", e)
	}
	if _, err := b.Peek(ctx, c.Code, ""); !errors.Is(err, rooms.ErrNoRoom) {
		t.Fatalf("the room outlived its presenter's silence: %v", err)
	}
}
