package runs

import (
	"fmt"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/problem"
	"flashstep/runner"
)

// lane is one engine's computations.
type lane struct {
	slots, queueLen int
	running         int
	queue           []*trace // waiting, in order
}

// addrUse is what one client address holds: its open readers and its
// computations waiting or running.
type addrUse struct{ readers, computations int }

// busy refuses a request the server cannot take now (problem.Busy); the
// client may try again after Options.RetryAfter.
func (h *Hub) busy(reason string) *problem.Error {
	h.stats.Busy++
	return &problem.Error{Code: problem.Busy, Message: reason, RetryAfter: h.opts.RetryAfter}
}

// admit makes a new computation, running or waiting, or says why not: a
// trace larger than the memory for traces, an address with as many
// computations as it may have, a queue with as many as it takes.
func (h *Hub) admit(route runner.Route, run kernels.Run, addr string) (*trace, error) {
	c := run.Config()
	t := &trace{key: route.Key, engine: route.Engine, addr: addr, run: route.Run,
		estimate: c.TraceBytes() + labelSlack, free: route.Engine == instrument.SourceRecording, changed: make(chan struct{})}
	if t.free {
		h.traces[t.key] = t
		h.start(t)
		return t, nil
	}
	if t.estimate > h.opts.Memory {
		return nil, kernels.FieldErrors{{Field: kernels.FieldTraceBH, Message: fmt.Sprintf("the trace would be %s, more than the %s this server holds for traces",
			kernels.FormatBytes(t.estimate), kernels.FormatBytes(h.opts.Memory))}}
	}
	if n := h.usage(addr).computations; n >= h.opts.PerAddress {
		return nil, h.busy(fmt.Sprintf("your address has %d runs computing or waiting, the most one address may: wait for them, or close their pages", n))
	}
	l := h.lane(t.engine)
	if len(l.queue) >= l.queueLen {
		return nil, h.busy(fmt.Sprintf("the %s is busy: %d runs computing and %d waiting, as many as it takes; try again in a few seconds",
			engineName(t.engine), l.running, len(l.queue)))
	}
	h.use(addr).computations++
	t.counted = true
	h.traces[t.key] = t
	l.queue = append(l.queue, t)
	h.schedule()
	return t, nil
}

func engineName(engine instrument.Source) string {
	if engine == instrument.SourceGPU {
		return "GPU"
	}
	return "CPU"
}

func (h *Hub) lane(engine instrument.Source) *lane {
	l := h.lanes[engine]
	if l == nil {
		l = &lane{slots: max(h.opts.Slots[engine], 1), queueLen: max(h.opts.Queue[engine], 1)}
		h.lanes[engine] = l
	}
	return l
}

// schedule starts waiting computations while their engine has a free slot
// and memory allows, in the order they came; each waiting reader hears its
// new place.
func (h *Hub) schedule() {
	for _, l := range h.lanes {
		moved := false
		for len(l.queue) > 0 && l.running < l.slots && h.canHold(l.queue[0].estimate) {
			t := l.queue[0]
			l.queue = l.queue[1:]
			h.makeRoom(t.estimate)
			l.running++
			h.start(t)
			moved = true
		}
		if moved {
			for _, t := range l.queue {
				t.signal()
			}
		}
	}
}

// dequeue takes a waiting t out of its lane's queue; those behind it hear
// their new place.
func (h *Hub) dequeue(t *trace) {
	l := h.lanes[t.engine]
	for k, q := range l.queue {
		if q == t {
			l.queue = append(l.queue[:k], l.queue[k+1:]...)
			for _, later := range l.queue[k:] {
				later.signal()
			}
			return
		}
	}
}

// uncount ends t's count against its address.
func (h *Hub) uncount(t *trace) {
	if t.counted {
		t.counted = false
		h.use(t.addr).computations--
		h.forget(t.addr)
	}
}

// The memory the traces hold. Every trace is charged what it holds (a
// computing one its estimate or more, a finished one its size, a recording
// nothing: its bytes are the recording's), and held is the sum of the
// charges: Options.Memory bounds it.

// charge sets what t counts in the held bytes.
func (h *Hub) charge(t *trace, bytes int64) {
	h.held += bytes - t.charged
	t.charged = bytes
}

// drop lets t's chunks go: nobody reads them, and the cache does not hold it.
func (h *Hub) drop(t *trace) {
	h.charge(t, 0)
	t.chunks = nil
}

// canHold says whether bytes more would fit once the cached traces nobody
// reads are let go. It lets nothing go.
func (h *Hub) canHold(bytes int64) bool {
	free := h.opts.Memory - h.held
	for e := h.cache.Back(); e != nil && free < bytes; e = e.Prev() {
		if c := e.Value.(*trace); c.readers == 0 {
			free += c.charged
		}
	}
	return free >= bytes
}

// makeRoom lets cached traces nobody reads go, least recently used first,
// until bytes more fit or none is left to let go.
func (h *Hub) makeRoom(bytes int64) {
	for e := h.cache.Back(); e != nil && h.held+bytes > h.opts.Memory; {
		prev := e.Prev()
		if c := e.Value.(*trace); c.readers == 0 && c.charged > 0 {
			h.evict(c)
		}
		e = prev
	}
}

// trim keeps the cache within the bound once the computations' charges
// are met.
func (h *Hub) trim() { h.makeRoom(0) }

// evict takes a done trace out of the cache; its memory goes now, or with
// its last reader.
func (h *Hub) evict(t *trace) {
	if t.elem != nil {
		h.cache.Remove(t.elem)
		t.elem = nil
	}
	if h.traces[t.key] == t {
		delete(h.traces, t.key)
	}
	if t.readers == 0 {
		h.drop(t)
	}
}
