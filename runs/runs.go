// Package runs owns the computations behind every trace the server sends.
// runs.go is the hub and its requests; trace.go a shared trace and its
// readers; admission.go what may run, wait or be refused, and the memory
// the traces hold; sizes.go what a trace weighs compressed, measured once
// per run however many ask.
// A run that many clients ask for (a class of 300 opening the run their
// teacher projects) is computed once: every request for the same run, on
// the same engine, reads one shared trace while it is computed and from a
// byte-bounded cache after. A client that joins a run in progress reads the
// records made so far, then the rest as they come; a slow reader keeps only
// its place in the shared trace, never a copy of it.
//
// It also decides what runs at all (admission): a bounded number of
// computations at once on each engine (the CPU's cores, the one GPU), a
// bounded queue behind them whose position each waiting client sees, a
// bound on the memory every trace held may take, and per-address bounds
// on streams and computations; past them a request gets a problem.Busy,
// which the server answers with HTTP 503 or websocket close 1013.
package runs

import (
	"container/list"
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/problem"
	"flashstep/runner"
)

// Router decides where a run goes (runner.Router in production).
type Router interface {
	Route(r kernels.Run) runner.Route
}

// Options bound what the hub admits. A zero field takes its default.
type Options struct {
	// Slots is how many computations run at once on each engine: by
	// default one per CPU core for the mirror (each computation is one
	// goroutine that never waits), and one for the GPU, which runs one
	// traced kernel at a time anyway. Recordings need no slot.
	Slots map[instrument.Source]int
	// Queue is how many computations may wait on each engine (default 4
	// per slot, at least 8 for the GPU): a class asking for its teacher's
	// run needs one; a queue longer than a few runs' time only makes
	// everyone wait longer before hearing "busy".
	Queue map[instrument.Source]int
	// Memory bounds the bytes of every trace held: computing, cached, or
	// cached no longer but still being read (default 256 MiB).
	Memory int64
	// PerAddress is how many computations one client address may have
	// waiting or running (default 4): one address cannot fill the queue.
	PerAddress int
	// StreamsPerAddress bounds one address's open readers (default 500: a
	// class of 300 behind one school NAT, with room for its teachers).
	StreamsPerAddress int
	// Streams bounds open readers in all (default 5000).
	Streams int
	// RetryAfter is what a busy answer tells the client to wait.
	RetryAfter time.Duration
}

func (o Options) withDefaults() Options {
	cores := runtime.GOMAXPROCS(0)
	slots := map[instrument.Source]int{instrument.SourceCPUMirror: cores, instrument.SourceGPU: 1}
	for k, v := range o.Slots {
		if v > 0 {
			slots[k] = v
		}
	}
	o.Slots = slots
	queue := map[instrument.Source]int{instrument.SourceCPUMirror: 4 * slots[instrument.SourceCPUMirror], instrument.SourceGPU: max(8, 4*slots[instrument.SourceGPU])}
	for k, v := range o.Queue {
		if v > 0 {
			queue[k] = v
		}
	}
	o.Queue = queue
	if o.Memory <= 0 {
		o.Memory = 256 << 20
	}
	if o.PerAddress <= 0 {
		o.PerAddress = 4
	}
	if o.StreamsPerAddress <= 0 {
		o.StreamsPerAddress = 500
	}
	if o.Streams <= 0 {
		o.Streams = 5000
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Second
	}
	return o
}

// ErrClosed: the server is shutting down (problem.Unavailable).
var ErrClosed = problem.New(problem.Unavailable, "the server is shutting down; run again in a moment")

// labelSlack covers a trace's source label, which TraceBytes leaves out.
const labelSlack = 4 << 10

// Hub shares computations between the clients that ask for them. One
// mutex guards everything below it; nothing is called out while it is held.
type Hub struct {
	router Router
	opts   Options
	ctx    context.Context // ends every computation at Close
	end    context.CancelFunc

	mu      sync.Mutex
	closed  bool
	traces  map[string]*trace // by route key: waiting, running, or done and cached
	lanes   map[instrument.Source]*lane
	cache   *list.List // done traces, most recently used at the front
	held    int64      // the sum of every trace's charge (see Options.Memory)
	readers int
	byAddr  map[string]*addrUse // only addresses with a reader or a computation
	stats   Stats
	active  int           // computations whose goroutine has not returned
	idle    chan struct{} // closed while active is 0

	sizes sizeMemo // the last runs' compressed sizes (sizes.go), under its own lock
}

// Stats are the hub's counters since it started.
type Stats struct {
	Computed  int64 `json:"computed"`  // computations started
	Replayed  int64 `json:"replayed"`  // recordings replayed (no computation)
	Shared    int64 `json:"shared"`    // requests that joined a computation in progress
	Cached    int64 `json:"cached"`    // requests served from the cache
	Busy      int64 `json:"busy"`      // requests refused as busy
	Cancelled int64 `json:"cancelled"` // computations stopped because every reader left
	Readers   int   `json:"readers"`   // open now
	Running   int   `json:"running"`   // computing now
	Waiting   int   `json:"waiting"`   // queued now
	HeldBytes int64 `json:"held_bytes"`
	Addresses int   `json:"addresses"` // addresses with a reader or a computation now
}

// New is a hub over router's engines.
func New(router Router, o Options) *Hub {
	ctx, end := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &Hub{router: router, opts: o.withDefaults(), ctx: ctx, end: end, idle: idle,
		traces: map[string]*trace{}, lanes: map[instrument.Source]*lane{}, cache: list.New(), byAddr: map[string]*addrUse{}, sizes: newSizeMemo()}
}

// Open starts reading the trace of r, computing it if nobody is. A run
// that can go nowhere gets the route's error (a kernels.FieldErrors names
// the field); a request the server cannot take now gets a problem.Busy. addr
// is the client's address, for the per-address bounds. The reader must be
// closed.
func (h *Hub) Open(r kernels.Run, addr string) (*Reader, error) {
	route := h.router.Route(r)
	if route.Err != nil {
		return nil, route.Err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	switch {
	case h.readers >= h.opts.Streams:
		return nil, h.busy(fmt.Sprintf("the server has %d traces streaming, its limit: try again in a few seconds", h.readers))
	case h.usage(addr).readers >= h.opts.StreamsPerAddress:
		return nil, h.busy(fmt.Sprintf("your address has %d traces open, the most one address may: close some pages and try again", h.usage(addr).readers))
	}
	t := h.traces[route.Key]
	switch {
	case t != nil && t.state == stateDone:
		h.stats.Cached++
		if t.elem != nil {
			h.cache.MoveToFront(t.elem)
		}
	case t != nil:
		h.stats.Shared++
	default:
		var err error
		if t, err = h.admit(route, r, addr); err != nil {
			return nil, err
		}
	}
	t.readers++
	h.readers++
	h.use(addr).readers++
	return &Reader{h: h, t: t, addr: addr}, nil
}

// usage is what addr holds now, without recording it.
func (h *Hub) usage(addr string) addrUse {
	if u := h.byAddr[addr]; u != nil {
		return *u
	}
	return addrUse{}
}

// use is addr's entry, made when it first holds something; forget drops
// it when it holds nothing, so the map holds only addresses in use.
func (h *Hub) use(addr string) *addrUse {
	u := h.byAddr[addr]
	if u == nil {
		u = &addrUse{}
		h.byAddr[addr] = u
	}
	return u
}

func (h *Hub) forget(addr string) {
	if u := h.byAddr[addr]; u != nil && *u == (addrUse{}) {
		delete(h.byAddr, addr)
	}
}

// release is a reader's leaving: the last reader of a computation stops it.
func (h *Hub) release(r *Reader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := r.t
	t.readers--
	h.readers--
	h.use(r.addr).readers--
	h.forget(r.addr)
	if t.readers > 0 {
		return
	}
	switch t.state {
	case stateWaiting:
		h.dequeue(t)
		delete(h.traces, t.key)
		h.uncount(t)
		h.stats.Cancelled++
	case stateRunning:
		// Nobody is left to read it: stop the work. Its slot is free when
		// the computation returns; its address may start another now.
		if h.traces[t.key] == t {
			delete(h.traces, t.key)
		}
		t.cancel()
		h.uncount(t)
		h.stats.Cancelled++
	case stateDone:
		if t.elem == nil { // evicted while it was read
			h.drop(t)
		}
	case stateFailed:
		h.drop(t)
	}
	h.schedule() // a slot or memory may have come free
}

// Close stops every computation and fails every waiting one with
// ErrClosed; new requests get ErrClosed. A reader of a computation wakes
// when the computation returns (a GPU run finishes its kernel first); a
// reader of a finished trace reads on. Close does not wait: Wait does.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, l := range h.lanes {
		for _, t := range l.queue {
			t.state, t.err = stateFailed, ErrClosed
			delete(h.traces, t.key)
			h.uncount(t)
			t.signal()
		}
		l.queue = nil
	}
	h.mu.Unlock()
	h.end()
}

// Wait waits until every computation's goroutine has returned, or ctx ends.
func (h *Hub) Wait(ctx context.Context) error {
	h.mu.Lock()
	idle := h.idle
	h.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are the hub's counters now.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Readers, s.HeldBytes, s.Addresses = h.readers, h.held, len(h.byAddr)
	for _, l := range h.lanes {
		s.Running += l.running
		s.Waiting += len(l.queue)
	}
	return s
}
