package rooms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// take waits (boundedly) for the member's mailbox and returns what it holds.
func take(t *testing.T, m *Member) []*Event {
	t.Helper()
	select {
	case <-m.Box.Ready():
	case <-time.After(2 * time.Second):
		t.Fatalf("%s: nothing arrived in 2 s", m)
	}
	return m.Box.Take()
}

// find is the last event of type typ in evs, or nil.
func find(evs []*Event, typ string) *Event {
	var out *Event
	for _, e := range evs {
		if e.Type == typ {
			out = e
		}
	}
	return out
}

func newRoom(t *testing.T, l Limits) (*Memory, Created) {
	t.Helper()
	svc := NewMemory(l)
	t.Cleanup(func() { svc.Close("test over") })
	c, err := svc.Create(context.Background(), Run{Page: PageStepper, Query: "variant=flash2&n=8"})
	if err != nil {
		t.Fatal(err)
	}
	return svc, c
}

func TestCodesAreShortUnambiguousAndRead(t *testing.T) {
	seen := map[byte]bool{}
	for i := range len(codeAlphabet) {
		seen[codeAlphabet[i]] = true
	}
	if len(seen) != 32 || strings.ContainsAny(codeAlphabet, "OILU") {
		t.Fatalf("the alphabet must be 32 distinct symbols without O, I, L, U: %q", codeAlphabet)
	}
	codes := map[string]bool{}
	for range 2000 {
		c := newCode()
		if len(c) != CodeLength || NormalizeCode(c) != c {
			t.Fatalf("code %q does not read back as itself", c)
		}
		codes[c] = true
	}
	if len(codes) < 1999 {
		t.Fatalf("2000 codes drawn, only %d distinct: not random enough", len(codes))
	}
	if got := NormalizeCode(" ab2c-de0o "); got != "AB2CDE00" {
		t.Errorf("a typed code with spaces, dash and lower case reads %q, want AB2CDE00", got)
	}
	if got := NormalizeCode("abil-uxyz"); got != "AB11VXYZ" {
		t.Errorf("I, L, U read as 1, 1, V: got %q", got)
	}
	for _, bad := range []string{"", "ABC", "ABCDEFGHJ", "ABCD!FGH", "ABCDÉFGH"} {
		if NormalizeCode(bad) != "" {
			t.Errorf("%q read as a code", bad)
		}
	}
	if FormatCode("K7QM4TXZ") != "K7QM-4TXZ" {
		t.Errorf("FormatCode: %q", FormatCode("K7QM4TXZ"))
	}
}

func TestForgedTokensAreRejected(t *testing.T) {
	svc, c := newRoom(t, Limits{})
	if len(c.Token) < 43 {
		t.Fatalf("token %q is shorter than 256 bits in base64", c.Token)
	}
	flip := []byte(c.Token)
	flip[len(flip)-1] ^= 1
	for _, forged := range []string{string(flip), c.Token[:len(c.Token)-1], c.Token + "A", strings.ToUpper(c.Token), "x"} {
		if _, err := svc.Join(context.Background(), c.Code, forged); !errors.Is(err, ErrBadToken) {
			t.Errorf("token %q: got %v, want ErrBadToken", forged, err)
		}
	}
	// The real one makes a presenter, nothing makes a student.
	p, err := svc.Join(context.Background(), c.Code, c.Token)
	if err != nil || !p.Presenter {
		t.Fatalf("the real token: %v, presenter %v", err, p != nil && p.Presenter)
	}
	s, err := svc.Join(context.Background(), c.Code, "")
	if err != nil || s.Presenter {
		t.Fatalf("no token: %v", err)
	}
	if err := s.Send(Up{Type: CmdStep, Step: 1, Total: 3}); err == nil || !strings.Contains(err.Error(), "only the presenter") {
		t.Errorf("a student's step: got %v, want a refusal", err)
	}
	if _, err := svc.Join(context.Background(), "ZZZZZZZZ", ""); !errors.Is(err, ErrNoRoom) {
		t.Errorf("an unknown code: %v", err)
	}
	// A room keeps a hash, never the token.
	if strings.Contains(fmt.Sprintf("%+v", *svc.rooms[c.Code]), c.Token) {
		t.Error("the room's state holds the token itself")
	}
}

func TestRoomFollowsPollsAndTallies(t *testing.T) {
	svc, c := newRoom(t, Limits{})
	ctx := context.Background()
	p, _ := svc.Join(ctx, c.Code, c.Token)
	a, _ := svc.Join(ctx, c.Code, "")
	b, _ := svc.Join(ctx, c.Code, "")
	hello := find(take(t, a), EventHello)
	if hello == nil || hello.Role != "student" || hello.Query != "variant=flash2&n=8" || hello.Member != a.ID {
		t.Fatalf("a student's hello: %+v", hello)
	}
	take(t, b)
	for k := 1; k <= 5; k++ {
		if err := p.Send(Up{Type: CmdStep, Step: k, Total: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if e := find(take(t, a), EventStep); e == nil || e.Step != 5 || e.Total != 5 {
		t.Fatalf("the student did not land on step 5: %+v", e)
	}
	// A late joiner lands on the current step.
	late, _ := svc.Join(ctx, c.Code, "")
	if e := find(take(t, late), EventHello); e.Step != 5 {
		t.Fatalf("the late joiner's hello is at step %d, want 5", e.Step)
	}
	if err := a.Send(Up{Type: CmdStatus, Status: StatusBranch}); err != nil {
		t.Fatal(err)
	}
	tally := find(take(t, p), EventTally)
	if tally == nil || tally.Tally.Students != 3 || tally.Tally.Branched != 1 || tally.Tally.Following != 2 || tally.Tally.Presenters != 1 {
		t.Fatalf("tally: %+v", tally.Tally)
	}
	if find(take(t, b), EventTally) != nil {
		t.Fatal("a student received the presenter's tally")
	}
	// A poll: answers are graded, the answer stays hidden until revealed.
	if err := p.OpenPoll(&Poll{Question: "m?", Number: 1.5, Tol: 0.01, Lo: -10, Hi: 10, Display: "1.500", Explain: "because", Step: 4}); err != nil {
		t.Fatal(err)
	}
	open := find(take(t, a), EventPoll)
	if open == nil || open.Poll.Status != "open" || open.Poll.Answer != "" || strings.Contains(string(open.JSON()), "because") {
		t.Fatalf("an open poll shows: %s", open.JSON())
	}
	a.Send(Up{Type: CmdAnswer, Answer: "1.5"})
	b.Send(Up{Type: CmdAnswer, Answer: "2"})
	b.Send(Up{Type: CmdAnswer, Answer: "2.5"}) // replaces b's first answer
	late.Send(Up{Type: CmdAnswer, Answer: "banana"})
	tl := find(take(t, p), EventTally).Tally
	if tl.Answered != 3 || tl.Invalid != 1 || len(tl.Bins) != numBins {
		t.Fatalf("tally after answers: %+v", tl)
	}
	if err := a.Send(Up{Type: CmdReveal}); err == nil {
		t.Fatal("a student revealed the poll")
	}
	if err := p.Send(Up{Type: CmdReveal}); err != nil {
		t.Fatal(err)
	}
	rev := find(take(t, b), EventPoll).Poll
	if rev.Status != "revealed" || rev.Answer != "1.500" || rev.Explain != "because" || rev.Answered != 3 || rev.Correct != 1 {
		t.Fatalf("revealed: %+v", rev)
	}
	total, right := 0, 0
	for _, bin := range rev.Bins {
		total += bin.Count
		if bin.Correct {
			right++
			if 1.5 < bin.Lo || 1.5 > bin.Hi {
				t.Errorf("bin %+v marked correct, the answer is 1.5", bin)
			}
		}
	}
	if total != 2 || right != 1 {
		t.Fatalf("histogram of 2 valid answers with one bin marked: %+v", rev.Bins)
	}
	if err := a.Send(Up{Type: CmdAnswer, Answer: "1.5"}); err == nil {
		t.Fatal("an answer after the reveal was taken")
	}
	// The presenter hands the room to a new run: the poll goes with the old one.
	if err := p.Send(Up{Type: CmdRun, Page: PageStepper, Query: "variant=flash2&n=16", Step: 1}); err != nil {
		t.Fatal(err)
	}
	evs := take(t, a)
	if run := find(evs, EventRun); run == nil || run.Query != "variant=flash2&n=16" || run.Step != 1 {
		t.Fatalf("the run did not reach the student: %+v", evs)
	}
	if poll := find(evs, EventPoll); poll == nil || poll.Poll != nil {
		t.Fatalf("the old run's poll was not closed: %+v", poll)
	}
	// The presenter leaving does not end the room; ending it does.
	p.Leave()
	if _, err := svc.Join(ctx, c.Code, c.Token); err != nil {
		t.Fatalf("the presenter could not come back: %v", err)
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	t.Run("room count", func(t *testing.T) {
		svc := NewMemory(Limits{MaxRooms: 3})
		defer svc.Close("")
		for range 3 {
			if _, err := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}); !errors.Is(err, ErrTooManyRooms) {
			t.Fatalf("the fourth room of three: %v", err)
		}
	})
	t.Run("bad run", func(t *testing.T) {
		svc := NewMemory(Limits{})
		defer svc.Close("")
		for _, run := range []Run{{Page: "lesson", Query: "n=8"}, {Page: PageStepper, Query: ""}, {Page: PageStepper, Query: strings.Repeat("n", 600)}} {
			_, err := svc.Create(ctx, run)
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.Contains(fe.Error(), fe.Field) {
				t.Errorf("%+v: got %v, want a field error", run, err)
			}
		}
	})
	t.Run("members", func(t *testing.T) {
		svc, c := newRoom(t, Limits{MaxMembers: 2})
		svc.Join(ctx, c.Code, "")
		svc.Join(ctx, c.Code, "")
		if _, err := svc.Join(ctx, c.Code, ""); !errors.Is(err, ErrRoomFull) {
			t.Fatalf("a third member of two: %v", err)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		svc, c := newRoom(t, Limits{IdleExpiry: 50 * time.Millisecond})
		s, _ := svc.Join(ctx, c.Code, "")
		take(t, s)
		time.Sleep(80 * time.Millisecond)
		svc.ExpireNow()
		if e := find(take(t, s), EventClosed); e == nil || e.Why != WhyExpired {
			t.Fatalf("an idle room did not say it expired: %+v", e)
		}
		if _, err := svc.Join(ctx, c.Code, ""); !errors.Is(err, ErrNoRoom) {
			t.Fatalf("joining an expired room: %v", err)
		}
	})
	t.Run("message size and shape", func(t *testing.T) {
		big := []byte(`{"type":"answer","answer":"` + strings.Repeat("9", 2000) + `"}`)
		for _, bad := range [][]byte{big, []byte(`nope`), []byte(`{"type":"step","evil":1}`), []byte(`{}`)} {
			_, err := ParseUp(bad, Limits{})
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%.40s: got %v, want a field error", bad, err)
			}
		}
		if _, err := ParseUp(big, Limits{}); !strings.Contains(err.Error(), "at most 1024 bytes") {
			t.Errorf("an oversized message's error does not state the limit: %v", err)
		}
	})
	t.Run("answer flood", func(t *testing.T) {
		svc, c := newRoom(t, Limits{StudentRate: 5})
		s, _ := svc.Join(ctx, c.Code, "")
		refused := 0
		for range 100 {
			if err := s.Send(Up{Type: CmdStatus, Status: StatusFollow}); err != nil {
				refused++
			}
		}
		if refused < 80 {
			t.Fatalf("a flood of 100 messages at once: only %d refused", refused)
		}
	})
	t.Run("failed joins per address", func(t *testing.T) {
		lim := NewAddrLimiter(10)
		now := time.Now()
		ok := 0
		for range 100 {
			if lim.Allow("192.0.2.1", now) {
				ok++
			}
		}
		if ok != 10 || !lim.Allow("192.0.2.2", now) || !lim.Allow("192.0.2.1", now.Add(7*time.Second)) {
			t.Fatalf("10 a minute per address: %d of 100 allowed at once", ok)
		}
	})
}

func TestMailboxKeepsTheLatest(t *testing.T) {
	b := NewMailbox(nil)
	b.Put(&Event{Type: EventHello, Step: 1})
	for k := 2; k <= 100; k++ {
		b.Put(&Event{Type: EventStep, Step: k})
	}
	b.Put(&Event{Type: EventRun, Query: "n=9", Step: 3})
	b.Put(&Event{Type: EventStep, Step: 4})
	evs := b.Take()
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s:%d", e.Type, e.Step))
	}
	if strings.Join(got, " ") != "hello:1 run:3 step:4" {
		t.Fatalf("took %v, want hello, the run, then its latest step", got)
	}
	if b.counter.Load() != 99 {
		t.Errorf("coalesced %d events, want 99", b.counter.Load())
	}
	b.Put(ClosedEvent(WhyEnded, "over"))
	b.Put(&Event{Type: EventStep, Step: 5})
	if evs := b.Take(); len(evs) != 1 || evs[0].Type != EventClosed {
		t.Fatalf("after closed: %v", evs)
	}
}

// TestCheckpointPollsGradeAsTheCourse: a lesson checkpoint's poll of each
// format is graded by lessons' Grade, tallied per option or tile set, and
// its right answer is hidden until the reveal.
func TestCheckpointPollsGradeAsTheCourse(t *testing.T) {
	choices := []Choice{{"0", "key 0"}, {"1", "key 1"}, {"2", "key 2"}}
	for _, tc := range []struct {
		name    string
		poll    Poll
		answers []string // one per student
		correct int
		invalid int
		bins    map[string]int // label: count
		key     string
	}{
		{name: "choice", poll: Poll{Format: "choice", Ask: "argmax", Choices: choices, Choice: "2", Display: "key 2"},
			answers: []string{"2", "1", "2", "7"}, correct: 2, invalid: 1, bins: map[string]int{"key 0": 0, "key 1": 1, "key 2": 2}, key: "2"},
		{name: "tiles", poll: Poll{Format: "tiles", Ask: "skipped", Rows: 2, Cols: 2, Tiles: []string{"0,1"},
			Choices: []Choice{{"0,0", ""}, {"0,1", ""}, {"1,0", ""}, {"1,1", ""}}},
			answers: []string{"0,1", "0,1;0,1", "1,1; 0,1", "9,9"}, correct: 2, invalid: 1, bins: map[string]int{"0,1": 2, "0,1;1,1": 1}, key: "0,1"},
		{name: "whole number", poll: Poll{Format: "number", Ask: "count", Number: 6, Lo: 0, Hi: 9, Why: "nine tiles"},
			answers: []string{"6", "6.5", "5", "12"}, correct: 1, invalid: 2},
		{name: "bytes within 1%", poll: Poll{Format: "number", Ask: "written", Number: 1000, Tol: 0.01, Lo: 0, Hi: 1e300},
			answers: []string{"1005", "1020", "995"}, correct: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, c := newRoom(t, Limits{StudentRate: 100})
			ctx := context.Background()
			p, _ := svc.Join(ctx, c.Code, c.Token)
			take(t, p)
			poll := tc.poll
			if err := p.OpenPoll(&poll); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.answers {
				s, _ := svc.Join(ctx, c.Code, "")
				take(t, s)
				if err := s.Send(Up{Type: CmdAnswer, Answer: a}); err != nil {
					t.Fatal(err)
				}
			}
			var tl *Tally
			for deadline := time.Now().Add(2 * time.Second); ; {
				if e := find(take(t, p), EventTally); e != nil && e.Tally.Answered == len(tc.answers) {
					tl = e.Tally
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the answers were not all tallied")
				}
			}
			if tl.Invalid != tc.invalid {
				t.Errorf("invalid %d, want %d", tl.Invalid, tc.invalid)
			}
			for _, b := range tl.Bins {
				if b.Correct {
					t.Errorf("an open poll marks the right bar: %+v", b)
				}
				if want, ok := tc.bins[b.Label]; tc.bins != nil && (!ok || want != b.Count) {
					t.Errorf("bar %q counts %d, want %d (%v)", b.Label, b.Count, want, tc.bins)
				}
			}
			if err := p.Send(Up{Type: CmdReveal}); err != nil {
				t.Fatal(err)
			}
			e := find(take(t, p), EventPoll)
			if e == nil || e.Poll.Status != "revealed" || e.Poll.Correct != tc.correct || e.Poll.Key != tc.key {
				t.Fatalf("revealed: %+v (want %d right, key %q)", e.Poll, tc.correct, tc.key)
			}
			if tc.key != "" && !strings.Contains(string(e.JSON()), `"correct":true`) {
				t.Errorf("the revealed histogram marks no right bar: %s", e.JSON())
			}
		})
	}
}

// TestSilentServersAreForgotten: presence a server stopped refreshing
// leaves the tally after the limit; a refreshed one stays.
func TestSilentServersAreForgotten(t *testing.T) {
	t0 := time.Now()
	r := NewRoom("ABCDEFGH", "tok", Run{Page: PageStepper, Query: "n=8"}, Limits{}, t0)
	r.Apply(Command{Type: cmdPresence, Server: "a", Presence: &Presence{Students: 3, Following: 3}}, t0)
	r.Apply(Command{Type: cmdPresence, Server: "b", Presence: &Presence{Students: 2, Following: 2}}, t0)
	r.Apply(Command{Type: cmdPresence, Server: "a", Presence: &Presence{Students: 3, Following: 3}}, t0.Add(3*time.Second))
	if evs := r.ForgetSilent(t0.Add(2*time.Second), 4*time.Second); evs != nil || r.tally().Students != 5 {
		t.Fatalf("forgot a server too soon: %d students", r.tally().Students)
	}
	evs := r.ForgetSilent(t0.Add(5*time.Second), 4*time.Second)
	if len(evs) != 1 || evs[0].Tally.Students != 3 {
		t.Fatalf("after b fell silent: %+v", evs)
	}
}
