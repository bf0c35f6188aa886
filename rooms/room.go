package rooms

import (
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"flashstep/grading"
)

// Events a participant receives, as JSON text.
//
//	hello   {type, code, member, role, page, query, step, total, seq, poll, kernels_off}: the room as it is, first on every connection
//	run     {type, seq, page, query, step}: the presenter moved the room to another run
//	step    {type, seq, step, total}: the presenter's step, counted from 1
//	poll    {type, seq, poll}: a poll opened, revealed (with answer, explanation, histogram) or closed (poll null)
//	tally   {type, tally}: presenter only: who follows, who branched, the answers of the students present; in a lab room who passed
//	kernels {type, seq, kernels_off}: the presenter turned the lab's kernel track on or off for the room
//	notice  {type, error, field}: to one participant: why its message was refused
//	closed  {type, reason}: the room ended; the connection then closes
const (
	EventHello   = "hello"
	EventRun     = "run"
	EventStep    = "step"
	EventPoll    = "poll"
	EventTally   = "tally"
	EventNotice  = "notice"
	EventClosed  = "closed"
	EventKernels = "kernels"
)

// Why a room closed, as closed events say it.
const (
	WhyEnded   = "ended"   // the presenter ended it
	WhyExpired = "expired" // nobody presented it, or its presenter was away too long (Limits)
	WhyRestart = "restart" // its server shut down: rooms live in memory
	WhyLost    = "lost"    // its server stopped answering (it crashed, or the broker is out of reach)
	WhyMoved   = "moved"   // not the room's end: this server is leaving, the page reconnects to another
)

// ClosedEvent says a room has ended, and why.
func ClosedEvent(why, reason string) *Event {
	return &Event{Type: EventClosed, Why: why, Reason: reason}
}

// Event is one message to participants. Its JSON is encoded once however
// many participants receive it.
type Event struct {
	Type   string    `json:"type"`
	Seq    uint64    `json:"seq,omitempty"` // the room's message count: later events have larger ones
	Code   string    `json:"code,omitempty"`
	Member string    `json:"member,omitempty"`
	Role   string    `json:"role,omitempty"`
	Page   string    `json:"page,omitempty"`
	Query  string    `json:"query,omitempty"`
	Step   int       `json:"step,omitempty"`
	Total  int       `json:"total,omitempty"`
	Poll   *PollView `json:"poll,omitempty"`
	Tally  *Tally    `json:"tally,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Why    string    `json:"why,omitempty"` // closed: WhyEnded, WhyExpired, WhyRestart, WhyLost or WhyMoved
	Error  string    `json:"error,omitempty"`
	Field  string    `json:"field,omitempty"`
	// KernelsOff: hello and kernels say whether the presenter turned the
	// lab's kernel track off for the room.
	KernelsOff bool `json:"kernels_off,omitempty"`
	// Presenter marks an event for the presenter's connections only.
	Presenter bool `json:"presenter_only,omitempty"`

	once sync.Once
	raw  []byte
}

// JSON is the event's encoding, computed once.
func (e *Event) JSON() []byte {
	e.once.Do(func() {
		e.raw, _ = json.Marshal(e) // every field is plain data: Marshal cannot fail
	})
	return e.raw
}

// Cmd names a command to a room's state machine: what a participant
// sends (Up's type) and what the servers send each other.
type Cmd string

// Commands a room's state machine takes. Participants send the first
// ones (see Up); the servers send the last.
const (
	CmdStep      Cmd = "step"       // presenter: show step Step of Total
	CmdRun       Cmd = "run"        // presenter: switch to the run Page, Query, at Step
	CmdPoll      Cmd = "poll"       // presenter: open a poll on the current step
	CmdReveal    Cmd = "reveal"     // presenter: reveal the poll's answer
	CmdClosePoll Cmd = "close_poll" // presenter: take the poll off the screen
	CmdEnd       Cmd = "end"        // presenter: end the room
	CmdAnswer    Cmd = "answer"     // student: Answer, an answer to the open poll
	CmdStatus    Cmd = "status"     // student: following or branched (kept by its server)
	CmdLabResult Cmd = "lab_result" // student, in a lab room: Verdict, a verdict of theirs on the exercise
	CmdKernels   Cmd = "kernels"    // presenter: Kernels, the lab's kernel track on or off for the room
	cmdPresence  Cmd = "presence"   // a server: its participants of the room, in full
	cmdJoin      Cmd = "join"       // a server: someone joined; a presenter's join marks the room presented
)

// A student's page, as CmdStatus says it, and a participant's role, as
// hello says it.
const (
	StatusFollow  = "following" // a student's page follows the presenter
	StatusBranch  = "branched"  // a student stepped away on their own
	roleStudent   = "student"
	rolePresenter = "presenter"
)

// Verdict is a student's lab result (CmdLabResult): pass or fail.
type Verdict string

const (
	VerdictPass Verdict = "pass"
	VerdictFail Verdict = "fail"
)

// Switch turns the lab's kernel track on or off for a room (CmdKernels).
type Switch string

const (
	SwitchOn  Switch = "on"
	SwitchOff Switch = "off"
)

// Command is a message to a room's state machine. Member, Student and
// Presenter are set by the server that holds the participant's
// connection, never taken from what the participant sent, so nobody can
// act for another. Answer, Verdict and Kernels are what CmdAnswer,
// CmdLabResult and CmdKernels carry, one each: the participant's message
// says all three as its "answer" (Up).
type Command struct {
	Type      Cmd       `json:"type"`
	Member    string    `json:"member,omitempty"`
	Student   string    `json:"student,omitempty"` // the student's identity: answers are kept by it
	Presenter bool      `json:"presenter,omitempty"`
	Page      string    `json:"page,omitempty"`
	Query     string    `json:"query,omitempty"`
	Step      int       `json:"step,omitempty"`
	Total     int       `json:"total,omitempty"`
	Answer    string    `json:"answer,omitempty"`
	Verdict   Verdict   `json:"verdict,omitempty"`
	Kernels   Switch    `json:"kernels,omitempty"`
	Poll      *Poll     `json:"poll,omitempty"`
	Server    string    `json:"server,omitempty"`
	Presence  *Presence `json:"presence,omitempty"`
}

// JoinCommand is what a server tells a room when a participant joins it
// (natsrooms sends it to the room's owner): a presenter's join marks the
// room presented, which its lifetime depends on.
func JoinCommand(presenter bool) Command { return Command{Type: cmdJoin, Presenter: presenter} }

// Presence is who one server holds of a room: always the whole of it,
// never a change, so a report lost on the way (a broker drops messages
// under load) is made good by the next one, at the latest the next
// heartbeat. The room counts a student once however many connections it
// has, on however many servers.
type Presence struct {
	Seq         uint64   `json:"seq,omitempty"`       // the server's report count: a report never replaces a later one
	Connections int      `json:"connections"`         // the students' connections here: tabs, and reconnects not yet noticed
	Presenters  int      `json:"presenters"`          // the presenter's connections here
	Following   []string `json:"following,omitempty"` // students (identities) with a connection here that follows the presenter, sorted
	Branched    []string `json:"branched,omitempty"`  // students every connection of whom here has branched off, sorted
}

func (p Presence) empty() bool { return p.Connections == 0 && p.Presenters == 0 }

// same says whether two reports say the same, whatever their Seq.
func (p Presence) same(q Presence) bool {
	return p.Connections == q.Connections && p.Presenters == q.Presenters &&
		slices.Equal(p.Following, q.Following) && slices.Equal(p.Branched, q.Branched)
}

// Poll is a question posed to the room, with its answer, which only the
// room's state machine sees until the presenter reveals it. It is graded by
// package grading, as the course grades its checkpoints, in any of its
// forms; it is plain data, since it crosses the broker to the room's
// owner (natsrooms).
type Poll struct {
	ID       uint64  `json:"id"`
	Question string  `json:"question"`
	Unit     string  `json:"unit"` // what precision counts, e.g. "within ±0.01"
	Step     int     `json:"step"` // the step that shows the answer, from 1
	Number   float64 `json:"number"`
	// Tolerance is how far from Number an answer may lie and be right;
	// NumberUnit what Number is counted in, which an answer may be typed
	// with (4.5×, 37%, SM 3).
	Tolerance  grading.Tolerance `json:"tolerance"`
	NumberUnit grading.Unit      `json:"number_unit,omitempty"`
	Lo, Hi     float64           // plausible answers lie between
	Why        string            `json:"why"` // why one outside Lo..Hi cannot be right
	Display    string            `json:"display"`
	Explain    string            `json:"explain"`

	// A lesson checkpoint's poll may take any form. A poll with no Format
	// is a number, as "predict m" is.
	Checkpoint string           `json:"checkpoint,omitempty"` // lesson/id
	Format     string           `json:"format,omitempty"`     // grading.FormatNumber, FormatChoice or FormatTiles
	Choices    []grading.Option `json:"choices,omitempty"`    // choice: the options; tiles: every tile
	Choice     string           `json:"choice,omitempty"`     // choice: the right option's value
	Tiles      []string         `json:"tiles,omitempty"`      // tiles: the right tiles, sorted "i,j"
	Rows       int              `json:"rows,omitempty"`       // tiles: the grid's q-tiles
	Cols       int              `json:"cols,omitempty"`       // tiles: the grid's kv-tiles
}

func (p *Poll) format() string {
	if p.Format == "" {
		return grading.FormatNumber
	}
	return p.Format
}

// question is the poll as package grading grades it. It has no hints: a
// poll's verdicts are tallied, never shown to the student.
func (p *Poll) question() grading.Question {
	key := grading.Solution{Number: p.Number, Choice: p.Choice, Tiles: p.Tiles, Lo: p.Lo, Hi: p.Hi, Why: p.Why}
	switch p.format() {
	case grading.FormatChoice:
		return &grading.Choice{Key: key, Options: p.Choices}
	case grading.FormatTiles:
		return &grading.Tiles{Key: key, Rows: p.Rows, Cols: p.Cols}
	}
	return &grading.Number{Key: key, Tolerance: p.Tolerance, Unit: p.NumberUnit}
}

// key is the right answer as answers are keyed: the option, or the tiles.
func (p *Poll) key() string {
	switch p.format() {
	case grading.FormatChoice:
		return p.Choice
	case grading.FormatTiles:
		return tilesKey(strings.Join(p.Tiles, ";"))
	}
	return ""
}

// tilesKey is a tiles answer in one spelling: sorted, without repeats.
func tilesKey(s string) string {
	if strings.EqualFold(strings.TrimSpace(s), "none") || strings.TrimSpace(s) == "" {
		return "none"
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ' ' })
	sort.Strings(parts)
	return strings.Join(slices.Compact(parts), ";")
}

// PollView is a poll as participants see it: the answer only once revealed.
type PollView struct {
	ID       uint64  `json:"id"`
	Question string  `json:"question"`
	Unit     string  `json:"unit"`
	Status   string  `json:"status"` // open, revealed
	Answer   string  `json:"answer,omitempty"`
	Number   float64 `json:"number,omitempty"`
	Tol      float64 `json:"tol,omitempty"`
	Explain  string  `json:"explain,omitempty"`
	Step     int     `json:"step,omitempty"`
	Answered int     `json:"answered,omitempty"` // revealed: answers of the students present, one each
	Correct  int     `json:"correct,omitempty"`
	Bins     []Bin   `json:"bins,omitempty"`
	// A lesson checkpoint's poll: its format and options; the right
	// option or tiles (Key) only once revealed.
	Checkpoint string           `json:"checkpoint,omitempty"`
	Format     string           `json:"format,omitempty"`
	Choices    []grading.Option `json:"choices,omitempty"`
	Key        string           `json:"key,omitempty"`
}

// Tally is the presenter's live view of the room. Students are counted
// by identity: two tabs of one student are one student. Only the answers
// of students present now (connected to some server) count: a student who
// left has its answer kept, and counted again when it comes back.
type Tally struct {
	Students    int   `json:"students"`    // students present now
	Following   int   `json:"following"`   // of them, those with a page that follows the presenter
	Branched    int   `json:"branched"`    // and those stepping on their own
	Connections int   `json:"connections"` // the students' connections (a student may have several tabs)
	Presenters  int   `json:"presenters"`
	Answered    int   `json:"answered"` // students present who answered the open poll, one answer each
	Invalid     int   `json:"invalid"`  // of those answers, the ones that are not plausible
	Bins        []Bin `json:"bins"`     // the histogram of the valid answers of students present
	// Lab, in a lab room: of the students present, those who ran their
	// code on the exercise and those who passed it.
	Lab *LabTally `json:"lab,omitempty"`
}

// LabTally counts a lab room's students present by their verdicts: Tried
// have run their code at least once, Passed (of them) got a pass, which
// stays theirs whatever they run after.
type LabTally struct {
	Tried  int `json:"tried"`
	Passed int `json:"passed"`
}

// Bin is one bar of an answer histogram: answers in [Lo, Hi).
type Bin struct {
	Label   string  `json:"label,omitempty"` // an option or a set of tiles, for answers that are not numbers
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	Count   int     `json:"count"`
	Correct bool    `json:"correct,omitempty"` // holds the right answer (revealed polls only)
}

// Room is one room's state machine: it runs on the server that created
// the room, whichever server its participants are on. It is not safe for
// concurrent use: its owner serialises commands.
type Room struct {
	Code     string
	token    tokenHash
	limits   Limits
	page     string
	query    string
	step     int
	total    int
	seq      uint64
	poll     *Poll
	revealed bool
	answers  map[string]answer // by student identity, one each: a new answer replaces the old
	servers  map[string]Presence
	heard    map[string]time.Time // when each server last reported its presence
	present  map[string]bool      // the students connected now, on any server: true for one that follows
	lesson   string
	widget   string
	// A lab room: each student's verdicts on the exercise (true once one
	// passed), and whether the presenter turned the kernel track off.
	lab        map[string]bool
	kernelsOff bool
	// Its lifetime (Limits): when it opened, whether a presenter ever
	// joined it, the last moment a presenter was connected or sent a
	// command, and the last moment one joined or sent a command (a
	// presenter connected but silent past Limits.PresenterIdle ends it).
	created          time.Time
	presented        bool
	presenterAt      time.Time
	presenterSpokeAt time.Time
	// studentKey signs the student identities the room issues
	// (State.IssueStudent): only those count.
	studentKey []byte
	// Creator is the client address that created the room, for the bound
	// on open rooms per address; its service sets it.
	Creator string
}

type answer struct {
	value   float64
	key     string // choice and tiles: the answer in one spelling
	valid   bool
	correct bool
}

// NewRoom is a room for run; the presenter proves itself with token.
func NewRoom(code, token string, run Run, limits Limits, now time.Time) *Room {
	return &Room{Code: code, token: hashToken(token), limits: limits.WithDefaults(), page: run.Page, query: run.Query, step: run.Step,
		answers: map[string]answer{}, lab: map[string]bool{}, servers: map[string]Presence{}, heard: map[string]time.Time{}, present: map[string]bool{},
		created: now, presenterAt: now, presenterSpokeAt: now, lesson: run.Lesson, widget: run.Widget, studentKey: newStudentKey()}
}

// ValidateRun checks a run's page and query against the limits.
func ValidateRun(run Run, l Limits) error {
	l = l.WithDefaults()
	if run.Page != PageStepper && run.Page != PageCompare && run.Page != PageLab {
		return fieldErr("page", "must be %q, %q or %q, got %q", PageStepper, PageCompare, PageLab, truncate(run.Page, 20))
	}
	if run.Query == "" || len(run.Query) > l.MaxQuery {
		return fieldErr("query", "must be a run's query of 1 to %d bytes, got %d bytes", l.MaxQuery, len(run.Query))
	}
	if run.Step < 0 || run.Step > l.MaxSteps {
		return fieldErr("step", "must be from 1 to %d, got %d", l.MaxSteps, run.Step)
	}
	if len(run.Lesson) > 64 || len(run.Widget) > 64 {
		return fieldErr("lesson", "a lesson's slug and a widget's id are at most 64 bytes each")
	}
	return nil
}

// Authorize says whether token is the room's control token.
func (r *Room) Authorize(token string) bool { return r.token.matches(token) }

// ExpiredEvent is the closed event of a room whose time is up at now, or
// nil while it lives: a room nobody presented lives Limits.UnpresentedExpiry
// from its creation (a room opened and never presented is a probe, or a
// click by mistake); a presented one lives while a presenter is connected
// and joined or sent a command within Limits.PresenterIdle (a tab left
// open on a projector would hold the room for ever), and
// Limits.IdleExpiry after the last moment one was connected or sent a
// command (a laptop asleep through a break). Students keep no room alive.
func (r *Room) ExpiredEvent(now time.Time) *Event {
	if r.presenters() > 0 {
		if now.Sub(r.presenterSpokeAt) > r.limits.PresenterIdle {
			return ClosedEvent(WhyExpired, "This room ended after "+Human(r.limits.PresenterIdle)+" of the presenter's inactivity: the presenter's page stayed open but sent nothing. Ask the presenter for a new code.")
		}
		return nil
	}
	if !r.presented {
		if now.Sub(r.created) > r.limits.UnpresentedExpiry {
			return ClosedEvent(WhyExpired, "This room ended: nobody presented it in the "+Human(r.limits.UnpresentedExpiry)+" after it opened.")
		}
		return nil
	}
	if now.Sub(r.presenterAt) > r.limits.IdleExpiry {
		return ClosedEvent(WhyExpired, "This room ended: its presenter was away for "+Human(r.limits.IdleExpiry)+".")
	}
	return nil
}

// Human is a duration as a sentence says it: "5 minutes", "1 hour", "90 seconds".
func Human(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	case d >= time.Second && d%time.Second == 0:
		return plural(int64(d/time.Second), "second")
	}
	return d.String()
}

// presenters counts the presenter's connections on every server.
func (r *Room) presenters() int {
	n := 0
	for _, p := range r.servers {
		n += p.Presenters
	}
	return n
}

// Members counts participants' connections on every server: the room's
// capacity (Limits.MaxMembers) is in connections.
func (r *Room) Members() int {
	n := 0
	for _, p := range r.servers {
		n += p.Connections + p.Presenters
	}
	return n
}

// Hello is the room as a participant who joins now sees it.
func (r *Room) Hello(member string, presenter bool) *Event {
	e := &Event{Type: EventHello, Seq: r.seq, Code: r.Code, Member: member, Role: roleStudent,
		Page: r.page, Query: r.query, Step: r.step, Total: r.total, Poll: r.pollView(), KernelsOff: r.kernelsOff}
	if presenter {
		e.Role = rolePresenter
	}
	return e
}

// State is the room's run and step now.
func (r *Room) State() State {
	return State{Run: Run{Page: r.page, Query: r.query, Step: r.step, Lesson: r.lesson, Widget: r.widget}, Total: r.total, KernelsOff: r.kernelsOff,
		StudentKey: r.studentKey}
}

// HelloTally is the presenter's first tally.
func (r *Room) HelloTally() *Event {
	return &Event{Type: EventTally, Tally: r.tally(), Presenter: true}
}

// Apply runs one command and returns the events it causes, or why it was
// refused (a problem.Invalid, or ErrBadToken for a student's presenter command).
func (r *Room) Apply(c Command, now time.Time) ([]*Event, error) {
	presenterOnly := map[Cmd]bool{CmdStep: true, CmdRun: true, CmdPoll: true, CmdReveal: true, CmdClosePoll: true, CmdEnd: true, CmdKernels: true}
	if presenterOnly[c.Type] {
		if !c.Presenter {
			return nil, fieldErr("type", "only the presenter may send %q", c.Type)
		}
		r.presenterAt, r.presenterSpokeAt = now, now
	}
	switch c.Type {
	case CmdStep:
		if c.Total < 1 || c.Total > r.limits.MaxSteps {
			return nil, fieldErr("total", "must be from 1 to %d, got %d", r.limits.MaxSteps, c.Total)
		}
		if c.Step < 1 || c.Step > c.Total {
			return nil, fieldErr("step", "must be from 1 to total (%d), got %d", c.Total, c.Step)
		}
		r.step, r.total = c.Step, c.Total
		r.seq++
		return []*Event{{Type: EventStep, Seq: r.seq, Step: r.step, Total: r.total}}, nil
	case CmdRun:
		run := Run{Page: c.Page, Query: c.Query, Step: c.Step}
		if err := ValidateRun(run, r.limits); err != nil {
			return nil, err
		}
		wasLab := r.page == PageLab
		r.page, r.query, r.step, r.total = run.Page, run.Query, max(c.Step, 1), 0
		r.seq++
		evs := []*Event{{Type: EventRun, Seq: r.seq, Page: r.page, Query: r.query, Step: r.step}}
		if wasLab || r.page == PageLab {
			// Verdicts are on one exercise.
			clear(r.lab)
			evs = append(evs, r.tallyEvent())
		}
		if r.poll != nil {
			// A poll is about a step of the old run.
			r.poll, r.revealed = nil, false
			clear(r.answers)
			r.seq++
			evs = append(evs, &Event{Type: EventPoll, Seq: r.seq}, r.tallyEvent())
		}
		return evs, nil
	case CmdPoll:
		if c.Poll == nil {
			return nil, fieldErr("poll", "is missing")
		}
		r.seq++
		p := *c.Poll
		p.ID = r.seq
		r.poll, r.revealed = &p, false
		clear(r.answers)
		return []*Event{{Type: EventPoll, Seq: r.seq, Poll: r.pollView()}, r.tallyEvent()}, nil
	case CmdReveal:
		if r.poll == nil {
			return nil, fieldErr("type", "no poll is open to reveal")
		}
		r.revealed = true
		r.seq++
		return []*Event{{Type: EventPoll, Seq: r.seq, Poll: r.pollView()}, r.tallyEvent()}, nil
	case CmdClosePoll:
		r.poll, r.revealed = nil, false
		clear(r.answers)
		r.seq++
		return []*Event{{Type: EventPoll, Seq: r.seq}, r.tallyEvent()}, nil
	case CmdEnd:
		return []*Event{ClosedEvent(WhyEnded, "The presenter ended this room.")}, ErrClosed
	case CmdAnswer:
		if c.Presenter {
			return nil, fieldErr("type", "the presenter poses polls; students answer them")
		}
		if r.poll == nil || r.revealed {
			return nil, fieldErr("answer", "no poll is open: answers are taken while a poll is open")
		}
		if len([]rune(c.Answer)) > r.limits.MaxAnswer {
			return nil, fieldErr("answer", "must be at most %d characters, got %d", r.limits.MaxAnswer, len([]rune(c.Answer)))
		}
		if !ValidStudent(c.Student) {
			return nil, notCounted(r.Code) // a follower: its server sends no identity
		}
		if _, ok := r.answers[c.Student]; !ok && len(r.answers) >= r.maxAnswers() {
			r.dropAbsentAnswers()
			if len(r.answers) >= r.maxAnswers() {
				return nil, fieldErr("answer", "this poll holds %d answers, its most", r.maxAnswers())
			}
		}
		r.answers[c.Student] = r.grade(c.Answer)
		return []*Event{r.tallyEvent()}, nil
	case CmdLabResult:
		if c.Presenter {
			return nil, fieldErr("type", "the presenter's own runs are not counted; students report theirs")
		}
		if r.page != PageLab {
			return nil, fieldErr("type", "this room shows no lab exercise: verdicts are taken while one is in front of the room")
		}
		if c.Verdict != VerdictPass && c.Verdict != VerdictFail {
			return nil, fieldErr("answer", "must be %q or %q, got %q", VerdictPass, VerdictFail, truncate(string(c.Verdict), 20))
		}
		if !ValidStudent(c.Student) {
			return nil, notCounted(r.Code)
		}
		if _, ok := r.lab[c.Student]; !ok && len(r.lab) >= r.maxAnswers() {
			for id := range r.lab {
				if _, ok := r.present[id]; !ok {
					delete(r.lab, id)
				}
			}
			if len(r.lab) >= r.maxAnswers() {
				return nil, fieldErr("answer", "this room holds %d students' verdicts, its most", r.maxAnswers())
			}
		}
		r.lab[c.Student] = r.lab[c.Student] || c.Verdict == VerdictPass
		return []*Event{r.tallyEvent()}, nil
	case CmdKernels:
		if c.Kernels != SwitchOn && c.Kernels != SwitchOff {
			return nil, fieldErr("answer", "must be %q or %q, got %q", SwitchOn, SwitchOff, truncate(string(c.Kernels), 20))
		}
		r.kernelsOff = c.Kernels == SwitchOff
		r.seq++
		return []*Event{{Type: EventKernels, Seq: r.seq, KernelsOff: r.kernelsOff}}, nil
	case cmdPresence:
		if c.Presence == nil || c.Server == "" {
			return nil, fieldErr("presence", "is missing")
		}
		p := *c.Presence
		old, known := r.servers[c.Server]
		if known && p.Seq != 0 && p.Seq <= old.Seq {
			return nil, nil // overtaken on the way by a later report
		}
		r.heard[c.Server] = now
		had := r.presenters() > 0
		// A server with nobody left stays listed until it falls silent, so
		// that a report of its overtaken on the way is still known as older.
		r.servers[c.Server] = p
		if had || r.presenters() > 0 {
			r.presenterAt = now // a presenter was connected until this moment at least
		}
		if known && old.same(p) {
			return nil, nil // a heartbeat's refresh: nothing changed
		}
		r.recount()
		return []*Event{r.tallyEvent()}, nil
	case cmdJoin:
		if c.Presenter {
			r.presented, r.presenterAt, r.presenterSpokeAt = true, now, now
		}
		return nil, nil
	}
	return nil, fieldErr("type", "unknown message type %q", truncate(string(c.Type), 20))
}

// ForgetSilent drops the presence of servers not heard from for longer
// than maxAge (a server that crashed never says its students left) and
// returns the presenter's new tally, or nil when nothing changed.
func (r *Room) ForgetSilent(now time.Time, maxAge time.Duration) []*Event {
	changed := false
	for server, at := range r.heard {
		if now.Sub(at) > maxAge {
			p := r.servers[server]
			if p.Presenters > 0 && at.After(r.presenterAt) {
				r.presenterAt = at // the last we knew of its presenter
			}
			changed = changed || !p.empty()
			delete(r.heard, server)
			delete(r.servers, server)
		}
	}
	if !changed {
		return nil
	}
	r.recount()
	return []*Event{r.tallyEvent()}
}

// recount makes the set of students present from every server's report: a
// student is present while it has a connection on some server, and
// follows while one of its connections does.
func (r *Room) recount() {
	clear(r.present)
	for _, p := range r.servers {
		for _, id := range p.Branched {
			if _, ok := r.present[id]; !ok {
				r.present[id] = false
			}
		}
		for _, id := range p.Following {
			r.present[id] = true
		}
	}
}

// maxAnswers bounds the answers a poll keeps: those of every student who
// could be present, and as many of students who left (whose answers count
// again when they come back).
func (r *Room) maxAnswers() int { return 2 * r.limits.MaxMembers }

// dropAbsentAnswers forgets the answers of students not present now.
func (r *Room) dropAbsentAnswers() {
	for id := range r.answers {
		if _, ok := r.present[id]; !ok {
			delete(r.answers, id)
		}
	}
}

// counted are the answers that count: those of the students present now.
func (r *Room) counted() iter.Seq[answer] {
	return func(yield func(answer) bool) {
		for id, a := range r.answers {
			if _, ok := r.present[id]; ok && !yield(a) {
				return
			}
		}
	}
}

// grade judges an answer as the course grades its checkpoints (package
// grading), so that an answer right in the course is right in class.
func (r *Room) grade(s string) answer {
	q := r.poll.question()
	v := q.Grade(s, false)
	if v.Status == grading.StatusInvalid {
		return answer{}
	}
	a := answer{valid: true, correct: v.Correct}
	switch q := q.(type) {
	case *grading.Choice:
		a.key = strings.TrimSpace(s)
	case *grading.Tiles:
		a.key = tilesKey(s)
	case *grading.Number:
		a.value, _ = q.Read(s) // as the grading read it: valid, so a number
	}
	return a
}

func (r *Room) pollView() *PollView {
	if r.poll == nil {
		return nil
	}
	v := &PollView{ID: r.poll.ID, Question: r.poll.Question, Unit: r.poll.Unit, Status: "open",
		Checkpoint: r.poll.Checkpoint, Format: r.poll.Format}
	if r.poll.format() == grading.FormatChoice {
		v.Choices = r.poll.Choices
	}
	if r.revealed {
		v.Status = "revealed"
		// The distance from the answer that the grading accepts, by the
		// poll's rule (relative, absolute, or the smaller of the two), for
		// the page that marks each student's answer right or wrong.
		v.Answer, v.Number, v.Tol, v.Explain, v.Step = r.poll.Display, r.poll.Number, r.poll.Tolerance.Allowed(r.poll.Number), r.poll.Explain, r.poll.Step
		v.Key = r.poll.key()
		for a := range r.counted() {
			v.Answered++
			if a.correct {
				v.Correct++
			}
		}
		v.Bins = r.bins()
	}
	return v
}

func (r *Room) tallyEvent() *Event {
	return &Event{Type: EventTally, Tally: r.tally(), Presenter: true}
}

func (r *Room) tally() *Tally {
	t := &Tally{Bins: []Bin{}}
	for _, p := range r.servers {
		t.Connections += p.Connections
		t.Presenters += p.Presenters
	}
	for _, follows := range r.present {
		t.Students++
		if follows {
			t.Following++
		} else {
			t.Branched++
		}
	}
	for a := range r.counted() {
		t.Answered++
		if !a.valid {
			t.Invalid++
		}
	}
	if r.poll != nil {
		t.Bins = r.bins()
	}
	if r.page == PageLab {
		t.Lab = &LabTally{}
		for id, passed := range r.lab {
			if _, ok := r.present[id]; ok {
				t.Lab.Tried++
				if passed {
					t.Lab.Passed++
				}
			}
		}
	}
	return t
}

// numBins is how many bars a histogram has at most: legible on a projector.
const numBins = 8

// bins is the histogram of the valid answers: numBins equal bars from the
// smallest to the largest answer. Only a revealed poll marks the bar that
// holds the answer, since the presenter's screen is usually projected.
func (r *Room) bins() []Bin {
	if r.poll.format() != grading.FormatNumber {
		return r.categoryBins()
	}
	var xs []float64
	for a := range r.counted() {
		if a.valid {
			xs = append(xs, a.value)
		}
	}
	if len(xs) == 0 {
		return []Bin{}
	}
	sort.Float64s(xs)
	lo, hi := xs[0], xs[len(xs)-1]
	n := numBins
	if hi-lo < 1e-9 {
		// One bar, as wide as the answers the grading takes for this one.
		spread := r.poll.Tolerance.Allowed(lo)
		lo, hi, n = lo-spread, lo+spread, 1
	}
	width := (hi - lo) / float64(n)
	out := make([]Bin, n)
	for k := range out {
		out[k] = Bin{Lo: lo + float64(k)*width, Hi: lo + float64(k+1)*width}
	}
	for _, x := range xs {
		k := min(int(math.Floor((x-lo)/width)), n-1)
		out[max(k, 0)].Count++
	}
	if r.revealed {
		for k := range out {
			last := k == n-1
			ans := r.poll.Number
			out[k].Correct = ans >= out[k].Lo && (ans < out[k].Hi || (last && ans <= out[k].Hi))
		}
	}
	return out
}

// categoryBins is the histogram of answers that are options or tiles: a
// bar per option (in the options' order) where there are few, else the
// most given answers.
func (r *Room) categoryBins() []Bin {
	counts := map[string]int{}
	for a := range r.counted() {
		if a.valid {
			counts[a.key]++
		}
	}
	var out []Bin
	if r.poll.format() == grading.FormatChoice && len(r.poll.Choices) <= numBins {
		for _, c := range r.poll.Choices {
			out = append(out, Bin{Label: c.Label, Count: counts[c.Value], Correct: r.revealed && c.Value == r.poll.Choice})
		}
		return out
	}
	labels := map[string]string{}
	for _, c := range r.poll.Choices {
		labels[c.Value] = c.Label
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	right := r.poll.key()
	for _, k := range keys[:min(len(keys), numBins)] {
		label := k
		if l, ok := labels[k]; ok && r.poll.format() == grading.FormatChoice {
			label = l
		}
		out = append(out, Bin{Label: label, Count: counts[k], Correct: r.revealed && k == right})
	}
	if out == nil {
		out = []Bin{}
	}
	return out
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
