package runs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"flashstep/problem"
)

// Clients asking at once for a run's sizes share one measurement, and
// later ones are answered from the memo: the trace is computed once, the
// raw bytes are the trace's, and deflating frame by frame never beats
// gzip over the whole. Past the measurements at once the answer is busy.
func TestSizesAreMeasuredOnceAndKept(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{chunkCount: 40, pad: 512, gate: make(chan struct{})}
	h := New(f, Options{})
	c := run(11)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]Sizes, 8)
	errs := make([]error, len(got))
	for k := range got {
		wg.Go(func() { got[k], errs[k] = h.Sizes(ctx, c, fmt.Sprint("10.0.0.", k), 4<<10) })
	}
	for range f.chunkCount {
		f.gate <- struct{}{}
	}
	wg.Wait()
	raw := len(wantPadded(c, f.chunkCount, f.pad))
	for k, sz := range got {
		if errs[k] != nil || sz != got[0] || sz.Raw != raw || sz.Gzip <= 0 || sz.Gzip >= raw || sz.Deflate < sz.Gzip {
			t.Fatalf("client %d: %+v %v (raw %d)", k, sz, errs[k], raw)
		}
	}
	if again, err := h.Sizes(ctx, c, "10.0.0.99", 4<<10); err != nil || again != got[0] || f.started.Load() != 1 {
		t.Fatalf("kept: %+v %v, %d computations", again, err, f.started.Load())
	}

	// Two measurements hold both slots; a third run is refused as busy.
	for k := range sizeMeasurement {
		go h.Sizes(ctx, run(uint64(20+k)), "10.0.1.1", 4<<10)
	}
	waitFor(t, func() bool {
		h.sizes.mu.Lock()
		defer h.sizes.mu.Unlock()
		return len(h.sizes.inFlight) == sizeMeasurement
	})
	if _, err := h.Sizes(ctx, run(30), "10.0.1.2", 4<<10); problem.CodeOf(err) != problem.Busy {
		t.Fatalf("a third measurement at once: %v, want busy", err)
	}
	close(f.gate)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waited 10 s")
		}
	}
}
