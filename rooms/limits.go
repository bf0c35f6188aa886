package rooms

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what rooms may cost a server. The zero value of a field
// means its default (DefaultLimits).
type Limits struct {
	MaxRooms   int // open rooms a server owns
	MaxMembers int // participants of one room, all servers together
	// A room's lifetime: one that nobody has presented (joined with its
	// control token) ends UnpresentedExpiry after it opened; one that has
	// been presented ends IdleExpiry after the last moment a presenter was
	// connected or sent a command. Students alone keep no room alive.
	IdleExpiry        time.Duration
	UnpresentedExpiry time.Duration
	// PresenterIdle ends a room whose presenter stays connected but sends
	// nothing (no step, run, poll) for this long: an open tab forgotten on
	// a projector would otherwise hold a room, and its place among
	// MaxRooms, for ever. The default is longer than a lesson; a teacher
	// sets another with the server's -room-idle.
	PresenterIdle time.Duration
	// Open rooms created from one client address, on one server.
	RoomsPerAddress int
	MaxMessage      int // bytes of one message from a participant
	MaxQuery        int // bytes of a run's query
	MaxAnswer       int // characters of a poll answer
	MaxSteps        int // the largest step number a room accepts
	// Per address: joins a minute with a code that exists (a class behind
	// one NAT joins at once) and wrong codes a minute (a class's typos, and
	// the guesses an attacker gets), each in bursts of as many. While an
	// address has spent its wrong codes, every code from it is refused.
	JoinsPerMinute, FailedJoinsPerMinute int
	// Per participant: messages a second (and the burst allowed above it).
	PresenterRate, StudentRate float64
}

// DefaultLimits are the limits of a server that says nothing else.
var DefaultLimits = Limits{
	MaxRooms: 1000, MaxMembers: 1000, IdleExpiry: time.Hour, UnpresentedExpiry: 5 * time.Minute, PresenterIdle: 3 * time.Hour, RoomsPerAddress: 20,
	MaxMessage: 1024, MaxQuery: 512, MaxAnswer: 64, MaxSteps: 1 << 22,
	JoinsPerMinute: 1200, FailedJoinsPerMinute: 30,
	PresenterRate: 60, StudentRate: 5,
}

// WithDefaults fills every zero field from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&l.MaxRooms, d.MaxRooms)
	setInt(&l.MaxMembers, d.MaxMembers)
	setInt(&l.RoomsPerAddress, d.RoomsPerAddress)
	setInt(&l.MaxMessage, d.MaxMessage)
	setInt(&l.MaxQuery, d.MaxQuery)
	setInt(&l.MaxAnswer, d.MaxAnswer)
	setInt(&l.MaxSteps, d.MaxSteps)
	setInt(&l.JoinsPerMinute, d.JoinsPerMinute)
	setInt(&l.FailedJoinsPerMinute, d.FailedJoinsPerMinute)
	if l.IdleExpiry == 0 {
		l.IdleExpiry = d.IdleExpiry
	}
	if l.UnpresentedExpiry == 0 {
		l.UnpresentedExpiry = d.UnpresentedExpiry
	}
	if l.PresenterIdle == 0 {
		l.PresenterIdle = d.PresenterIdle
	}
	if l.PresenterRate == 0 {
		l.PresenterRate = d.PresenterRate
	}
	if l.StudentRate == 0 {
		l.StudentRate = d.StudentRate
	}
	return l
}

// NewMessageLimiter is a participant's allowance of messages: rate a
// second, and bursts of twice that (at least 10) so a click storm passes.
func NewMessageLimiter(perSecond float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(10, int(2*perSecond)))
}

// AddrLimiter counts events per client address, each address with its own
// token bucket of perMinute a minute (bursts of the same). Addresses idle
// for a while are forgotten, so the map stays bounded by recent traffic.
type AddrLimiter struct {
	perMinute int
	mu        sync.Mutex
	seen      map[string]*addrBucket
	lastSweep time.Time
	clock     func() time.Time
}

// addrBucket is one address's allowance: tokens at the time last, filling
// at perMinute a minute up to perMinute.
type addrBucket struct {
	tokens float64
	last   time.Time
}

// NewAddrLimiter allows perMinute events a minute per address.
func NewAddrLimiter(perMinute int) *AddrLimiter {
	return &AddrLimiter{perMinute: perMinute, seen: map[string]*addrBucket{}, clock: time.Now}
}

// PerMinute is the events a minute each address is allowed.
func (a *AddrLimiter) PerMinute() int { return a.perMinute }

// SetClock makes the limiter read the time from now (tests).
func (a *AddrLimiter) SetClock(now func() time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clock = now
}

// Now is the limiter's time.
func (a *AddrLimiter) Now() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clock()
}

// Allow takes one event of addr's allowance at now, or says there is none left.
func (a *AddrLimiter) Allow(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked(a.bucketLocked(addr, now), now)
}

// Take takes one event of addr's allowance now; when none is left it says
// how long until there is one again.
func (a *AddrLimiter) Take(addr string) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	b := a.bucketLocked(addr, now)
	if a.takeLocked(b, now) {
		return true, 0
	}
	return false, a.waitLocked(b, now)
}

// Reserve takes one event of addr's allowance now, and returns a function
// that gives it back (when the event turns out not to count); when none is
// left it says how long until there is one again. Taking before the event
// is known makes events that happen at once count at once: each holds its
// share until it is given back.
func (a *AddrLimiter) Reserve(addr string) (giveBack func(), wait time.Duration, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	b := a.bucketLocked(addr, now)
	if !a.takeLocked(b, now) {
		return nil, a.waitLocked(b, now), false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.fillLocked(b, a.clock())
			b.tokens = min(b.tokens+1, float64(a.perMinute))
		})
	}, 0, true
}

// Spent says how long until addr has an event's allowance again: zero
// while it has one. It takes nothing.
func (a *AddrLimiter) Spent(addr string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.seen[addr]
	if b == nil {
		return 0
	}
	return a.waitLocked(b, a.clock())
}

// fillLocked brings b's tokens up to now.
func (a *AddrLimiter) fillLocked(b *addrBucket, now time.Time) {
	if now.After(b.last) {
		b.tokens = min(b.tokens+now.Sub(b.last).Minutes()*float64(a.perMinute), float64(a.perMinute))
		b.last = now
	}
}

func (a *AddrLimiter) takeLocked(b *addrBucket, now time.Time) bool {
	a.fillLocked(b, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// waitLocked is how long until b holds one event's allowance.
func (a *AddrLimiter) waitLocked(b *addrBucket, now time.Time) time.Duration {
	a.fillLocked(b, now)
	if b.tokens >= 1 {
		return 0
	}
	if a.perMinute <= 0 {
		return time.Minute
	}
	return max(time.Duration((1-b.tokens)/float64(a.perMinute)*float64(time.Minute)), time.Millisecond)
}

func (a *AddrLimiter) bucketLocked(addr string, now time.Time) *addrBucket {
	if now.Sub(a.lastSweep) > time.Minute {
		// A bucket idle for two minutes is full again: forgetting it
		// changes nothing.
		for k, b := range a.seen {
			if now.Sub(b.last) > 2*time.Minute {
				delete(a.seen, k)
			}
		}
		a.lastSweep = now
	}
	b := a.seen[addr]
	if b == nil {
		b = &addrBucket{tokens: float64(a.perMinute), last: now}
		a.seen[addr] = b
	}
	return b
}
