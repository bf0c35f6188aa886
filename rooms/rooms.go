// Package rooms owns classroom rooms: a presenter drives a run and every
// student's page follows it. It holds what a room is (its run, its current
// step, its poll), the messages that move it, the join codes and control
// tokens, the limits that keep a room and the server safe, and the
// in-process implementation of Service (Memory), the default.
//
// A room carries control messages only: the step, the run's query, the poll.
// The trace itself is never sent through a room; each student fetches the
// run's trace once, like any other run.
//
// Several servers share rooms through a message broker (package
// rooms/natsrooms). Both implementations run the same state machine (Room)
// on the server that created the room, and deliver its events to each
// participant through a Mailbox, which never blocks the room on a slow
// reader: it keeps only the latest of each kind of message.
package rooms

import (
	"context"

	"flashstep/problem"
)

// Service is where rooms live: in this process (Memory) or on a broker
// shared by several servers (natsrooms).
type Service interface {
	// Create opens a room for a run, created from the client address from
	// (empty: no per-address bound). It returns ErrTooManyRooms when the
	// bound on open rooms is reached, an error wrapping ErrAddressRooms
	// when from already holds Limits.RoomsPerAddress open rooms, or a
	// problem.Invalid for a bad run.
	Create(ctx context.Context, run Run, from string) (Created, error)
	// Join attaches a participant to the room with this code: a student
	// with an empty token, the presenter with the room's control token.
	// student is the student's identity (ValidStudent), one the room
	// issued (State.IssuedStudent says so; the caller checks): a poll
	// counts one answer per identity, and the presenter's tally one
	// student per identity however many connections it has. Anything
	// else, "" included, joins a follower: it sees the room and counts
	// against its capacity, but is no student, and its answers and lab
	// results are refused. It is ignored for the presenter, who is no
	// student. Join returns ErrNoRoom for an
	// unknown or expired code and ErrBadToken for a token that is not the
	// room's. The member's mailbox first holds a hello event with the
	// room's current state.
	Join(ctx context.Context, code, token, student string) (*Member, error)
	// Peek is the room's current run and step, without joining it;
	// Presenter says whether token is its control token. Errors as Join's.
	Peek(ctx context.Context, code, token string) (State, error)
	// Close ends every room of this server and tells its members why.
	Close(reason string)
	// Stats are counters for the server's runtime figures.
	Stats() Stats
}

// Run is what a room shows: a page and the run's canonical query.
type Run struct {
	Page  string `json:"page"`           // PageStepper, PageCompare or PageLab
	Query string `json:"query"`          // the run's canonical URL query; a lab exercise's id
	Step  int    `json:"step,omitempty"` // where a new room starts, from 1; 0 for the first step
	// A room presented from a lesson's widget: the lesson's slug and the
	// widget's id, whose checkpoints the presenter may pose. They stay with
	// the room when the presenter switches runs.
	Lesson string `json:"lesson,omitempty"`
	Widget string `json:"widget,omitempty"`
}

// State is a room as a page about to join it needs it.
type State struct {
	Run
	Total     int  `json:"total"`     // the run's steps, once the presenter's page knows them
	Presenter bool `json:"presenter"` // the token given was the room's
	// KernelsOff: the presenter turned the lab's kernel track off for the
	// room (on a server where it is on).
	KernelsOff bool `json:"kernels_off,omitempty"`
	// StudentKey is the room's key for the student identities it issues
	// (IssueStudent, IssuedStudent). It crosses the broker between the
	// room's servers (natsrooms), as control tokens do, and is never sent
	// to a client.
	StudentKey []byte `json:"student_key,omitempty"`
}

// The pages a room can show. A lab room's query is the exercise's id; its
// students report each verdict of theirs (CmdLabResult), and the
// presenter's tally counts who passed.
const (
	PageStepper = "step"
	PageCompare = "compare"
	PageLab     = "lab"
)

// Created is what the presenter, and only the presenter, gets back.
type Created struct {
	Code  string `json:"code"`
	Token string `json:"token"`
}

// Stats are a server's room figures.
type Stats struct {
	Rooms     int   `json:"rooms"`     // rooms this server owns
	Members   int   `json:"members"`   // participants connected to this server
	Coalesced int64 `json:"coalesced"` // events replaced by a newer one before a slow reader took them
}

// Errors a Service returns, each with its problem code, which the
// classroom's transports map to a status and a close code (package
// problem). A bad value in a message or a run is a problem.Invalid naming
// the field and its limit.
var (
	ErrNoRoom       = problem.New(problem.NotFound, "no room has this code: it may have expired or the server restarted; ask the presenter for the code again")
	ErrBadToken     = problem.New(problem.Forbidden, "the control token is not this room's")
	ErrTooManyRooms = problem.New(problem.Unavailable, "too many rooms are open on this server; try again later")
	// ErrAddressRooms: the client's address holds as many open rooms as
	// one address may (Limits.RoomsPerAddress); the error that wraps it
	// (AddressRoomsError) names the limit.
	ErrAddressRooms = problem.New(problem.RateLimited, "too many open rooms were created from your address")
	ErrRoomFull     = problem.New(problem.Full, "this room is full")
	ErrClosed       = problem.New(problem.NotFound, "the room has ended")
	// ErrShuttingDown: this server is leaving; the room may go on elsewhere.
	ErrShuttingDown = problem.New(problem.Unavailable, "this server is shutting down: reconnect to reach the room through another")
)

func fieldErr(field, format string, args ...any) error {
	return problem.InvalidField(field, format, args...)
}
