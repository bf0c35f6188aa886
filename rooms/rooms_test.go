package rooms

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"flashstep/grading"
	"flashstep/problem"
	"flashstep/rooms/roomstest"
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
	c, err := svc.Create(context.Background(), Run{Page: PageStepper, Query: "variant=flash2&n=8"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return svc, c
}

func TestCodesAreShortUnambiguousAndRead(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	svc, c := newRoom(t, Limits{})
	if len(c.Token) < 43 {
		t.Fatalf("token %q is shorter than 256 bits in base64", c.Token)
	}
	flip := []byte(c.Token)
	flip[len(flip)-1] ^= 1
	for _, forged := range []string{string(flip), c.Token[:len(c.Token)-1], c.Token + "A", strings.ToUpper(c.Token), "x"} {
		if _, err := svc.Join(context.Background(), c.Code, forged, ""); !errors.Is(err, ErrBadToken) {
			t.Errorf("token %q: got %v, want ErrBadToken", forged, err)
		}
	}
	// The real one makes a presenter, nothing makes a student.
	p, err := svc.Join(context.Background(), c.Code, c.Token, "")
	if err != nil || !p.Presenter {
		t.Fatalf("the real token: %v, presenter %v", err, p != nil && p.Presenter)
	}
	s, err := svc.Join(context.Background(), c.Code, "", "")
	if err != nil || s.Presenter {
		t.Fatalf("no token: %v", err)
	}
	if err := s.Send(Up{Type: CmdStep, Step: 1, Total: 3}); err == nil || !strings.Contains(err.Error(), "only the presenter") {
		t.Errorf("a student's step: got %v, want a refusal", err)
	}
	if _, err := svc.Join(context.Background(), "ZZZZZZZZ", "", ""); !errors.Is(err, ErrNoRoom) {
		t.Errorf("an unknown code: %v", err)
	}
	// A room keeps a hash, never the token.
	if strings.Contains(fmt.Sprintf("%+v", *svc.rooms[c.Code]), c.Token) {
		t.Error("the room's state holds the token itself")
	}
}

func TestRoomFollowsPollsAndTallies(t *testing.T) {
	t.Parallel()
	svc, c := newRoom(t, Limits{})
	ctx := context.Background()
	p, _ := svc.Join(ctx, c.Code, c.Token, "")
	a, _ := svc.Join(ctx, c.Code, "", NewStudent())
	b, _ := svc.Join(ctx, c.Code, "", NewStudent())
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
	late, _ := svc.Join(ctx, c.Code, "", NewStudent())
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
	if err := p.OpenPoll(&Poll{Question: "m?", Number: 1.5, Tolerance: grading.Absolute(0.01), Lo: -10, Hi: 10, Display: "1.500", Explain: "because", Step: 4}); err != nil {
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
	if _, err := svc.Join(ctx, c.Code, c.Token, ""); err != nil {
		t.Fatalf("the presenter could not come back: %v", err)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("room count", func(t *testing.T) {
		t.Parallel()
		svc := NewMemory(Limits{MaxRooms: 3})
		defer svc.Close("")
		for range 3 {
			if _, err := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}, ""); !errors.Is(err, ErrTooManyRooms) {
			t.Fatalf("the fourth room of three: %v", err)
		}
	})
	t.Run("bad run", func(t *testing.T) {
		t.Parallel()
		svc := NewMemory(Limits{})
		defer svc.Close("")
		for _, run := range []Run{{Page: "lesson", Query: "n=8"}, {Page: PageStepper, Query: ""}, {Page: PageStepper, Query: strings.Repeat("n", 600)}} {
			_, err := svc.Create(ctx, run, "")
			var fe *problem.Error
			if !errors.As(err, &fe) || !strings.Contains(fe.Error(), fe.Field) {
				t.Errorf("%+v: got %v, want a field error", run, err)
			}
		}
	})
	t.Run("members", func(t *testing.T) {
		t.Parallel()
		svc, c := newRoom(t, Limits{MaxMembers: 2})
		svc.Join(ctx, c.Code, "", "")
		svc.Join(ctx, c.Code, "", "")
		if _, err := svc.Join(ctx, c.Code, "", ""); !errors.Is(err, ErrRoomFull) {
			t.Fatalf("a third member of two: %v", err)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		t.Parallel()
		clk := roomstest.NewClock()
		svc := NewMemoryWithClock(Limits{IdleExpiry: 50 * time.Millisecond}, clk.Now)
		defer svc.Close("")
		c, _ := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}, "")
		p, _ := svc.Join(ctx, c.Code, c.Token, "")
		s, _ := svc.Join(ctx, c.Code, "", "")
		take(t, s)
		p.Leave()
		clk.Advance(80 * time.Millisecond)
		svc.ExpireNow()
		if e := find(take(t, s), EventClosed); e == nil || e.Why != WhyExpired {
			t.Fatalf("an idle room did not say it expired: %+v", e)
		}
		if _, err := svc.Join(ctx, c.Code, "", ""); !errors.Is(err, ErrNoRoom) {
			t.Fatalf("joining an expired room: %v", err)
		}
	})
	t.Run("message size and shape", func(t *testing.T) {
		t.Parallel()
		big := []byte(`{"type":"answer","answer":"` + strings.Repeat("9", 2000) + `"}`)
		for _, bad := range [][]byte{big, []byte(`nope`), []byte(`{"type":"step","evil":1}`), []byte(`{}`)} {
			_, err := ParseUp(bad, Limits{})
			var fe *problem.Error
			if !errors.As(err, &fe) {
				t.Errorf("%.40s: got %v, want a field error", bad, err)
			}
		}
		if _, err := ParseUp(big, Limits{}); !strings.Contains(err.Error(), "at most 1024 bytes") {
			t.Errorf("an oversized message's error does not state the limit: %v", err)
		}
	})
	t.Run("answer flood", func(t *testing.T) {
		t.Parallel()
		svc, c := newRoom(t, Limits{StudentRate: 5})
		s, _ := svc.Join(ctx, c.Code, "", "")
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
		t.Parallel()
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
	t.Parallel()
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
// format is graded by package grading, as the course grades it, tallied per option or tile set, and
// its right answer is hidden until the reveal.
func TestCheckpointPollsGradeAsTheCourse(t *testing.T) {
	t.Parallel()
	choices := []grading.Option{{Value: "0", Label: "key 0"}, {Value: "1", Label: "key 1"}, {Value: "2", Label: "key 2"}}
	for _, tc := range []struct {
		name    string
		poll    Poll
		answers []string // one per student
		correct int
		invalid int
		bins    map[string]int // label: count
		key     string
		tol     float64 // the revealed distance Grade accepts, for the page's marks
	}{
		{name: "choice", poll: Poll{Format: "choice", Choices: choices, Choice: "2", Display: "key 2"},
			answers: []string{"2", "1", "2", "7"}, correct: 2, invalid: 1, bins: map[string]int{"key 0": 0, "key 1": 1, "key 2": 2}, key: "2"},
		{name: "tiles", poll: Poll{Format: "tiles", Rows: 2, Cols: 2, Tiles: []string{"0,1"},
			Choices: []grading.Option{{Value: "0,0"}, {Value: "0,1"}, {Value: "1,0"}, {Value: "1,1"}}},
			answers: []string{"0,1", "0,1;0,1", "1,1; 0,1", "9,9"}, correct: 2, invalid: 1, bins: map[string]int{"0,1": 2, "0,1;1,1": 1}, key: "0,1"},
		{name: "whole number", poll: Poll{Format: "number", Tolerance: grading.Whole(), Number: 6, Lo: 0, Hi: 9, Why: "nine tiles"},
			answers: []string{"6", "6.5", "5", "12"}, correct: 1, invalid: 2},
		{name: "bytes within 1%", poll: Poll{Format: "number", Tolerance: grading.Relative(0.01), NumberUnit: grading.Bytes, Number: 1000, Lo: 0, Hi: 1e300},
			answers: []string{"1005", "1020", "995"}, correct: 2, tol: 10},
		{name: "a tiny α within 2%", poll: Poll{Format: "number", Tolerance: grading.SmallValue(0.01), Number: 1.6475e-37, Lo: 0, Hi: 1},
			answers: []string{"1.6475e-37", "1.62e-37", "0", "1e-36", "0.009"}, correct: 2, tol: 0.02 * 1.6475e-37},
		{name: "a speed-up within 2%", poll: Poll{Format: "number", Tolerance: grading.Relative(0.02), NumberUnit: grading.Times, Number: 4.53, Lo: 0, Hi: 14},
			answers: []string{"4.6", "4.7", "4.45×"}, correct: 2, tol: 0.02 * 4.53},
		{name: "an SM, typed with its unit", poll: Poll{Format: "number", Tolerance: grading.Whole(), NumberUnit: grading.SM, Number: 3, Lo: 0, Hi: 131},
			answers: []string{"SM 3", "3", "SM 4", "SM 3.5"}, correct: 2, invalid: 1},
		{name: "m within ±0.01", poll: Poll{Number: 50.022, Tolerance: grading.Absolute(0.01), Lo: -100, Hi: 100},
			answers: []string{"50.03", "50.04", "50.0"}, correct: 1, tol: 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, c := newRoom(t, Limits{StudentRate: 100})
			ctx := context.Background()
			p, _ := svc.Join(ctx, c.Code, c.Token, "")
			take(t, p)
			poll := tc.poll
			if err := p.OpenPoll(&poll); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.answers {
				s, _ := svc.Join(ctx, c.Code, "", NewStudent())
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
			if math.Abs(e.Poll.Tol-tc.tol) > 1e-12*tc.tol {
				t.Errorf("revealed tolerance %g, want %g: the page would mark answers otherwise than Grade", e.Poll.Tol, tc.tol)
			}
			if tc.key != "" && !strings.Contains(string(e.JSON()), `"correct":true`) {
				t.Errorf("the revealed histogram marks no right bar: %s", e.JSON())
			}
		})
	}
}

// TestPresenceReports: each server reports the whole of its presence
// (students by identity), numbered: a report overtaken by a later one is
// ignored, a lost one is made good by the next; a student on two servers
// counts once; presence a server stopped refreshing leaves the tally after
// the limit, and its students' answers with it.
func TestPresenceReports(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	x, y, z, w := NewStudent(), NewStudent(), NewStudent(), NewStudent()
	r := NewRoom("ABCDEFGH", "tok", Run{Page: PageStepper, Query: "n=8"}, Limits{}, t0)
	report := func(server string, seq uint64, at time.Time, following ...string) {
		sort.Strings(following)
		r.Apply(Command{Type: cmdPresence, Server: server, Presence: &Presence{Seq: seq, Connections: len(following), Following: following}}, at)
	}
	report("a", 1, t0, x, y, z)
	report("b", 1, t0, w, x) // x has a tab on each server
	if tl := r.tally(); tl.Students != 4 || tl.Connections != 5 || tl.Following != 4 {
		t.Fatalf("x on two servers: %+v, want 4 students on 5 connections", tl)
	}
	r.Apply(Command{Type: CmdPoll, Presenter: true, Poll: &Poll{Question: "m?", Number: 1, Tolerance: grading.Absolute(0.1), Lo: -9, Hi: 9}}, t0)
	for _, id := range []string{x, y, z, w} {
		if _, err := r.Apply(Command{Type: CmdAnswer, Student: id, Answer: "1"}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if tl := r.tally(); tl.Answered != 4 {
		t.Fatalf("answered %d of 4", tl.Answered)
	}
	// a's report 2 (z left) is lost; report 4 (y left too) arrives, then 3
	// late: the room keeps 4.
	report("a", 4, t0, x)
	report("a", 3, t0, x, y)
	if tl := r.tally(); tl.Students != 2 || tl.Answered != 2 {
		t.Fatalf("after a's later report, an earlier one: %+v, want x and w", tl)
	}
	// The heartbeat repeats the whole report: what a lost one said comes back.
	report("a", 5, t0.Add(3*time.Second), x, z)
	if tl := r.tally(); tl.Students != 3 || tl.Answered != 3 {
		t.Fatalf("z back at a's next beat: %+v", tl)
	}
	if evs := r.ForgetSilent(t0.Add(2*time.Second), 4*time.Second); evs != nil || r.tally().Students != 3 {
		t.Fatalf("forgot a server too soon: %d students", r.tally().Students)
	}
	evs := r.ForgetSilent(t0.Add(5*time.Second), 4*time.Second)
	if len(evs) != 1 || evs[0].Tally.Students != 2 || evs[0].Tally.Answered != 2 {
		t.Fatalf("after b fell silent (w gone, x still on a): %+v", evs[0].Tally)
	}
	// w's answer is kept: when w comes back it counts again.
	report("b", 9, t0.Add(6*time.Second), w)
	if tl := r.tally(); tl.Students != 3 || tl.Answered != 3 {
		t.Fatalf("w back: %+v", tl)
	}
}

// tallyUntil waits for the presenter's tally to satisfy ok.
func tallyUntil(t *testing.T, p *Member, what string, ok func(*Tally) bool) *Tally {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case <-p.Box.Ready():
			if e := find(p.Box.Take(), EventTally); e != nil && ok(e.Tally) {
				return e.Tally
			}
		case <-deadline:
			t.Fatalf("the tally never showed %s", what)
		}
	}
}

// TestOneAnswerPerStudentPresent: answers are kept by the student's
// identity, not its connection. A student who reconnects and answers again
// replaces its answer; one who leaves stops counting and counts again when
// back; two tabs are one student; and connect, answer, disconnect cycles
// (a stuffing script without an identity) are followers: their answers are
// refused and they leave nothing in the tally.
func TestOneAnswerPerStudentPresent(t *testing.T) {
	t.Parallel()
	svc, c := newRoom(t, Limits{StudentRate: 1000})
	ctx := context.Background()
	p, _ := svc.Join(ctx, c.Code, c.Token, "")
	if p.Student != "" {
		t.Fatalf("the presenter has a student identity %q", p.Student)
	}
	if err := p.OpenPoll(&Poll{Question: "m?", Number: 1.5, Tolerance: grading.Absolute(0.01), Lo: -10, Hi: 10, Display: "1.500"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(Up{Type: CmdAnswer, Answer: "1.5"}); err == nil {
		t.Fatal("the presenter's answer was taken: the presenter is no student")
	}
	// The stuffing script: 30 connections, each answers and goes.
	for range 30 {
		s, err := svc.Join(ctx, c.Code, "", "")
		if err != nil {
			t.Fatal(err)
		}
		var fe *problem.Error
		if err := s.Send(Up{Type: CmdAnswer, Answer: "9"}); !errors.As(err, &fe) || fe.Field != "student" || !strings.Contains(fe.Message, "/r/"+c.Code) {
			t.Fatalf("a follower's answer: %v, want a refusal naming the room's page", err)
		}
		s.Leave()
	}
	tallyUntil(t, p, "no student and no answer after 30 cycles", func(tl *Tally) bool { return tl.Students == 0 && tl.Answered == 0 })

	x := NewStudent()
	a, _ := svc.Join(ctx, c.Code, "", x)
	if a.Student != x {
		t.Fatalf("the member's identity %q, want %q", a.Student, x)
	}
	a.Send(Up{Type: CmdAnswer, Answer: "1"})
	a.Leave()
	tallyUntil(t, p, "x gone", func(tl *Tally) bool { return tl.Students == 0 && tl.Answered == 0 })
	back, _ := svc.Join(ctx, c.Code, "", x)
	tallyUntil(t, p, "x back with its answer", func(tl *Tally) bool { return tl.Students == 1 && tl.Answered == 1 })
	back.Send(Up{Type: CmdAnswer, Answer: "1.5"}) // replaces x's first answer
	tab, _ := svc.Join(ctx, c.Code, "", x)        // a second tab of x
	tab.Send(Up{Type: CmdAnswer, Answer: "1.5"})
	tl := tallyUntil(t, p, "x's two tabs as one student", func(tl *Tally) bool { return tl.Connections == 2 })
	if tl.Students != 1 || tl.Answered != 1 || tl.Following != 1 {
		t.Fatalf("two tabs of one student: %+v", tl)
	}
	// x follows while one of its tabs does, and has branched once both have.
	tab.Send(Up{Type: CmdStatus, Status: StatusBranch})
	back.Send(Up{Type: CmdStatus, Status: StatusBranch})
	if tl := tallyUntil(t, p, "x branched", func(tl *Tally) bool { return tl.Branched == 1 }); tl.Following != 0 || tl.Students != 1 {
		t.Fatalf("x branched in both tabs: %+v", tl)
	}
	back.Send(Up{Type: CmdStatus, Status: StatusFollow})
	tallyUntil(t, p, "x following in one tab", func(tl *Tally) bool { return tl.Following == 1 && tl.Branched == 0 && tl.Students == 1 })
	p.Send(Up{Type: CmdReveal})
	var rev *PollView
	for rev == nil || rev.Status != "revealed" {
		if e := find(take(t, back), EventPoll); e != nil {
			rev = e.Poll
		}
	}
	n := 0
	for _, b := range rev.Bins {
		n += b.Count
	}
	if rev.Answered != 1 || rev.Correct != 1 || n != 1 {
		t.Fatalf("revealed: %d answered, %d right, %d in the histogram; want x's one answer", rev.Answered, rev.Correct, n)
	}
	// An identity that is not well formed is never used, nor replaced by
	// a fresh one: the connection follows as no student.
	for _, bad := range []string{"x", strings.Repeat("A", 21), strings.Repeat("!", 22), x + "A", x[:21] + "B"} {
		m, err := svc.Join(ctx, c.Code, "", bad)
		if err != nil {
			t.Fatal(err)
		}
		if m.Student != "" {
			t.Errorf("identity %q kept as %q", bad, m.Student)
		}
		m.Leave()
	}
}

// TestAnswersAreBounded: a poll keeps the answers of students who left (so
// theirs count when they are back), but no more than twice the room's
// members: past that, the absent students' answers go.
func TestAnswersAreBounded(t *testing.T) {
	t.Parallel()
	svc, c := newRoom(t, Limits{MaxMembers: 3})
	ctx := context.Background()
	p, _ := svc.Join(ctx, c.Code, c.Token, "")
	p.OpenPoll(&Poll{Question: "m?", Number: 1, Tolerance: grading.Absolute(0.1), Lo: -9, Hi: 9})
	stay, _ := svc.Join(ctx, c.Code, "", NewStudent())
	stay.Send(Up{Type: CmdAnswer, Answer: "1"})
	for range 50 {
		s, err := svc.Join(ctx, c.Code, "", NewStudent())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(Up{Type: CmdAnswer, Answer: "2"}); err != nil {
			t.Fatal(err)
		}
		s.Leave()
	}
	svc.mu.Lock()
	kept := len(svc.rooms[c.Code].answers)
	_, stayed := svc.rooms[c.Code].answers[stay.Student]
	svc.mu.Unlock()
	if kept > 6 || !stayed {
		t.Fatalf("%d answers kept for a room of 3 (at most 6), the present student's kept: %v", kept, stayed)
	}
}

// TestStudentIdentities: 128 random bits in 22 characters of URL-safe
// base64; anything else is not an identity.
func TestStudentIdentities(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := NewStudent()
		if !ValidStudent(id) || len(id) != 22 || seen[id] {
			t.Fatalf("identity %q: valid %v, repeated %v", id, ValidStudent(id), seen[id])
		}
		seen[id] = true
	}
	id := NewStudent()
	for _, bad := range []string{"", id[:21], id + "A", strings.Repeat("+", 22), strings.Repeat("A", 21) + "=", strings.Repeat("A", 21) + "B"} {
		if ValidStudent(bad) {
			t.Errorf("%q read as an identity", bad)
		}
	}
}

// TestRoomLifetimes: a room nobody presents ends five minutes after it
// opened, whoever joins it; a presented one lives while its presenter is
// connected (TestPresenterIdleEndsARoom: and not silent for hours) and an
// hour after the presenter was last there; students keep no room alive.
func TestRoomLifetimes(t *testing.T) {
	t.Parallel()
	clk := roomstest.NewClock()
	svc := NewMemoryWithClock(Limits{}, clk.Now)
	t.Cleanup(func() { svc.Close("test over") })
	ctx := context.Background()
	run := Run{Page: PageStepper, Query: "n=8"}
	probe, _ := svc.Create(ctx, run, "192.0.2.1")
	class, _ := svc.Create(ctx, run, "192.0.2.1")
	alive := func(code string) bool {
		_, err := svc.Peek(ctx, code, "")
		return err == nil
	}

	watcher, _ := svc.Join(ctx, probe.Code, "", "")
	take(t, watcher)
	pres, _ := svc.Join(ctx, class.Code, class.Token, "")
	stud, _ := svc.Join(ctx, class.Code, "", "")
	take(t, stud)
	clk.Advance(5*time.Minute - time.Second)
	svc.ExpireNow()
	if !alive(probe.Code) {
		t.Fatal("a room nobody presented ended before 5 minutes")
	}
	clk.Advance(2 * time.Second)
	svc.ExpireNow()
	if alive(probe.Code) {
		t.Fatal("a room nobody presented outlived 5 minutes: its student kept it")
	}
	if e := find(take(t, watcher), EventClosed); e == nil || e.Why != WhyExpired || !strings.Contains(e.Reason, "5 minutes") {
		t.Fatalf("the probe's student was told %+v", e)
	}
	// The presenter stays connected for two and a half hours without a
	// word: alive.
	clk.Advance(150 * time.Minute)
	svc.ExpireNow()
	if !alive(class.Code) {
		t.Fatal("a room ended while its presenter was connected")
	}
	pres.Leave() // the laptop sleeps through a break
	clk.Advance(59 * time.Minute)
	svc.ExpireNow()
	if !alive(class.Code) {
		t.Fatal("a room ended within the hour after its presenter left")
	}
	// A student joining and answering is no presenter.
	late, _ := svc.Join(ctx, class.Code, "", "")
	late.Send(Up{Type: CmdStatus, Status: StatusBranch})
	clk.Advance(2 * time.Minute)
	svc.ExpireNow()
	if alive(class.Code) {
		t.Fatal("students kept a room alive an hour after its presenter left")
	}
	if e := find(take(t, stud), EventClosed); e == nil || e.Why != WhyExpired || !strings.Contains(e.Reason, "presenter was away for 1 hour") {
		t.Fatalf("the class's student was told %+v", e)
	}
	if st := svc.Stats(); st.Rooms != 0 {
		t.Fatalf("%d rooms left", st.Rooms)
	}
}

// TestRoomsPerAddress: one address holds at most 20 open rooms; another
// address is not held back by it, and a room that ends frees its place.
func TestRoomsPerAddress(t *testing.T) {
	t.Parallel()
	if d := DefaultLimits; d.MaxRooms != 1000 || d.RoomsPerAddress != 20 || d.UnpresentedExpiry != 5*time.Minute ||
		d.FailedJoinsPerMinute != 30 || d.IdleExpiry != time.Hour || d.PresenterIdle != 3*time.Hour {
		t.Fatalf("defaults: %+v", d)
	}
	clk := roomstest.NewClock()
	svc := NewMemoryWithClock(Limits{}, clk.Now)
	t.Cleanup(func() { svc.Close("test over") })
	ctx := context.Background()
	run := Run{Page: PageStepper, Query: "n=8"}
	var first Created
	for i := range 20 {
		c, err := svc.Create(ctx, run, "192.0.2.1")
		if err != nil {
			t.Fatalf("room %d of 20: %v", i+1, err)
		}
		if i == 0 {
			first = c
		}
	}
	_, err := svc.Create(ctx, run, "192.0.2.1")
	if !errors.Is(err, ErrAddressRooms) || !strings.Contains(err.Error(), "at most 20 open rooms") {
		t.Fatalf("the 21st room from one address: %v", err)
	}
	if _, err := svc.Create(ctx, run, "192.0.2.2"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// The presenter ends one room: its place is free.
	p, _ := svc.Join(ctx, first.Code, first.Token, "")
	if err := p.Send(Up{Type: CmdEnd}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, run, "192.0.2.1"); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	// Rooms nobody presents expire, and their places with them.
	clk.Advance(6 * time.Minute)
	svc.ExpireNow()
	for i := range 20 {
		if _, err := svc.Create(ctx, run, "192.0.2.1"); err != nil {
			t.Fatalf("room %d after the probes expired: %v", i+1, err)
		}
	}
}

// TestAddrLimiterSaysHowLong: an address that spent its allowance is told
// how long until it has one event again; Spent takes nothing.
func TestAddrLimiterSaysHowLong(t *testing.T) {
	t.Parallel()
	clk := roomstest.NewClock()
	lim := NewAddrLimiter(30)
	lim.SetClock(clk.Now)
	for i := range 30 {
		if ok, _ := lim.Take("192.0.2.1"); !ok {
			t.Fatalf("event %d of a burst of 30 refused", i+1)
		}
	}
	ok, wait := lim.Take("192.0.2.1")
	if ok || wait < 1900*time.Millisecond || wait > 2*time.Second {
		t.Fatalf("the 31st: allowed %v, wait %v (want 2 s at 30 a minute)", ok, wait)
	}
	for range 5 {
		if w := lim.Spent("192.0.2.1"); w <= 0 || w > 2*time.Second {
			t.Fatalf("spent: %v", w)
		}
	}
	if w := lim.Spent("192.0.2.2"); w != 0 {
		t.Fatalf("another address: spent %v", w)
	}
	clk.Advance(2 * time.Second)
	if w := lim.Spent("192.0.2.1"); w != 0 {
		t.Fatalf("2 s later: spent %v", w)
	}
	if ok, _ := lim.Take("192.0.2.1"); !ok {
		t.Fatal("2 s later, the next event was refused")
	}
}

// TestLabRoom: a room with a lab exercise in front of it counts, of the
// students present, who ran their code and who passed (a pass stays a
// pass); verdicts are a student's to report, only in a lab room, and start
// over with the next exercise. The presenter turns the kernel track on or
// off for the room, and every hello says which.
func TestLabRoom(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	x, y, z := NewStudent(), NewStudent(), NewStudent()
	r := NewRoom("ABCDEFGH", "tok", Run{Page: PageLab, Query: "online-step"}, Limits{}, t0)
	r.Apply(Command{Type: cmdPresence, Server: "a", Presence: &Presence{Seq: 1, Connections: 3, Following: sortedOf(x, y, z)}}, t0)
	if tl := r.tally(); tl.Lab == nil || *tl.Lab != (LabTally{}) {
		t.Fatalf("a lab room before any verdict: %+v", tl.Lab)
	}
	verdict := func(student string, v Verdict) error {
		_, err := r.Apply(Command{Type: CmdLabResult, Student: student, Verdict: v}, t0)
		return err
	}
	for _, v := range []struct {
		student string
		answer  Verdict
	}{{x, VerdictFail}, {x, VerdictPass}, {x, VerdictFail}, {y, VerdictFail}} {
		if err := verdict(v.student, v.answer); err != nil {
			t.Fatal(err)
		}
	}
	if tl := r.tally(); *tl.Lab != (LabTally{Tried: 2, Passed: 1}) {
		t.Fatalf("x passed (then failed), y failed: %+v", *tl.Lab)
	}
	for _, bad := range []Command{
		{Type: CmdLabResult, Student: z, Verdict: "passed"},
		{Type: CmdLabResult, Student: z, Answer: "pass"}, // a poll's answer, not a verdict
		{Type: CmdLabResult, Student: "", Verdict: VerdictPass},
		{Type: CmdLabResult, Presenter: true, Verdict: VerdictPass},
		{Type: CmdKernels, Kernels: SwitchOff}, // a student
		{Type: CmdKernels, Presenter: true, Kernels: "maybe"},
	} {
		if _, err := r.Apply(bad, t0); err == nil {
			t.Errorf("%+v was taken", bad)
		}
	}
	// x leaves: its pass stops counting, and counts again when back.
	r.Apply(Command{Type: cmdPresence, Server: "a", Presence: &Presence{Seq: 2, Connections: 2, Following: sortedOf(y, z)}}, t0)
	if tl := r.tally(); *tl.Lab != (LabTally{Tried: 1}) {
		t.Fatalf("x gone: %+v", *tl.Lab)
	}
	r.Apply(Command{Type: cmdPresence, Server: "a", Presence: &Presence{Seq: 3, Connections: 3, Following: sortedOf(x, y, z)}}, t0)
	if tl := r.tally(); *tl.Lab != (LabTally{Tried: 2, Passed: 1}) {
		t.Fatalf("x back: %+v", *tl.Lab)
	}
	// The kernel track, off and on again.
	evs, err := r.Apply(Command{Type: CmdKernels, Presenter: true, Kernels: SwitchOff}, t0)
	if err != nil || len(evs) != 1 || evs[0].Type != EventKernels || !evs[0].KernelsOff || !r.Hello("m", false).KernelsOff || !r.State().KernelsOff {
		t.Fatalf("kernels off: %v %+v", err, evs)
	}
	r.Apply(Command{Type: CmdKernels, Presenter: true, Kernels: SwitchOn}, t0)
	if r.Hello("m", false).KernelsOff || r.State().KernelsOff {
		t.Fatal("kernels on again: hello still says off")
	}
	// The next exercise: verdicts start over.
	evs, err = r.Apply(Command{Type: CmdRun, Presenter: true, Page: PageLab, Query: "qtile-loop"}, t0)
	if err != nil || len(evs) != 2 || evs[1].Tally.Lab == nil || *evs[1].Tally.Lab != (LabTally{}) {
		t.Fatalf("the next exercise: %v %+v", err, evs)
	}
	// The stepper: no lab tally, and no verdicts taken.
	r.Apply(Command{Type: CmdRun, Presenter: true, Page: PageStepper, Query: "n=8"}, t0)
	if err := verdict(x, "pass"); err == nil || r.tally().Lab != nil {
		t.Fatalf("a verdict in a stepper room: %v, tally %+v", err, r.tally().Lab)
	}
}

func sortedOf(ids ...string) []string {
	sort.Strings(ids)
	return ids
}

// TestPresenterIdleEndsARoom: a room whose presenter stays connected but
// sends nothing for Limits.PresenterIdle (3 hours unless the server says
// otherwise) ends, and everyone in it is told after how long of whose
// inactivity; a step, or the presenter's reconnect, starts the count
// again; students' messages do not.
func TestPresenterIdleEndsARoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		idle time.Duration
		says string
	}{{0, "3 hours"}, {45 * time.Minute, "45 minutes"}} {
		clk := roomstest.NewClock()
		svc := NewMemoryWithClock(Limits{PresenterIdle: tc.idle, StudentRate: 1000}, clk.Now)
		t.Cleanup(func() { svc.Close("test over") })
		idle := svc.limits.PresenterIdle
		c, _ := svc.Create(ctx, Run{Page: PageStepper, Query: "n=8"}, "")
		alive := func() bool {
			_, err := svc.Peek(ctx, c.Code, "")
			return err == nil
		}
		pres, _ := svc.Join(ctx, c.Code, c.Token, "")
		stud, _ := svc.Join(ctx, c.Code, "", NewStudent())
		take(t, stud)
		clk.Advance(idle - time.Minute)
		stud.Send(Up{Type: CmdStatus, Status: StatusBranch})
		svc.ExpireNow()
		if !alive() {
			t.Fatalf("idle %v: the room ended a minute before its presenter had been silent that long", idle)
		}
		if err := pres.Send(Up{Type: CmdStep, Step: 2, Total: 3}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(idle - time.Minute)
		svc.ExpireNow()
		if !alive() {
			t.Fatalf("idle %v: the room ended though its presenter stepped within the limit", idle)
		}
		again, _ := svc.Join(ctx, c.Code, c.Token, "") // the presenter's page reloads
		pres.Leave()
		clk.Advance(idle - time.Minute)
		svc.ExpireNow()
		if !alive() {
			t.Fatalf("idle %v: the room ended though its presenter came back within the limit", idle)
		}
		take(t, stud)
		clk.Advance(2 * time.Minute)
		svc.ExpireNow()
		if alive() {
			t.Fatalf("idle %v: the room outlived its connected presenter's silence", idle)
		}
		for who, m := range map[string]*Member{"student": stud, "presenter": again} {
			e := find(take(t, m), EventClosed)
			if e == nil || e.Why != WhyExpired || !strings.Contains(e.Reason, "ended after "+tc.says+" of the presenter's inactivity") {
				t.Fatalf("idle %v: the %s was told %+v", idle, who, e)
			}
		}
	}
}

// TestIssuedStudents: a room issues identities with its own MAC; only a
// pass it issued, whole, names a student: not a made-up one, not one cut
// short or altered, not another room's, not a bare identity.
func TestIssuedStudents(t *testing.T) {
	t.Parallel()
	now := time.Now()
	room := NewRoom("ABCDEFGH", "tok", Run{Page: PageStepper, Query: "n=8"}, Limits{}, now).State()
	other := NewRoom("ABCDEFGJ", "tok", Run{Page: PageStepper, Query: "n=8"}, Limits{}, now).State()
	id, pass := room.IssueStudent()
	if !ValidStudent(id) || room.IssuedStudent(pass) != id {
		t.Fatalf("issued %q with pass %q: reads back as %q", id, pass, room.IssuedStudent(pass))
	}
	if id2, _ := room.IssueStudent(); id2 == id {
		t.Fatal("two identities issued alike")
	}
	mac := pass[len(id)+1:]
	flip := []byte(pass)
	flip[len(flip)-1] ^= 1
	for what, bad := range map[string]string{
		"empty": "", "a bare identity": id, "cut short": pass[:len(pass)-1], "altered": string(flip),
		"a made-up identity with the MAC": NewStudent() + "." + mac, "another room's pass": func() string { _, p := other.IssueStudent(); return p }(),
		"no MAC": id + ".", "two dots": pass + ".x",
	} {
		if got := room.IssuedStudent(bad); got != "" {
			t.Errorf("%s (%q) read as student %q", what, bad, got)
		}
	}
	if got := other.IssuedStudent(pass); got != "" {
		t.Errorf("another room took this room's pass as %q", got)
	}
	if _, p := (State{}).IssueStudent(); p != "" || (State{}).IssuedStudent(pass) != "" {
		t.Error("a state without a key issued or took a pass")
	}
}

// TestFollowersCountAsNoStudent: thirty connections without an identity
// beside one student with two tabs: the tally counts one student (and all
// 32 connections against the room's capacity), and the followers'
// answers and lab results are refused, naming the room's page.
func TestFollowersCountAsNoStudent(t *testing.T) {
	t.Parallel()
	svc, c := newRoom(t, Limits{})
	ctx := context.Background()
	p, _ := svc.Join(ctx, c.Code, c.Token, "")
	p.OpenPoll(&Poll{Question: "m?", Number: 1, Tolerance: grading.Absolute(0.1), Lo: -9, Hi: 9})
	x := NewStudent()
	for range 2 {
		m, _ := svc.Join(ctx, c.Code, "", x)
		if err := m.Send(Up{Type: CmdAnswer, Answer: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 30 {
		m, err := svc.Join(ctx, c.Code, "", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []Up{{Type: CmdAnswer, Answer: "5"}, {Type: CmdLabResult, Answer: "pass"}} {
			var fe *problem.Error
			if err := m.Send(u); !errors.As(err, &fe) || fe.Field != "student" || !strings.Contains(fe.Message, "/r/"+c.Code) || !strings.Contains(fe.Message, "cookie") {
				t.Fatalf("a follower's %s: %v", u.Type, err)
			}
		}
	}
	tl := tallyUntil(t, p, "32 connections", func(tl *Tally) bool { return tl.Connections == 32 })
	if tl.Students != 1 || tl.Answered != 1 || tl.Following != 1 {
		t.Fatalf("one student on two tabs beside 30 followers: %+v", tl)
	}
	// The room refuses them too, whatever server sends them.
	svc.mu.Lock()
	_, err := svc.rooms[c.Code].Apply(Command{Type: CmdAnswer, Answer: "5"}, time.Now())
	svc.mu.Unlock()
	if err == nil {
		t.Fatal("the room took an answer without a student")
	}
}
