package natsrooms

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flashstep/rooms"

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
	url := broker(t)
	a, b := service(t, url), service(t, url)
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, c.Code, c.Token+"x"); !errors.Is(err, rooms.ErrBadToken) {
		t.Fatalf("a forged token through B: %v", err)
	}
	if _, err := b.Join(ctx, "ZZZZZZZZ", ""); !errors.Is(err, rooms.ErrNoRoom) {
		t.Fatalf("an unknown code through B: %v", err)
	}
	p, err := b.Join(ctx, c.Code, c.Token)
	if err != nil || !p.Presenter {
		t.Fatalf("the presenter through B: %v", err)
	}
	s, err := b.Join(ctx, c.Code, "")
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
// within a few beats.
func TestOwnerCrashIsToldAndQuietRoomsLive(t *testing.T) {
	url := broker(t)
	a, ncA := fast(t, url)
	b, _ := fast(t, url)
	ctx := context.Background()
	c, err := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Join(ctx, c.Code, "")
	if err != nil {
		t.Fatal(err)
	}
	take(t, s, rooms.EventHello)
	time.Sleep(2 * time.Second) // over three loss limits, with no event but beats
	for _, e := range s.Box.Take() {
		if e.Type == rooms.EventClosed {
			t.Fatalf("a quiet room was declared %s while its owner lived", e.Why)
		}
	}
	ncA.Close() // the owner crashes: no "ended", no "restart"
	start := time.Now()
	e := take(t, s, rooms.EventClosed)
	if e.Why != rooms.WhyLost || !strings.Contains(e.Reason, "stopped answering") {
		t.Fatalf("closed: %+v", e)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("told after %v", d)
	}
	if b.Stats().Members != 0 {
		t.Fatalf("B still holds %d members of the lost room", b.Stats().Members)
	}
}

// TestCrashedServersStudentsLeaveTheTally: B's students count on the
// owner's tally until B's connection is cut; then they leave it.
func TestCrashedServersStudentsLeaveTheTally(t *testing.T) {
	url := broker(t)
	a, _ := fast(t, url)
	b, ncB := fast(t, url)
	ctx := context.Background()
	c, _ := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"})
	p, err := a.Join(ctx, c.Code, c.Token)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Join(ctx, c.Code, ""); err != nil {
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
	url := broker(t)
	a, _ := fast(t, url)
	b, _ := fast(t, url)
	ctx := context.Background()
	c, _ := a.Create(ctx, rooms.Run{Page: rooms.PageStepper, Query: "n=8"})
	p, _ := a.Join(ctx, c.Code, c.Token)
	s, _ := b.Join(ctx, c.Code, "")
	take(t, s, rooms.EventHello)
	p.Send(rooms.Up{Type: rooms.CmdStep, Step: 4, Total: 9})
	take(t, s, rooms.EventStep)
	b.Close("shutting down")
	if e := take(t, s, rooms.EventClosed); e.Why != rooms.WhyMoved {
		t.Fatalf("closed: %+v", e)
	}
	if _, err := b.Join(ctx, c.Code, ""); !errors.Is(err, rooms.ErrShuttingDown) {
		t.Fatalf("a join on the leaving server: %v", err)
	}
	again, err := a.Join(ctx, c.Code, "")
	if err != nil {
		t.Fatal(err)
	}
	if h := take(t, again, rooms.EventHello); h.Step != 4 {
		t.Fatalf("back at step %d, want 4", h.Step)
	}
}
