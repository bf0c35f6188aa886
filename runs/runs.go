// Package runs owns the computations behind every trace the server sends.
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
// on streams and computations; past them a request gets a *BusyError,
// which the server answers with HTTP 503 or websocket close 1013.
package runs

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"flashstep/kernels"
	"flashstep/runner"
)

// Router decides where a run goes (runner.Router in production).
type Router interface {
	Route(c kernels.Config) runner.Route
}

// Options bound what the hub admits. A zero field takes its default.
type Options struct {
	// Slots is how many computations run at once on each engine: by
	// default one per CPU core for the mirror (each computation is one
	// goroutine that never waits), and one for the GPU, which runs one
	// traced kernel at a time anyway. Recordings need no slot.
	Slots map[string]int
	// Queue is how many computations may wait on each engine (default 4
	// per slot, at least 8 for the GPU): a class asking for its teacher's
	// run needs one; a queue longer than a few runs' time only makes
	// everyone wait longer before hearing "busy".
	Queue map[string]int
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
	slots := map[string]int{runner.OnCPU: cores, runner.OnGPU: 1}
	for k, v := range o.Slots {
		if v > 0 {
			slots[k] = v
		}
	}
	o.Slots = slots
	queue := map[string]int{runner.OnCPU: 4 * slots[runner.OnCPU], runner.OnGPU: max(8, 4*slots[runner.OnGPU])}
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

// BusyError refuses a request the server cannot take now; the client may
// try again after RetryAfter.
type BusyError struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string { return e.Reason }

// ErrClosed: the server is shutting down.
var ErrClosed = errors.New("the server is shutting down; run again in a moment")

// labelSlack covers a trace's source label, which TraceBytes leaves out.
const labelSlack = 4 << 10

// Hub shares computations between the clients that ask for them.
type Hub struct {
	router Router
	opts   Options
	ctx    context.Context // ends every computation at Close
	end    context.CancelFunc

	mu       sync.Mutex
	closed   bool
	traces   map[string]*trace // by route key: waiting, running, or done and cached
	lanes    map[string]*lane
	cache    *list.List // done traces, most recently used at the front
	held     int64      // bytes of every trace in memory (see Options.Memory)
	readers  int
	byAddr   map[string]*addrUse
	stats    Stats
	finished sync.WaitGroup
}

// lane is one engine's computations.
type lane struct {
	slots, queueLen int
	running         int
	queue           []*trace // waiting, in order
}

type addrUse struct{ readers, computations int }

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
}

// New is a hub over router's engines.
func New(router Router, o Options) *Hub {
	ctx, end := context.WithCancel(context.Background())
	return &Hub{router: router, opts: o.withDefaults(), ctx: ctx, end: end,
		traces: map[string]*trace{}, lanes: map[string]*lane{}, cache: list.New(), byAddr: map[string]*addrUse{}}
}

// trace is one run's trace, shared by its readers. Its fields are guarded
// by the hub's mutex; a chunk, once appended, never changes.
type trace struct {
	key, engine, addr string
	run               func(ctx context.Context, emit func([]byte) error) error
	estimate          int64 // bytes reserved while computing
	free              bool  // a recording: its bytes are the recording's, held anyway

	state   int
	counted bool // against its address's computations, until it ends
	chunks  [][]byte
	size    int64
	err     error
	readers int
	cancel  context.CancelFunc
	elem    *list.Element // in the cache
	changed chan struct{} // closed at every change, then replaced
}

const (
	stateWaiting = iota
	stateRunning
	stateDone
	stateFailed
)

func (t *trace) signal() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// bytesHeld is what the trace counts against Options.Memory.
func (t *trace) bytesHeld() int64 {
	switch {
	case t.free:
		return 0
	case t.state == stateRunning:
		return max(t.estimate, t.size)
	case t.state == stateDone:
		return t.size
	}
	return 0
}

// Open starts reading the trace of c, computing it if nobody is. c is
// validated first (a kernels.FieldErrors names the field); a request the
// server cannot take now gets a *BusyError. addr is the client's address,
// for the per-address bounds. The reader must be closed.
func (h *Hub) Open(c kernels.Config, addr string) (*Reader, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	route := h.router.Route(c)
	if route.Err != nil {
		return nil, route.Err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	use := h.use(addr)
	switch {
	case h.readers >= h.opts.Streams:
		return nil, h.busy(fmt.Sprintf("the server has %d traces streaming, its limit: try again in a few seconds", h.readers))
	case use.readers >= h.opts.StreamsPerAddress:
		return nil, h.busy(fmt.Sprintf("your address has %d traces open, the most one address may: close some pages and try again", use.readers))
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
		if t, err = h.admit(route, c, addr, use); err != nil {
			return nil, err
		}
	}
	t.readers++
	h.readers++
	use.readers++
	return &Reader{h: h, t: t, addr: addr}, nil
}

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

func (h *Hub) busy(reason string) *BusyError {
	h.stats.Busy++
	return &BusyError{Reason: reason, RetryAfter: h.opts.RetryAfter}
}

// admit makes a new computation, running or waiting, or says why not.
func (h *Hub) admit(route runner.Route, c kernels.Config, addr string, use *addrUse) (*trace, error) {
	t := &trace{key: route.Key, engine: route.Engine, addr: addr, run: route.Run,
		estimate: c.TraceBytes() + labelSlack, free: route.Engine == runner.OnRecording, changed: make(chan struct{})}
	if t.free {
		h.traces[t.key] = t
		h.start(t)
		return t, nil
	}
	if t.estimate > h.opts.Memory {
		return nil, kernels.FieldErrors{{Field: kernels.FieldTraceBH, Message: fmt.Sprintf("the trace would be %s, more than the %s this server holds for traces",
			kernels.FormatBytes(t.estimate), kernels.FormatBytes(h.opts.Memory))}}
	}
	if use.computations >= h.opts.PerAddress {
		return nil, h.busy(fmt.Sprintf("your address has %d runs computing or waiting, the most one address may: wait for them, or close their pages", use.computations))
	}
	l := h.lane(t.engine)
	if len(l.queue) >= l.queueLen && !(l.running < l.slots && h.fits(t)) {
		return nil, h.busy(fmt.Sprintf("the %s is busy: %d runs computing and %d waiting, as many as it takes; try again in a few seconds",
			engineName(t.engine), l.running, len(l.queue)))
	}
	use.computations++
	t.counted = true
	h.traces[t.key] = t
	l.queue = append(l.queue, t)
	h.schedule()
	return t, nil
}

func engineName(engine string) string {
	if engine == runner.OnGPU {
		return "GPU"
	}
	return "CPU"
}

func (h *Hub) lane(engine string) *lane {
	l := h.lanes[engine]
	if l == nil {
		l = &lane{slots: max(h.opts.Slots[engine], 1), queueLen: max(h.opts.Queue[engine], 0)}
		h.lanes[engine] = l
	}
	return l
}

// fits says whether t's estimate fits the memory bound once unread cached
// traces are let go, least recently used first; it lets them go if so.
func (h *Hub) fits(t *trace) bool {
	if h.held+t.estimate <= h.opts.Memory {
		return true
	}
	var freeable int64
	for e := h.cache.Back(); e != nil; e = e.Prev() {
		if c := e.Value.(*trace); c.readers == 0 {
			freeable += c.size
		}
	}
	if h.held-freeable+t.estimate > h.opts.Memory {
		return false
	}
	for e := h.cache.Back(); e != nil && h.held+t.estimate > h.opts.Memory; {
		prev := e.Prev()
		if c := e.Value.(*trace); c.readers == 0 {
			h.evict(c)
		}
		e = prev
	}
	return true
}

// evict drops a done trace from the cache; its memory goes with its last
// reader.
func (h *Hub) evict(t *trace) {
	if t.elem != nil {
		h.cache.Remove(t.elem)
		t.elem = nil
	}
	if h.traces[t.key] == t {
		delete(h.traces, t.key)
	}
	if t.readers == 0 {
		h.held -= t.bytesHeld()
		t.chunks = nil
	}
}

// schedule starts waiting computations while their engine has a free slot
// and memory allows, in the order they came; each waiting reader hears its
// new place.
func (h *Hub) schedule() {
	for _, l := range h.lanes {
		moved := false
		for len(l.queue) > 0 && l.running < l.slots && h.fits(l.queue[0]) {
			t := l.queue[0]
			l.queue = l.queue[1:]
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

// start runs t's computation on a goroutine of its own.
func (h *Hub) start(t *trace) {
	t.state = stateRunning
	h.held += t.bytesHeld()
	ctx, cancel := context.WithCancel(h.ctx)
	t.cancel = cancel
	if t.free {
		h.stats.Replayed++
	} else {
		h.stats.Computed++
	}
	t.signal()
	h.finished.Add(1)
	go func() {
		defer h.finished.Done()
		err := t.run(ctx, func(chunk []byte) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return err
			}
			before := t.bytesHeld()
			t.chunks = append(t.chunks, chunk)
			t.size += int64(len(chunk))
			h.held += t.bytesHeld() - before
			t.signal()
			return nil
		})
		cancel()
		h.finish(t, err)
	}()
}

// finish ends t's computation: cached when it completed, else forgotten
// (a later request computes it afresh).
func (h *Hub) finish(t *trace, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	before := t.bytesHeld()
	if !t.free {
		h.lanes[t.engine].running--
	}
	h.uncount(t)
	if err != nil && h.ctx.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		t.state, t.err = stateFailed, err
		if h.traces[t.key] == t {
			delete(h.traces, t.key)
		}
		h.held -= before
		if t.readers == 0 {
			t.chunks = nil
		}
	} else {
		t.state = stateDone
		h.held += t.bytesHeld() - before
		if h.traces[t.key] == t {
			t.elem = h.cache.PushFront(t)
		} else if t.readers == 0 {
			h.held -= t.bytesHeld() // every reader left as it finished
			t.chunks = nil
		}
	}
	t.signal()
	// The cache keeps what fits once every computation's reservation is met.
	for e := h.cache.Back(); e != nil && h.held > h.opts.Memory; {
		prev := e.Prev()
		if c := e.Value.(*trace); c.readers == 0 {
			h.evict(c)
		}
		e = prev
	}
	h.schedule()
}

// uncount ends t's count against its address.
func (h *Hub) uncount(t *trace) {
	if t.counted {
		t.counted = false
		h.use(t.addr).computations--
		h.forget(t.addr)
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
		l := h.lanes[t.engine]
		for k, q := range l.queue {
			if q == t {
				l.queue = append(l.queue[:k], l.queue[k+1:]...)
				for _, later := range l.queue[k:] {
					later.signal()
				}
				break
			}
		}
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
		if t.elem == nil { // evicted while read
			h.held -= t.bytesHeld()
			t.chunks = nil
		}
	case stateFailed:
		t.chunks = nil
	}
	h.schedule() // a slot or memory may have come free
}

// Close stops every computation and wakes every reader with ErrClosed; new
// requests get ErrClosed. It does not wait for the computations to return
// (a GPU run finishes its kernel first): Wait does.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, l := range h.lanes {
		for _, t := range l.queue {
			t.state, t.err = stateFailed, ErrClosed
			t.signal()
		}
		l.queue = nil
	}
	h.mu.Unlock()
	h.end()
}

// Wait waits until every computation has returned, or ctx ends.
func (h *Hub) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.finished.Wait(); close(done) }()
	select {
	case <-done:
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
	s.Readers, s.HeldBytes = h.readers, h.held
	for _, l := range h.lanes {
		s.Running += l.running
		s.Waiting += len(l.queue)
	}
	return s
}

// Reader is one client's place in a shared trace.
type Reader struct {
	h      *Hub
	t      *trace
	addr   string
	next   int
	shown  int // the queue position last reported
	closed bool
}

// Update is what a reader learns from one Next.
type Update struct {
	// Chunks are the trace's next chunks, header first, in trace order.
	// They are shared with every other reader: never change them.
	Chunks [][]byte
	// Ahead, while the computation waits, is how many wait before it
	// (0: it is next); -1 once it runs.
	Ahead int
	// Done: the trace is complete and Chunks hold its last chunks.
	Done bool
}

// Next waits until there is something new: chunks past those read, a new
// place in the queue, or the end. It returns the computation's error if
// it failed, and ctx's if ctx ends first.
func (r *Reader) Next(ctx context.Context) (Update, error) {
	for {
		h, t := r.h, r.t
		h.mu.Lock()
		u := Update{Ahead: -1}
		if r.next < len(t.chunks) {
			u.Chunks = t.chunks[r.next:len(t.chunks):len(t.chunks)]
			r.next = len(t.chunks)
		}
		state, err, changed := t.state, t.err, t.changed
		if state == stateWaiting {
			u.Ahead = h.ahead(t)
		}
		h.mu.Unlock()
		switch {
		case state == stateFailed && len(u.Chunks) > 0:
			return u, nil // what was made before the failure, then the error
		case state == stateFailed:
			return Update{}, err
		case state == stateDone:
			u.Done = true
			return u, nil
		case len(u.Chunks) > 0:
			return u, nil
		case state == stateWaiting && u.Ahead+1 != r.shown:
			r.shown = u.Ahead + 1
			return u, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Update{}, ctx.Err()
		}
	}
}

func (h *Hub) ahead(t *trace) int {
	for k, q := range h.lanes[t.engine].queue {
		if q == t {
			return k
		}
	}
	return 0
}

// Close lets the trace go; the last reader of an unfinished computation
// stops it.
func (r *Reader) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.h.release(r)
}

// Collect reads the whole trace of c: its chunks, shared (never change
// them).
func (h *Hub) Collect(ctx context.Context, c kernels.Config, addr string) ([][]byte, error) {
	rd, err := h.Open(c, addr)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var chunks [][]byte
	for {
		u, err := rd.Next(ctx)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, u.Chunks...)
		if u.Done {
			return chunks, nil
		}
	}
}
