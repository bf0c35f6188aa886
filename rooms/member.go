package rooms

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Up is what a participant may send, as JSON text of at most
// Limits.MaxMessage bytes:
//
//	presenter: {"type":"step","step":5,"total":40}
//	           {"type":"run","page":"step","query":"…","step":1}
//	           {"type":"poll"} (predict m) {"type":"poll","poll":"checkpoint"} (the lesson's)
//	           {"type":"reveal"} {"type":"close_poll"} {"type":"end"}
//	           {"type":"kernels","answer":"on"|"off"} (the lab's kernel track, for the room)
//	student:   {"type":"answer","answer":"1.25"}
//	           {"type":"status","status":"following"|"branched"}
//	           {"type":"lab_result","answer":"pass"|"fail","ticket":"…"} (a lab room: the ticket of a kernel-track submission, whose verdict the server reads for itself)
type Up struct {
	Type  Cmd    `json:"type"`
	Step  int    `json:"step,omitempty"`
	Total int    `json:"total,omitempty"`
	Page  string `json:"page,omitempty"`
	Query string `json:"query,omitempty"`
	// Answer is the wire's one word for three things: a poll's answer
	// (answer), a verdict (lab_result: pass, fail), the kernel track
	// (kernels: on, off). Send gives each its own field of Command.
	Answer string `json:"answer,omitempty"`
	Status string `json:"status,omitempty"`
	Poll   string `json:"poll,omitempty"` // poll: PollCheckpoint, or empty for "predict m"
	Ticket string `json:"ticket,omitempty"`
}

// PollCheckpoint asks for the lesson checkpoint of a room presented from
// a lesson's widget.
const PollCheckpoint = "checkpoint"

// ParseUp reads a participant's message, or says which field is wrong.
func ParseUp(data []byte, l Limits) (Up, error) {
	l = l.WithDefaults()
	var u Up
	if len(data) > l.MaxMessage {
		return u, fieldErr("message", "must be at most %d bytes, got %d", l.MaxMessage, len(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return u, fieldErr("message", "must be a JSON object such as {\"type\":\"status\",\"status\":\"following\"}: %v", err)
	}
	if u.Type == "" {
		return u, fieldErr("type", "is missing")
	}
	return u, nil
}

// Member is one participant's connection to a room, on this server.
type Member struct {
	ID        string // given by the server, unique among the room's members
	Code      string
	Presenter bool
	// Student is the student's identity (ValidStudent), the same for each
	// of its connections: a tab, a reconnect. A poll keeps one answer per
	// identity. Empty for the presenter, who is no student, and for a
	// follower: a connection that brought no identity the room issued
	// (students.go), which sees the room but is not counted.
	Student string
	Box     *Mailbox

	lim     *rate.Limiter
	deliver func(Command) error // to the room's state machine, wherever it runs
	local   *Local
	status  string // following or branched; guarded by local.mu
	left    atomic.Bool
}

// Send passes a participant's message to the room. It returns a
// problem.Invalid for a message this participant may not send or that breaks
// a limit (the participant is told; nobody else is affected), ErrNoRoom
// when the room is gone.
func (m *Member) Send(u Up) error {
	if !m.lim.Allow() {
		return fieldErr("type", "too many messages: at most %g a second", float64(m.lim.Limit()))
	}
	switch u.Type {
	case CmdStatus:
		if m.Presenter {
			return nil // the presenter always follows itself
		}
		if u.Status != StatusFollow && u.Status != StatusBranch {
			return fieldErr("status", "must be %q or %q, got %q", StatusFollow, StatusBranch, truncate(u.Status, 20))
		}
		if p, changed := m.local.setStatus(m, u.Status); changed {
			return m.deliver(m.local.presenceCommand(p))
		}
		return nil
	case CmdPoll:
		return fieldErr("type", "a poll is opened by the presenter's server (OpenPoll), not sent")
	case CmdAnswer, CmdLabResult:
		if !m.Presenter && m.Student == "" {
			return notCounted(m.Code) // at once: the room would refuse it too
		}
	case cmdPresence, cmdJoin:
		return fieldErr("type", "unknown message type %q", u.Type)
	}
	c := Command{Type: u.Type, Member: m.ID, Student: m.Student, Presenter: m.Presenter, Page: u.Page, Query: u.Query,
		Step: u.Step, Total: u.Total}
	switch u.Type {
	case CmdAnswer:
		c.Answer = u.Answer
	case CmdLabResult:
		c.Verdict = Verdict(u.Answer)
	case CmdKernels:
		c.Kernels = Switch(u.Answer)
	}
	return m.deliver(c)
}

// OpenPoll poses p to the room (the presenter only).
func (m *Member) OpenPoll(p *Poll) error {
	return m.deliver(Command{Type: CmdPoll, Member: m.ID, Presenter: m.Presenter, Poll: p})
}

// Leave detaches the participant; the room goes on.
func (m *Member) Leave() {
	if m.left.Swap(true) {
		return
	}
	if p, ok := m.local.remove(m); ok {
		m.deliver(m.local.presenceCommand(p)) // the room may be gone already: nothing to tell then
	}
}

// Local is one server's participants, by room, and the delivery of their
// events. Memory and natsrooms both keep one.
type Local struct {
	Server    string // names this server among those sharing rooms
	Coalesced atomic.Int64

	mu    sync.Mutex
	rooms map[string]map[*Member]struct{}
	next  uint64
	seq   uint64 // presence reports made: each is numbered
}

// NewLocal is an empty set of participants for the server named server.
func NewLocal(server string) *Local {
	return &Local{Server: server, rooms: map[string]map[*Member]struct{}{}}
}

// Add makes a member of room code, with hello (and, for a presenter,
// tally) already in its mailbox, and returns it with the room's presence
// on this server to report. A participant whose identity is not well
// formed (ValidStudent), or who has none, is a follower (Student empty):
// never given a fresh identity, which would make each connection of a
// client that keeps no cookie a student of its own. A presenter has none.
func (l *Local) Add(code string, presenter bool, student string, limits Limits, deliver func(Command) error, hello ...*Event) (*Member, Command) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	limits = limits.WithDefaults()
	perSecond := limits.StudentRate
	if presenter {
		perSecond = limits.PresenterRate
		student = ""
	} else if !ValidStudent(student) {
		student = ""
	}
	m := &Member{ID: l.Server + "-" + strconv.FormatUint(l.next, 10), Code: code, Presenter: presenter, Student: student,
		Box: NewMailbox(&l.Coalesced), lim: NewMessageLimiter(perSecond), deliver: deliver, local: l, status: StatusFollow}
	for _, e := range hello {
		m.Box.Put(e)
	}
	if l.rooms[code] == nil {
		l.rooms[code] = map[*Member]struct{}{}
	}
	l.rooms[code][m] = struct{}{}
	return m, l.presenceCommand(l.presenceLocked(code))
}

func (l *Local) remove(m *Member) (Presence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.rooms[m.Code]
	if _, ok := set[m]; !ok {
		return Presence{}, false
	}
	delete(set, m)
	if len(set) == 0 {
		delete(l.rooms, m.Code)
	}
	return l.presenceLocked(m.Code), true
}

func (l *Local) setStatus(m *Member, status string) (Presence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.status == status {
		return Presence{}, false
	}
	m.status = status
	return l.presenceLocked(m.Code), true
}

func (l *Local) presenceCommand(p Presence) Command {
	return Command{Type: cmdPresence, Server: l.Server, Presence: &p}
}

// presenceLocked is this server's report of room code: its students by
// identity, each once however many connections it has here. Followers
// count as connections (the room's capacity) but as no student.
func (l *Local) presenceLocked(code string) Presence {
	l.seq++
	p := Presence{Seq: l.seq}
	follows := map[string]bool{}
	for m := range l.rooms[code] {
		if m.Presenter {
			p.Presenters++
			continue
		}
		p.Connections++
		if m.Student == "" {
			continue
		}
		follows[m.Student] = follows[m.Student] || m.status != StatusBranch
	}
	for id, f := range follows {
		if f {
			p.Following = append(p.Following, id)
		} else {
			p.Branched = append(p.Branched, id)
		}
	}
	sort.Strings(p.Following)
	sort.Strings(p.Branched)
	return p
}

// Presence is the command that reports this server's participants of
// room code; a broker-backed service repeats it as a heartbeat.
func (l *Local) Presence(code string) Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.presenceCommand(l.presenceLocked(code))
}

// Has says whether this server holds members of room code.
func (l *Local) Has(code string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.rooms[code]) > 0
}

// Deliver leaves events in the mailbox of each member of room code here:
// events marked Presenter only in the presenters'. It never waits.
func (l *Local) Deliver(code string, evs []*Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for m := range l.rooms[code] {
		for _, e := range evs {
			if !e.Presenter || m.Presenter {
				m.Box.Put(e)
			}
		}
	}
}

// CloseRoom gives every member of room code here the closed event and
// forgets them.
func (l *Local) CloseRoom(code string, closed *Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for m := range l.rooms[code] {
		m.left.Store(true)
		m.Box.Put(closed)
	}
	delete(l.rooms, code)
}

// Codes lists the rooms this server holds members of.
func (l *Local) Codes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.rooms))
	for c := range l.rooms {
		out = append(out, c)
	}
	return out
}

// Members counts the participants connected here.
func (l *Local) Members() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, set := range l.rooms {
		n += len(set)
	}
	return n
}

// String names a member for logs.
func (m *Member) String() string { return fmt.Sprintf("%s/%s", m.Code, m.ID) }
