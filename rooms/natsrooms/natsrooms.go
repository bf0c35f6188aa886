// Package natsrooms shares classroom rooms between several flashstep
// servers through a NATS broker, so that a load balancer may put the
// presenter on one server and the students on others.
//
// Each room's state machine (rooms.Room) runs on the server that created
// it, its owner. Every server holds its own participants (rooms.Local) and
// talks to the owner over three subjects per room:
//
//	flashstep.room.CODE.req   request/reply: peek at the room, or check a join (token, capacity)
//	flashstep.room.CODE.up    request/reply: a participant's command; the reply is its refusal, if any
//	flashstep.room.CODE.down  the owner's events, as a JSON array, to every server with participants
//
// NATS keeps one publisher's messages in order on a subject, so every
// server sees a room's events in the owner's order. Rooms live in their
// owner's memory: when it stops, its rooms end and every participant,
// wherever connected, is told.
//
// A server that crashes says nothing, so every server beats: each beat the
// owner publishes an empty event list on each room's down subject, and
// every server with participants of a room reports their presence on its
// up subject: the whole of it (its students' identities), so that a report
// lost on the way is made good by the next beat. A server that hears
// nothing of a room for LostAfter tells its participants the room is lost
// (closed, why "lost"); an owner that hears no presence from a server for
// LostAfter stops counting its students, and their answers.
//
// The owner ends its rooms when their time is up (rooms.Limits: a room
// nobody presented, a room whose presenter is long gone or, connected,
// silent past PresenterIdle), and bounds the open rooms created from one
// client address. A room's key for the student identities it issues
// travels in its state (rooms.State.StudentKey), so that every server
// tells the room's students from followers alike with no secret of its
// own (rooms/students.go).
//
// A server that shuts down ends the rooms it owns; its participants of
// rooms owned elsewhere are told to reconnect (closed, why "moved"), and
// reach the room again through another server.
package natsrooms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashstep/problem"
	"flashstep/rooms"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

const (
	prefix      = "flashstep.room."
	callTimeout = 3 * time.Second // a request to a room's owner
	closeFlush  = time.Second     // the rooms' last word at a shutdown
)

// Options tune the heartbeat; zero fields take the defaults.
type Options struct {
	Beat      time.Duration // how often owners and followers say they are alive (default 1 s)
	LostAfter time.Duration // silence after which a room or a server counts as gone (default 4 beats)
	// Now is the service's clock (default time.Now): a test's clock moves
	// rooms through their lifetimes without waiting.
	Now func() time.Time
}

const lostMessage = "The server running this room stopped answering (it may have crashed), and the room is lost. Ask the presenter for a new code."
const movedMessage = "This server is shutting down; the room goes on. Reconnecting you through another server…"

// Service is rooms.Service on a NATS connection.
type Service struct {
	nc     *nats.Conn
	limits rooms.Limits
	local  *rooms.Local
	opts   Options

	mu      sync.Mutex
	owned   map[string]*owned             // rooms this server created
	pending int                           // rooms being created: counted against MaxRooms
	byAddr  map[string]int                // rooms owned or being created, by the address that created them
	down    map[string]*nats.Subscription // rooms this server has participants of
	heard   map[string]time.Time          // when each followed room's owner was last heard
	shut    bool                          // Close has begun: no new joins here
	done    chan struct{}
	once    sync.Once
}

// owned is a room whose state machine runs here.
type owned struct {
	mu   sync.Mutex // serialises the room's commands and its events' publication
	room *rooms.Room
	from string // the address that created it
	subs []*nats.Subscription
}

// New shares rooms over nc, which the caller closes after Close.
func New(nc *nats.Conn, l rooms.Limits) *Service { return NewWithOptions(nc, l, Options{}) }

// NewWithOptions is New with the heartbeat tuned.
func NewWithOptions(nc *nats.Conn, l rooms.Limits, o Options) *Service {
	if o.Beat <= 0 {
		o.Beat = time.Second
	}
	if o.LostAfter <= 0 {
		o.LostAfter = 4 * o.Beat
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{nc: nc, limits: l.WithDefaults(), local: rooms.NewLocal(nuid.Next()), opts: o,
		owned: map[string]*owned{}, byAddr: map[string]int{}, down: map[string]*nats.Subscription{}, heard: map[string]time.Time{}, done: make(chan struct{})}
	go s.janitor()
	go s.heartbeat()
	return s
}

// reply is the owner's answer to a request.
type reply struct {
	Err   string         `json:"err,omitempty"`  // noroom, badtoken, full, field (any other coded refusal: Code), other
	Code  problem.Code   `json:"code,omitempty"` // field: the refusal's code; 0 from a server that sent none: Invalid
	Field string         `json:"field,omitempty"`
	Msg   string         `json:"msg,omitempty"`
	State *rooms.State   `json:"state,omitempty"`
	Hello []*rooms.Event `json:"hello,omitempty"`
}

type request struct {
	Op    string `json:"op"` // peek, join
	Token string `json:"token,omitempty"`
}

func errReply(err error) reply {
	p, coded := problem.As(err)
	switch {
	case errors.Is(err, rooms.ErrNoRoom):
		return reply{Err: "noroom"}
	case errors.Is(err, rooms.ErrBadToken):
		return reply{Err: "badtoken"}
	case errors.Is(err, rooms.ErrRoomFull):
		return reply{Err: "full"}
	case coded && p.Code != problem.Internal:
		return reply{Err: "field", Code: p.Code, Field: p.Field, Msg: p.Message}
	}
	return reply{Err: "other", Msg: err.Error()}
}

func (r reply) err() error {
	switch r.Err {
	case "":
		return nil
	case "field":
		code := r.Code
		if code == problem.Internal {
			code = problem.Invalid
		}
		return &problem.Error{Code: code, Field: r.Field, Message: r.Msg}
	case "noroom":
		return rooms.ErrNoRoom
	case "badtoken":
		return rooms.ErrBadToken
	case "full":
		return rooms.ErrRoomFull
	}
	return errors.New(r.Msg)
}

// call asks room code's owner, wherever it runs.
func (s *Service) call(ctx context.Context, subject string, v any) (reply, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return reply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	msg, err := s.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return reply{}, rooms.ErrNoRoom // no server owns the code
	}
	if err != nil {
		return reply{}, fmt.Errorf("the room's server did not answer: %w", err)
	}
	var r reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return reply{}, err
	}
	return r, r.err()
}

func (s *Service) now() time.Time { return s.opts.Now() }

func (s *Service) Create(ctx context.Context, run rooms.Run, from string) (rooms.Created, error) {
	if err := rooms.ValidateRun(run, s.limits); err != nil {
		return rooms.Created{}, err
	}
	// The room's place is held while it is made, so that creations at once
	// cannot pass either bound together.
	s.mu.Lock()
	if len(s.owned)+s.pending >= s.limits.MaxRooms {
		s.mu.Unlock()
		return rooms.Created{}, rooms.ErrTooManyRooms
	}
	if from != "" && s.byAddr[from] >= s.limits.RoomsPerAddress {
		s.mu.Unlock()
		return rooms.Created{}, rooms.AddressRoomsError(s.limits)
	}
	s.pending++
	s.hold(from, 1)
	s.mu.Unlock()
	made := false
	defer func() {
		s.mu.Lock()
		s.pending--
		if !made {
			s.hold(from, -1)
		}
		s.mu.Unlock()
	}()
	// A code no server owns: one request finds out (a clash is a 1 in 10^9 event).
	var code string
	for range 5 {
		code = rooms.NewCode()
		if _, err := s.call(ctx, prefix+code+".req", request{Op: "peek"}); errors.Is(err, rooms.ErrNoRoom) {
			break
		}
	}
	c := rooms.Created{Code: code, Token: rooms.NewToken()}
	o := &owned{room: rooms.NewRoom(code, c.Token, run, s.limits, s.now()), from: from}
	o.room.Creator = from
	o.mu.Lock()
	defer o.mu.Unlock()
	req, err := s.nc.Subscribe(prefix+code+".req", func(m *nats.Msg) { s.answerRequest(o, m) })
	if err != nil {
		return rooms.Created{}, err
	}
	up, err := s.nc.Subscribe(prefix+code+".up", func(m *nats.Msg) { s.answerCommand(o, m) })
	if err != nil {
		req.Unsubscribe()
		return rooms.Created{}, err
	}
	o.subs = []*nats.Subscription{req, up}
	if err := s.nc.FlushTimeout(callTimeout); err != nil { // the broker has the subscriptions before anyone joins
		req.Unsubscribe()
		up.Unsubscribe()
		return rooms.Created{}, err
	}
	s.mu.Lock()
	s.owned[code] = o
	made = true
	s.mu.Unlock()
	return c, nil
}

// hold counts a room for the address that created it (n = 1), or stops
// counting it (n = -1). s.mu is held.
func (s *Service) hold(from string, n int) {
	if from == "" {
		return
	}
	if s.byAddr[from] += n; s.byAddr[from] <= 0 {
		delete(s.byAddr, from)
	}
}

func respond(m *nats.Msg, r reply) {
	data, _ := json.Marshal(r)
	m.Respond(data)
}

// answerRequest is the owner answering a peek or a join.
func (s *Service) answerRequest(o *owned, m *nats.Msg) {
	var req request
	if err := json.Unmarshal(m.Data, &req); err != nil {
		respond(m, errReply(err))
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.room == nil {
		respond(m, errReply(rooms.ErrNoRoom))
		return
	}
	r := o.room
	presenter := req.Token != ""
	if presenter && !r.Authorize(req.Token) {
		respond(m, errReply(rooms.ErrBadToken))
		return
	}
	st := r.State()
	st.Presenter = presenter
	switch req.Op {
	case "peek":
		respond(m, reply{State: &st})
	case "join":
		if r.Members() >= s.limits.MaxMembers {
			respond(m, errReply(rooms.ErrRoomFull))
			return
		}
		r.Apply(rooms.JoinCommand(presenter), s.now())
		hello := []*rooms.Event{r.Hello("", presenter)}
		if presenter {
			hello = append(hello, r.HelloTally())
		}
		respond(m, reply{State: &st, Hello: hello})
	default:
		respond(m, reply{Err: "field", Field: "op", Msg: "must be peek or join"})
	}
}

// answerCommand is the owner running a participant's command and
// publishing what it causes.
func (s *Service) answerCommand(o *owned, m *nats.Msg) {
	var c rooms.Command
	if err := json.Unmarshal(m.Data, &c); err != nil {
		respond(m, errReply(err))
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.room == nil {
		respond(m, errReply(rooms.ErrNoRoom))
		return
	}
	evs, err := o.room.Apply(c, s.now())
	if errors.Is(err, rooms.ErrClosed) {
		s.endLocked(o, evs[0])
		respond(m, reply{})
		return
	}
	if err != nil {
		respond(m, errReply(err))
		return
	}
	s.publish(o.room.Code, evs)
	respond(m, reply{})
}

func (s *Service) publish(code string, evs []*rooms.Event) {
	if len(evs) == 0 {
		return
	}
	data, _ := json.Marshal(evs)
	s.nc.Publish(prefix+code+".down", data)
}

// endLocked ends an owned room: the last event goes to every server.
func (s *Service) endLocked(o *owned, closed *rooms.Event) {
	code := o.room.Code
	s.publish(code, []*rooms.Event{closed})
	s.local.CloseRoom(code, closed) // this server's own, at once: its broker echo may come too late

	for _, sub := range o.subs {
		sub.Unsubscribe()
	}
	o.room = nil
	s.mu.Lock()
	if s.owned[code] == o {
		delete(s.owned, code)
		s.hold(o.from, -1)
	}
	s.mu.Unlock()
}

func (s *Service) Peek(ctx context.Context, code, token string) (rooms.State, error) {
	r, err := s.call(ctx, prefix+code+".req", request{Op: "peek", Token: token})
	if err != nil {
		return rooms.State{}, err
	}
	return *r.State, nil
}

func (s *Service) Join(ctx context.Context, code, token, student string) (*rooms.Member, error) {
	s.mu.Lock()
	shut := s.shut
	s.mu.Unlock()
	if shut {
		return nil, rooms.ErrShuttingDown
	}
	if err := s.follow(code); err != nil {
		return nil, err
	}
	deliver := func(c rooms.Command) error {
		_, err := s.call(context.Background(), prefix+code+".up", c)
		return err
	}
	// Added before the owner answers, so no event published after the
	// owner's snapshot can miss it; one published before may arrive after
	// the hello, and its older seq tells the page to ignore it.
	m, presence := s.local.Add(code, token != "", student, s.limits, deliver)
	r, err := s.call(ctx, prefix+code+".req", request{Op: "join", Token: token})
	if err != nil {
		m.Leave()
		return nil, err
	}
	r.Hello[0].Member = m.ID
	for _, e := range r.Hello {
		m.Box.Put(e)
	}
	return m, deliver(presence)
}

// follow subscribes this server to a room's events, once.
func (s *Service) follow(code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down[code] != nil {
		return nil
	}
	s.heard[code] = s.now()
	sub, err := s.nc.Subscribe(prefix+code+".down", func(m *nats.Msg) {
		s.mu.Lock()
		if _, ok := s.heard[code]; ok {
			s.heard[code] = s.now() // any word from the owner, a beat included
		}
		s.mu.Unlock()
		var evs []*rooms.Event
		if json.Unmarshal(m.Data, &evs) != nil {
			return
		}
		for _, e := range evs {
			if e.Type == rooms.EventClosed {
				s.local.CloseRoom(code, e)
				return
			}
		}
		s.local.Deliver(code, evs)
	})
	if err != nil {
		return err
	}
	s.down[code] = sub
	return s.nc.FlushTimeout(callTimeout)
}

// janitor ends owned rooms whose time is up and drops event subscriptions
// of rooms nobody here follows any more.
func (s *Service) janitor() {
	tick := time.NewTicker(max(min(s.limits.IdleExpiry/4, s.limits.UnpresentedExpiry/4, s.limits.PresenterIdle/4, 10*time.Second), time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			s.ExpireNow()
		}
	}
}

// ExpireNow ends owned rooms whose time is up (rooms.Room.ExpiredEvent)
// and forgets the event subscriptions of rooms without participants here.
func (s *Service) ExpireNow() {
	s.mu.Lock()
	var os []*owned
	for _, o := range s.owned {
		os = append(os, o)
	}
	for code, sub := range s.down {
		if !s.local.Has(code) {
			sub.Unsubscribe()
			delete(s.down, code)
			delete(s.heard, code)
		}
	}
	s.mu.Unlock()
	now := s.now()
	for _, o := range os {
		o.mu.Lock()
		if o.room != nil {
			if e := o.room.ExpiredEvent(now); e != nil {
				s.endLocked(o, e)
			}
		}
		o.mu.Unlock()
	}
}

// heartbeat beats every Options.Beat: see the package comment.
func (s *Service) heartbeat() {
	tick := time.NewTicker(s.opts.Beat)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			s.Beat(s.now())
		}
	}
}

// Beat is one heartbeat (the heartbeat loop calls it; tests may too): the
// owner's beat for each owned room, this server's presence for each room
// it has participants of, and the verdicts on silent owners and servers.
func (s *Service) Beat(now time.Time) {
	s.mu.Lock()
	var os []*owned
	for _, o := range s.owned {
		os = append(os, o)
	}
	var lost []string
	for code, at := range s.heard {
		if now.Sub(at) > s.opts.LostAfter && s.local.Has(code) {
			lost = append(lost, code)
			s.down[code].Unsubscribe()
			delete(s.down, code)
			delete(s.heard, code)
		}
	}
	s.mu.Unlock()
	for _, code := range lost {
		s.local.CloseRoom(code, rooms.ClosedEvent(rooms.WhyLost, lostMessage))
	}
	for _, o := range os {
		o.mu.Lock()
		if o.room != nil {
			s.nc.Publish(prefix+o.room.Code+".down", []byte("[]"))
			s.publish(o.room.Code, o.room.ForgetSilent(now, s.opts.LostAfter))
		}
		o.mu.Unlock()
	}
	for _, code := range s.local.Codes() {
		if data, err := json.Marshal(s.local.Presence(code)); err == nil {
			s.nc.Publish(prefix+code+".up", data) // no reply wanted: the owner notes the server alive
		}
	}
}

// Close ends the rooms this server owns, telling every participant on
// every server, and closes the connections of its own participants: those
// of rooms owned elsewhere are told to reconnect, since their rooms go on.
func (s *Service) Close(reason string) {
	s.once.Do(func() { close(s.done) })
	s.mu.Lock()
	s.shut = true
	var os []*owned
	for _, o := range s.owned {
		os = append(os, o)
	}
	s.mu.Unlock()
	for _, o := range os {
		o.mu.Lock()
		if o.room != nil {
			s.endLocked(o, rooms.ClosedEvent(rooms.WhyRestart, reason))
		}
		o.mu.Unlock()
	}
	s.nc.FlushTimeout(closeFlush) // a broker out of reach must not hold a shutdown up
	for _, code := range s.local.Codes() {
		// An owned room's members have had the restart (the first closed
		// event is final); the others' rooms live on elsewhere.
		s.local.CloseRoom(code, rooms.ClosedEvent(rooms.WhyMoved, movedMessage))
	}
}

func (s *Service) Stats() rooms.Stats {
	s.mu.Lock()
	n := len(s.owned)
	s.mu.Unlock()
	return rooms.Stats{Rooms: n, Members: s.local.Members(), Coalesced: s.local.Coalesced.Load()}
}
