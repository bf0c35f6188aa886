package rooms

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what rooms may cost a server. The zero value of a field
// means its default (DefaultLimits).
type Limits struct {
	MaxRooms   int           // open rooms a server owns
	MaxMembers int           // participants of one room, all servers together
	IdleExpiry time.Duration // a room with no presenter message and no join for this long ends
	MaxMessage int           // bytes of one message from a participant
	MaxQuery   int           // bytes of a run's query
	MaxAnswer  int           // characters of a poll answer
	MaxSteps   int           // the largest step number a room accepts
	// Per address: joins a minute with a code that exists (a class behind
	// one NAT joins at once) and failed joins a minute (guessing codes).
	JoinsPerMinute, FailedJoinsPerMinute int
	// Per participant: messages a second (and the burst allowed above it).
	PresenterRate, StudentRate float64
}

// DefaultLimits are the limits of a server that says nothing else.
var DefaultLimits = Limits{
	MaxRooms: 200, MaxMembers: 1000, IdleExpiry: time.Hour,
	MaxMessage: 1024, MaxQuery: 512, MaxAnswer: 64, MaxSteps: 1 << 22,
	JoinsPerMinute: 600, FailedJoinsPerMinute: 10,
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
	setInt(&l.MaxMessage, d.MaxMessage)
	setInt(&l.MaxQuery, d.MaxQuery)
	setInt(&l.MaxAnswer, d.MaxAnswer)
	setInt(&l.MaxSteps, d.MaxSteps)
	setInt(&l.JoinsPerMinute, d.JoinsPerMinute)
	setInt(&l.FailedJoinsPerMinute, d.FailedJoinsPerMinute)
	if l.IdleExpiry == 0 {
		l.IdleExpiry = d.IdleExpiry
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
}

type addrBucket struct {
	lim  *rate.Limiter
	last time.Time
}

// NewAddrLimiter allows perMinute events a minute per address.
func NewAddrLimiter(perMinute int) *AddrLimiter {
	return &AddrLimiter{perMinute: perMinute, seen: map[string]*addrBucket{}}
}

// Allow takes one event of addr's allowance, or says there is none left.
func (a *AddrLimiter) Allow(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
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
		b = &addrBucket{lim: rate.NewLimiter(rate.Limit(float64(a.perMinute)/60), a.perMinute)}
		a.seen[addr] = b
	}
	b.last = now
	return b.lim.AllowN(now, 1)
}
