package natsrooms

import (
	"context"
	"errors"
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
