package runner_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels/kernelstest"
	"flashstep/runner"
	"flashstep/runs"
)

// The same run asked for twice, by two URLs, reaches the GPU worker once:
// this worker answers one run, and a second that reached it would fail.
func TestIdenticalGPURunsAreComputedOnce(t *testing.T) {
	t.Parallel()
	g, err := runner.StartFake(t, "ok-once", runner.GPUOptions{IdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hub := runs.New(&runner.Router{GPU: g}, runs.Options{})
	first, err := hub.Collect(context.Background(), kernelstest.MustRun(t, runner.Toy), "a")
	if err != nil {
		t.Fatal(err)
	}
	c := runner.Toy
	c.Engine = instrument.SourceGPU // a different URL, the same run
	second, err := hub.Collect(context.Background(), kernelstest.MustRun(t, c), "b")
	if err != nil || !bytes.Equal(bytes.Join(first, nil), bytes.Join(second, nil)) {
		t.Fatalf("the same run again: %v", err)
	}
	if st := hub.Stats(); st.Computed != 1 || st.Cached != 1 {
		t.Fatalf("stats %+v", st)
	}
}
