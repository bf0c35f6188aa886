package runs

import (
	"container/list"
	"context"

	"flashstep/instrument"
	"flashstep/kernels"
)

// trace is one run's trace, shared by its readers. Its fields are guarded
// by the hub's mutex; a chunk, once appended, never changes.
type trace struct {
	key, addr string
	engine    instrument.Source
	run       func(ctx context.Context, emit func([]byte) error) error
	estimate  int64 // bytes reserved while it computes
	free      bool  // a recording: its bytes are the recording's, held anyway

	state   int
	counted bool // against its address's computations, until it ends
	chunks  [][]byte
	size    int64
	charged int64 // what it counts in the hub's held bytes now
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

// Reader is one client's place in a shared trace.
type Reader struct {
	h       *Hub
	t       *trace
	addr    string
	next    int
	shown   int  // the queue position last reported, from 1; 0 for none
	started bool // its start reported, after a wait
	closed  bool
}

// Update is what a reader learns from one Next.
type Update struct {
	// Chunks are the trace's next chunks, header first, in trace order.
	// They are shared with every other reader: never change them.
	Chunks [][]byte
	// Ahead, while the computation waits, is how many wait before it
	// (0: it is next); -1 once it runs.
	Ahead int
	// Started: the computation that waited has begun (said once).
	Started bool
	// Done: the trace is complete and Chunks hold its last chunks.
	Done bool
}

// Next waits until there is something new: chunks past those read, a new
// place in the queue, the start of a computation that waited, or the end.
// It returns the computation's error if it failed (after the chunks it
// made), and ctx's if ctx ends first.
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
		case state == stateWaiting && u.Ahead+1 != r.shown:
			r.shown = u.Ahead + 1
			return u, nil
		case state == stateRunning && r.shown > 0 && !r.started:
			r.started, u.Started = true, true
			return u, nil
		case len(u.Chunks) > 0:
			return u, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Update{}, ctx.Err()
		}
	}
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

// Collect reads the whole trace of r: its chunks, shared (never change
// them).
func (h *Hub) Collect(ctx context.Context, r kernels.Run, addr string) ([][]byte, error) {
	rd, err := h.Open(r, addr)
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

// start runs t's computation on a goroutine of its own.
func (h *Hub) start(t *trace) {
	t.state = stateRunning
	if !t.free {
		h.charge(t, t.estimate)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	t.cancel = cancel
	if t.free {
		h.stats.Replayed++
	} else {
		h.stats.Computed++
	}
	t.signal()
	if h.active == 0 {
		h.idle = make(chan struct{})
	}
	h.active++
	go func() {
		err := t.run(ctx, func(chunk []byte) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return err
			}
			t.chunks = append(t.chunks, chunk)
			t.size += int64(len(chunk))
			if !t.free {
				h.charge(t, max(t.estimate, t.size))
			}
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
	h.active--
	if h.active == 0 {
		close(h.idle)
	}
	if !t.free {
		h.lanes[t.engine].running--
	}
	h.uncount(t)
	if err != nil && h.ctx.Err() != nil {
		err = ErrClosed
	}
	switch {
	case err != nil:
		t.state, t.err = stateFailed, err
		if h.traces[t.key] == t {
			delete(h.traces, t.key)
		}
		if t.readers == 0 {
			h.drop(t)
		} else if !t.free {
			h.charge(t, t.size) // what its readers may still read
		}
	case h.traces[t.key] != t || t.readers == 0 && h.closed:
		// Every reader left as it finished (or the server is closing).
		t.state = stateDone
		if h.traces[t.key] == t {
			delete(h.traces, t.key)
		}
		if t.readers == 0 {
			h.drop(t)
		}
	default:
		t.state = stateDone
		if !t.free {
			h.charge(t, t.size)
		}
		t.elem = h.cache.PushFront(t)
	}
	t.signal()
	h.trim()
	h.schedule()
}

func (h *Hub) ahead(t *trace) int {
	for k, q := range h.lanes[t.engine].queue {
		if q == t {
			return k
		}
	}
	return 0
}
