package rooms

import (
	"sync"
	"sync/atomic"
)

// Mailbox holds what a participant has yet to receive. A room puts events
// in without ever waiting; the participant's writer takes them out. A
// reader that falls behind does not queue a backlog: a newer event of a
// kind replaces the one not yet taken (only the latest step matters to a
// page that follows), so a mailbox holds at most one event of each kind,
// and a slow student never slows the room or anyone else in it.
type Mailbox struct {
	mu      sync.Mutex
	slots   [numSlots]*Event
	ready   chan struct{} // holds a token while something waits to be taken
	closed  bool          // a closed event was put: nothing follows it
	counter *atomic.Int64 // events replaced before they were taken
}

// The slots, in the order Take hands them out: the hello (the room as it
// was at join) before anything newer, a new run before the step within it.
const (
	slotHello = iota
	slotRun
	slotStep
	slotPoll
	slotTally
	slotNotice
	slotClosed
	numSlots
)

func slotOf(typ string) int {
	switch typ {
	case EventHello:
		return slotHello
	case EventRun:
		return slotRun
	case EventStep:
		return slotStep
	case EventPoll:
		return slotPoll
	case EventTally:
		return slotTally
	case EventClosed:
		return slotClosed
	}
	return slotNotice
}

// NewMailbox is an empty mailbox; coalesced counts replaced events.
func NewMailbox(coalesced *atomic.Int64) *Mailbox {
	if coalesced == nil {
		coalesced = new(atomic.Int64)
	}
	return &Mailbox{ready: make(chan struct{}, 1), counter: coalesced}
}

// Put leaves an event for the participant, replacing an untaken one of the
// same kind. A new run supersedes an untaken step: the run carries its own.
func (b *Mailbox) Put(e *Event) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	s := slotOf(e.Type)
	if b.slots[s] != nil {
		b.counter.Add(1)
	}
	if s == slotRun && b.slots[slotStep] != nil {
		b.slots[slotStep] = nil
		b.counter.Add(1)
	}
	b.slots[s] = e
	b.closed = s == slotClosed
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default: // already signalled
	}
}

// Ready is signalled when events wait to be taken.
func (b *Mailbox) Ready() <-chan struct{} { return b.ready }

// Take removes and returns the waiting events in delivery order.
func (b *Mailbox) Take() []*Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Event
	for i, e := range b.slots {
		if e != nil {
			out = append(out, e)
			b.slots[i] = nil
		}
	}
	return out
}
