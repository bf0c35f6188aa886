package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/problem"
	"flashstep/runner"
)

// fakeEngine computes a run as chunkCount chunks, each one only when the
// test lets it (gate), and counts the computations it starts and the ones
// whose context ended before they finished.
type fakeEngine struct {
	chunkCount int
	pad        int           // bytes added to each chunk
	gate       chan struct{} // nil: no waiting
	started    atomic.Int64
	stopped    atomic.Int64
	running    atomic.Int64
	maxRunning atomic.Int64
	fail       error
	unroutable error // the route's Err: the run can go nowhere
}

// recordedSeeds are seeds whose runs the fake engine "replays": recordings.
const recordedSeeds = 1000

func (f *fakeEngine) Route(c kernels.Run) runner.Route {
	if f.unroutable != nil {
		return runner.Route{Err: f.unroutable}
	}
	engine := instrument.SourceCPUMirror
	if c.Config().Seed >= recordedSeeds {
		engine = instrument.SourceRecording
	}
	return runner.Route{Engine: engine, Key: c.Key(), Says: "fake",
		Run: func(ctx context.Context, emit func([]byte) error) error {
			f.started.Add(1)
			n := f.running.Add(1)
			defer f.running.Add(-1)
			for {
				m := f.maxRunning.Load()
				if n <= m || f.maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			for k := range f.chunkCount {
				if f.gate != nil {
					select {
					case <-f.gate:
					case <-ctx.Done():
						f.stopped.Add(1)
						return ctx.Err()
					}
				}
				if err := emit(chunk(c, k, f.pad)); err != nil {
					f.stopped.Add(1)
					return err
				}
			}
			return f.fail
		}}
}

// run is the default run with another seed.
func run(seed uint64) kernels.Run {
	c := kernels.DefaultConfig()
	c.Seed = seed
	r, err := c.Check()
	if err != nil {
		panic(err)
	}
	return r
}

func chunk(c kernels.Run, k, pad int) []byte {
	return append([]byte(fmt.Sprintf("%s#%d;", c.Key(), k)), make([]byte, pad)...)
}

func want(c kernels.Run, n int) []byte { return wantPadded(c, n, 0) }

func wantPadded(c kernels.Run, n, pad int) []byte {
	var b []byte
	for k := range n {
		b = append(b, chunk(c, k, pad)...)
	}
	return b
}

// readAll reads r to its end, within a test's patience.
func readAll(t *testing.T, r *Reader) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b bytes.Buffer
	for {
		u, err := r.Next(ctx)
		if err != nil {
			return b.Bytes(), err
		}
		for _, ch := range u.Chunks {
			b.Write(ch)
		}
		if u.Done {
			return b.Bytes(), nil
		}
	}
}

func TestOneComputationForEveryReaderOfARun(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 50, gate: make(chan struct{})}
	h := New(f, Options{})
	c := run(7)
	const readers = 300
	rds := make([]*Reader, readers)
	// Half open before the run makes anything, half join it halfway.
	for k := range readers / 2 {
		var err error
		if rds[k], err = h.Open(c, fmt.Sprintf("10.0.0.%d", k%250)); err != nil {
			t.Fatal(err)
		}
	}
	for range 25 {
		f.gate <- struct{}{}
	}
	for k := readers / 2; k < readers; k++ {
		var err error
		if rds[k], err = h.Open(c, "192.168.1.1"); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for range 25 {
			f.gate <- struct{}{}
		}
	}()
	var wg sync.WaitGroup
	got := make([][]byte, readers)
	errs := make([]error, readers)
	for k, rd := range rds {
		wg.Go(func() { got[k], errs[k] = readAll(t, rd); rd.Close() })
	}
	wg.Wait()
	for k := range readers {
		if errs[k] != nil || !bytes.Equal(got[k], want(c, 50)) {
			t.Fatalf("reader %d: %v, %d bytes", k, errs[k], len(got[k]))
		}
	}
	if n := f.started.Load(); n != 1 {
		t.Fatalf("%d computations for one run", n)
	}
	// And after it, from the cache.
	rd, err := h.Open(c, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := readAll(t, rd); err != nil || !bytes.Equal(b, want(c, 50)) || f.started.Load() != 1 {
		t.Fatalf("from the cache: %v, %d computations", err, f.started.Load())
	}
	rd.Close()
	st := h.Stats()
	if st.Computed != 1 || st.Shared != readers-1 || st.Cached != 1 || st.Readers != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// next waits for the reader's next update, failing the test past a while.
func next(t *testing.T, r *Reader) Update {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 1, gate: make(chan struct{})}
	h := New(f, Options{Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 1}, Queue: map[instrument.Source]int{instrument.SourceCPUMirror: 2}, PerAddress: 10})
	open := func(seed uint64, addr string) (*Reader, error) { return h.Open(run(seed), addr) }
	a, err := open(1, "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := open(2, "y")
	if err != nil {
		t.Fatal(err)
	}
	c, err := open(3, "z")
	if err != nil {
		t.Fatal(err)
	}
	if u := next(t, b); u.Ahead != 0 {
		t.Fatalf("second run: %+v, want 0 ahead", u)
	}
	if u := next(t, c); u.Ahead != 1 {
		t.Fatalf("third run: %+v, want 1 ahead", u)
	}
	// A fourth distinct run finds the queue full: an explicit busy.
	var busy *problem.Error
	if _, err := open(4, "w"); !errors.As(err, &busy) || busy.Code != problem.Busy || busy.RetryAfter <= 0 {
		t.Fatalf("past the queue: %v", err)
	}
	// A reader of a run already queued costs no place.
	c2, err := open(3, "w")
	if err != nil {
		t.Fatalf("joining a queued run: %v", err)
	}
	// The second leaves: the third moves up and hears it.
	b.Close()
	if u := next(t, c); u.Ahead != 0 {
		t.Fatalf("after the second left: %+v", u)
	}
	// The first finishes; the third starts and finishes.
	f.gate <- struct{}{}
	if got, err := readAll(t, a); err != nil || !bytes.Equal(got, want(run(1), 1)) {
		t.Fatalf("first: %v", err)
	}
	f.gate <- struct{}{}
	for _, r := range []*Reader{c, c2} {
		if got, err := readAll(t, r); err != nil || !bytes.Equal(got, want(run(3), 1)) {
			t.Fatalf("third: %v %q", err, got)
		}
	}
	if f.started.Load() != 2 || f.maxRunning.Load() != 1 {
		t.Fatalf("%d computed (want 2: the second left while it waited), %d at once", f.started.Load(), f.maxRunning.Load())
	}
	a.Close()
	c.Close()
	c2.Close()
}

func TestPerAddressBounds(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 1, gate: make(chan struct{})}
	h := New(f, Options{PerAddress: 2, StreamsPerAddress: 3})
	var open []*Reader
	for seed := range uint64(2) {
		r, err := h.Open(run(seed+1), "greedy")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, r)
	}
	var busy *problem.Error
	if _, err := h.Open(run(3), "greedy"); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Fatalf("a third computation from one address: %v", err)
	}
	if r, err := h.Open(run(3), "modest"); err != nil {
		t.Fatalf("another address: %v", err)
	} else {
		open = append(open, r)
	}
	// Streams: joining runs already computing costs no computation, but
	// each is a stream.
	r, err := h.Open(run(1), "greedy")
	if err != nil {
		t.Fatal(err)
	}
	open = append(open, r)
	if _, err := h.Open(run(2), "greedy"); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Fatalf("a fourth stream from one address: %v", err)
	}
	for _, r := range open {
		r.Close()
	}
	if _, err := h.Open(run(2), "greedy"); err != nil {
		t.Fatalf("after closing: %v", err)
	}
}

func TestLastReaderLeavingStopsTheComputation(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 10, gate: make(chan struct{})}
	h := New(f, Options{})
	a, _ := h.Open(run(1), "a")
	b, _ := h.Open(run(1), "b")
	f.gate <- struct{}{}
	next(t, a)
	a.Close()
	select {
	case f.gate <- struct{}{}: // b still reads: the run goes on
	case <-time.After(5 * time.Second):
		t.Fatal("the run stopped while a reader was left")
	}
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil || f.stopped.Load() != 1 {
		t.Fatalf("the run went on with nobody reading: %v, stopped %d", err, f.stopped.Load())
	}
	// Nothing of it is kept: the next request computes afresh.
	f.gate = nil
	c, _ := h.Open(run(1), "c")
	if got, err := readAll(t, c); err != nil || !bytes.Equal(got, want(run(1), 10)) || f.started.Load() != 2 {
		t.Fatalf("afresh: %v, %d computations", err, f.started.Load())
	}
	c.Close()
	if st := h.Stats(); st.Cancelled != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAFailedRunIsNotCached(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 2, fail: errors.New("the worker died")}
	h := New(f, Options{})
	for range 2 {
		r, err := h.Open(run(1), "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, r); err == nil || err.Error() != "the worker died" {
			t.Fatalf("got %v", err)
		}
		r.Close()
	}
	if f.started.Load() != 2 {
		t.Fatalf("%d computations", f.started.Load())
	}
}

func TestMemoryBound(t *testing.T) {
	t.Parallel()
	c := kernels.DefaultConfig()
	per := c.TraceBytes() + labelSlack
	f := &fakeEngine{chunkCount: 3, pad: int(per / 3)}
	h := New(f, Options{Memory: 3 * per, PerAddress: 100, Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 2}})
	// Many distinct runs one after another: the cache keeps the last
	// few, and the bytes held never pass the bound.
	for seed := range uint64(20) {
		r, err := h.Open(run(seed+1), "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if st := h.Stats(); st.HeldBytes > 3*per || st.HeldBytes < 0 {
			t.Fatalf("held %d bytes, bound %d", st.HeldBytes, 3*per)
		}
	}
	// The most recent is cached, the first long gone.
	before := f.started.Load()
	for _, seed := range []uint64{20, 1} {
		r, _ := h.Open(run(seed), "a")
		readAll(t, r)
		r.Close()
	}
	if got := f.started.Load() - before; got != 1 {
		t.Fatalf("%d computed again, want 1 (the evicted one)", got)
	}
	// A run waits while readers hold the memory, and starts when they go.
	g := &fakeEngine{chunkCount: 1, pad: int(per) - 100}
	h = New(g, Options{Memory: 2 * per, PerAddress: 100})
	var held []*Reader
	for seed := range uint64(2) {
		r, _ := h.Open(run(seed+1), "a")
		readAll(t, r) // done and read, but not closed: pinned
		held = append(held, r)
	}
	w, err := h.Open(run(9), "a")
	if err != nil {
		t.Fatal(err)
	}
	if u := next(t, w); u.Ahead != 0 {
		t.Fatalf("a run with no memory left: %+v", u)
	}
	held[0].Close()
	if got, err := readAll(t, w); err != nil || !bytes.Equal(got, wantPadded(run(9), 1, int(per)-100)) {
		t.Fatalf("once memory came back: %v", err)
	}
	w.Close()
	held[1].Close()
}

func TestCloseWakesEveryReader(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 5, gate: make(chan struct{})}
	h := New(f, Options{Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 1}})
	a, _ := h.Open(run(1), "a")
	b, _ := h.Open(run(2), "a") // waits
	h.Close()
	for _, r := range []*Reader{a, b} {
		if _, err := readAll(t, r); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
		r.Close()
	}
	if _, err := h.Open(run(3), "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("a new request after Close: %v", err)
	}
}

// A run that can go nowhere (engine=gpu on a server without one) is refused
// with its route's field errors, and nothing is computed or held for it.
func TestUnroutableRunsNameTheirField(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{unroutable: kernels.FieldErrors{{Field: kernels.FieldEngine, Message: "this server has no GPU"}}}
	h := New(f, Options{})
	var fe kernels.FieldErrors
	if _, err := h.Open(run(1), "a"); !errors.As(err, &fe) || fe[0].Field != kernels.FieldEngine {
		t.Fatalf("an unroutable run: %v", err)
	}
	if st := h.Stats(); f.started.Load() != 0 || st.Readers != 0 || st.Addresses != 0 || st.HeldBytes != 0 {
		t.Fatalf("an unroutable run left %d computations, stats %+v", f.started.Load(), st)
	}
}

// The review's cases: recordings in the cache free nothing when let go;
// the queue's bound holds while its head waits for memory; an address
// refused leaves nothing behind; a failed trace's bytes count while it is
// read; the bytes held come back to what the cache holds.
func TestAccounting(t *testing.T) {
	t.Parallel()
	c := kernels.DefaultConfig()
	per := c.TraceBytes() + labelSlack
	pad := int(per) - 100 // a trace of about its estimate

	t.Run("recordings", func(t *testing.T) {
		t.Parallel()
		f := &fakeEngine{chunkCount: 1, pad: pad, gate: make(chan struct{})}
		h := New(f, Options{Memory: per + per/2, PerAddress: 100, Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 4}})
		rec, _ := h.Open(run(recordedSeeds+1), "a") // a recording as large as a trace
		f.gate <- struct{}{}
		readAll(t, rec)
		rec.Close()
		a, _ := h.Open(run(1), "a")
		b, err := h.Open(run(2), "b")
		if err != nil {
			t.Fatal(err)
		}
		if u := next(t, b); u.Ahead != 0 {
			t.Fatalf("a second run beside the first, with room for one and a half: %+v", u)
		}
		if st := h.Stats(); st.HeldBytes > per+per/2 || st.Running != 1 {
			t.Fatalf("%+v", st)
		}
		a.Close()
		b.Close()
		close(f.gate)
	})
	t.Run("queue bound while the head waits for memory", func(t *testing.T) {
		t.Parallel()
		f := &fakeEngine{chunkCount: 1, pad: pad, gate: make(chan struct{})}
		h := New(f, Options{Memory: per + per/2, PerAddress: 100, Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 2}, Queue: map[instrument.Source]int{instrument.SourceCPUMirror: 1}})
		a, _ := h.Open(run(1), "a")
		b, _ := h.Open(run(2), "b") // waits: no memory for it
		if u := next(t, b); u.Ahead != 0 {
			t.Fatalf("%+v", u)
		}
		var busy *problem.Error
		for k := range 50 {
			if _, err := h.Open(run(uint64(10+k)), fmt.Sprint("c", k)); !errors.As(err, &busy) || busy.Code != problem.Busy {
				t.Fatalf("run %d past a full queue: %v", k, err)
			}
		}
		if st := h.Stats(); st.Waiting != 1 || st.Addresses != 2 {
			t.Fatalf("%+v", st)
		}
		close(f.gate)
		if _, err := readAll(t, a); err != nil {
			t.Fatal(err)
		}
		a.Close() // its memory goes to the run waiting for it
		if _, err := readAll(t, b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if st := h.Stats(); st.Addresses != 0 || st.Readers != 0 {
			t.Fatalf("after: %+v", st)
		}
	})
	t.Run("a failed trace read on", func(t *testing.T) {
		t.Parallel()
		f := &fakeEngine{chunkCount: 2, pad: pad / 2, fail: errors.New("the worker died")}
		h := New(f, Options{})
		r, _ := h.Open(run(1), "a")
		for {
			u, err := r.Next(context.Background())
			if err != nil {
				break
			}
			if len(u.Chunks) > 0 && h.Stats().HeldBytes < int64(len(u.Chunks[0])) {
				// Being read: its bytes still count.
				t.Fatalf("held %d while a failed trace's chunks are read", h.Stats().HeldBytes)
			}
		}
		r.Close()
		if st := h.Stats(); st.HeldBytes != 0 {
			t.Fatalf("after its reader left: %+v", st)
		}
	})
	t.Run("held is what the cache holds", func(t *testing.T) {
		t.Parallel()
		f := &fakeEngine{chunkCount: 3, pad: 10}
		h := New(f, Options{PerAddress: 100})
		var sizes int64
		for seed := range uint64(5) {
			r, _ := h.Open(run(seed+1), "a")
			b, _ := readAll(t, r)
			sizes += int64(len(b))
			r.Close()
		}
		if st := h.Stats(); st.HeldBytes != sizes {
			t.Fatalf("held %d, the cache holds %d", st.HeldBytes, sizes)
		}
	})
	t.Run("the start of a run that waited", func(t *testing.T) {
		t.Parallel()
		f := &fakeEngine{chunkCount: 1, gate: make(chan struct{})}
		h := New(f, Options{Slots: map[instrument.Source]int{instrument.SourceCPUMirror: 1}, PerAddress: 100})
		a, _ := h.Open(run(1), "a")
		b, _ := h.Open(run(2), "b")
		if u := next(t, b); u.Ahead != 0 {
			t.Fatalf("%+v", u)
		}
		f.gate <- struct{}{}
		readAll(t, a)
		a.Close()
		if u := next(t, b); !u.Started || len(u.Chunks) != 0 {
			t.Fatalf("the waiting run began: %+v", u)
		}
		f.gate <- struct{}{}
		readAll(t, b)
		b.Close()
	})
}
