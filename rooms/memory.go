package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"flashstep/problem"
)

// Memory keeps rooms in this process: the default, for one server. Rooms
// do not survive a restart; Close tells every participant so.
type Memory struct {
	limits Limits
	local  *Local
	now    func() time.Time

	mu     sync.Mutex // serialises every room's commands, and so their events' order
	rooms  map[string]*Room
	byAddr map[string]int // open rooms by the address that created them
	done   chan struct{}
	once   sync.Once
}

// NewMemory starts an in-process room service; Close stops it.
func NewMemory(l Limits) *Memory { return NewMemoryWithClock(l, time.Now) }

// NewMemoryWithClock is NewMemory reading the time from now: a test's
// clock moves rooms through their lifetimes without waiting.
func NewMemoryWithClock(l Limits, now func() time.Time) *Memory {
	m := &Memory{limits: l.WithDefaults(), local: NewLocal("local"), now: now, rooms: map[string]*Room{},
		byAddr: map[string]int{}, done: make(chan struct{})}
	go m.expire()
	return m
}

func (m *Memory) Create(ctx context.Context, run Run, from string) (Created, error) {
	if err := ValidateRun(run, m.limits); err != nil {
		return Created{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rooms) >= m.limits.MaxRooms {
		return Created{}, ErrTooManyRooms
	}
	if from != "" && m.byAddr[from] >= m.limits.RoomsPerAddress {
		return Created{}, AddressRoomsError(m.limits)
	}
	code := newCode()
	for m.rooms[code] != nil {
		code = newCode()
	}
	c := Created{Code: code, Token: newToken()}
	r := NewRoom(code, c.Token, run, m.limits, m.now())
	r.Creator = from
	m.rooms[code] = r
	if from != "" {
		m.byAddr[from]++
	}
	return c, nil
}

// AddressRoomsError is ErrAddressRooms with the limit, and what frees a place.
func AddressRoomsError(l Limits) error {
	l = l.WithDefaults()
	return &problem.Error{Code: problem.RateLimited, Limit: int64(l.RoomsPerAddress), Err: ErrAddressRooms,
		Message: fmt.Sprintf("%s: at most %d open rooms per address; end one (its End button), or wait until one expires (a room nobody presents ends %s after it opens)",
			ErrAddressRooms.Message, l.RoomsPerAddress, Human(l.UnpresentedExpiry))}
}

// endLocked forgets room code and gives each of its members here closed.
func (m *Memory) endLocked(code string, closed *Event) {
	r := m.rooms[code]
	if r == nil {
		return
	}
	delete(m.rooms, code)
	if r.Creator != "" {
		if m.byAddr[r.Creator]--; m.byAddr[r.Creator] <= 0 {
			delete(m.byAddr, r.Creator)
		}
	}
	m.local.CloseRoom(code, closed)
}

func (m *Memory) Peek(ctx context.Context, code, token string) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rooms[code]
	if r == nil {
		return State{}, ErrNoRoom
	}
	st := r.State()
	if token != "" {
		if !r.Authorize(token) {
			return State{}, ErrBadToken
		}
		st.Presenter = true
	}
	return st, nil
}

func (m *Memory) Join(ctx context.Context, code, token, student string) (*Member, error) {
	m.mu.Lock()
	r := m.rooms[code]
	if r == nil {
		m.mu.Unlock()
		return nil, ErrNoRoom
	}
	presenter := token != ""
	if presenter && !r.Authorize(token) {
		m.mu.Unlock()
		return nil, ErrBadToken
	}
	if r.Members() >= m.limits.MaxMembers {
		m.mu.Unlock()
		return nil, ErrRoomFull
	}
	r.Apply(JoinCommand(presenter), m.now())
	hello := []*Event{r.Hello("", presenter)}
	if presenter {
		hello = append(hello, r.HelloTally())
	}
	deliver := func(c Command) error { return m.apply(code, c) }
	// Added under m.mu: no event of the room can fall between the hello
	// and the member's first delivery.
	mem, presence := m.local.Add(code, presenter, student, m.limits, deliver)
	hello[0].Member = mem.ID
	for _, e := range hello {
		mem.Box.Put(e)
	}
	m.mu.Unlock()
	return mem, m.apply(code, presence)
}

// apply runs a command on room code and delivers its events.
func (m *Memory) apply(code string, c Command) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rooms[code]
	if r == nil {
		return ErrNoRoom
	}
	evs, err := r.Apply(c, m.now())
	if errors.Is(err, ErrClosed) {
		m.endLocked(code, evs[0])
		return nil
	}
	if err != nil {
		return err
	}
	m.local.Deliver(code, evs)
	return nil
}

// expire ends rooms whose time is up, checking a few times per limit.
func (m *Memory) expire() {
	tick := time.NewTicker(max(min(m.limits.IdleExpiry/4, m.limits.UnpresentedExpiry/4, m.limits.PresenterIdle/4, 30*time.Second), time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-tick.C:
			m.ExpireNow()
		}
	}
}

// ExpireNow ends every room whose time is up (Room.ExpiredEvent; the
// expiry loop calls it, tests may too).
func (m *Memory) ExpireNow() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for code, r := range m.rooms {
		if e := r.ExpiredEvent(now); e != nil {
			m.endLocked(code, e)
		}
	}
}

func (m *Memory) Close(reason string) {
	m.once.Do(func() { close(m.done) })
	m.mu.Lock()
	defer m.mu.Unlock()
	for code := range m.rooms {
		m.endLocked(code, ClosedEvent(WhyRestart, reason))
	}
}

func (m *Memory) Stats() Stats {
	m.mu.Lock()
	n := len(m.rooms)
	m.mu.Unlock()
	return Stats{Rooms: n, Members: m.local.Members(), Coalesced: m.local.Coalesced.Load()}
}
