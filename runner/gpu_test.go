package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/ptx"
	"flashstep/problem"
	"flashstep/recordings"
	"flashstep/worker"
)

// The test binary doubles as a fake GPU worker: started with
// FLASHSTEP_FAKE_WORKER set, it speaks the worker protocol on fds 3 and 4 and
// misbehaves as asked. Its traces come from the CPU mirror. Where a test
// must know where the worker is, the worker waits at a gate (newGate).
func TestMain(m *testing.M) {
	if mode := os.Getenv("FLASHSTEP_FAKE_WORKER"); mode != "" {
		os.Exit(fakeWorker(mode))
	}
	os.Exit(m.Run())
}

func fakeWorker(mode string) int {
	if mode == "nogpu" {
		fmt.Println("Error in initialization: NoDevice") // what cu prints, on stdout
		return 1
	}
	req := bufio.NewReader(os.NewFile(worker.RequestFD, "req"))
	rep := os.NewFile(worker.ReplyFD, "rep")
	// Until the worker exits: a hung worker no longer writes to rep, and the
	// GC would close fd 4 under a dead variable, which the server rightly
	// reports as a death ("its pipe closed"), not a hang.
	defer runtime.KeepAlive(rep)
	server := os.Getppid()
	worker.WriteJSON(rep, worker.TypeHello, worker.Hello{GPU: "Fake GPU", Driver: "0.0", SMs: 4, SMIDs: 4, PTXHash: ptx.Hash()})
	state := os.Getenv("FLASHSTEP_FAKE_STATE")
	// stuck-once, stuck-twice: the first one or two workers get stuck at
	// their first run; the state file counts the workers started.
	stuck := false
	if n := map[string]int{"stuck-once": 1, "stuck-twice": 2}[mode]; n > 0 {
		before, _ := os.ReadFile(state)
		stuck = len(before) < n
		os.WriteFile(state, append(before, 'x'), 0o644)
	}
	for runs := 0; ; runs++ {
		t, payload, err := worker.ReadFrame(req)
		if err == io.EOF {
			return 0
		}
		if err != nil || t != worker.TypeRun {
			return 2
		}
		var run worker.Run
		json.Unmarshal(payload, &run)
		act := mode
		if mode == "crash-once" {
			act = "ok"
			if _, err := os.Stat(state); err != nil {
				os.WriteFile(state, nil, 0o644)
				act = "crash"
			}
		}
		if mode == "ok-once" && runs > 0 {
			act = "garbage"
		}
		if mode == "exit-after-run" && runs > 0 {
			return 9 // never reached: the worker exits after its first run
		}
		if mode == "fatal-once" || mode == "fatal-hang-once" {
			act = "ok" // the worker started after the first is sound
			if _, err := os.Stat(state); err != nil {
				os.WriteFile(state, nil, 0o644)
				act = strings.TrimSuffix(mode, "-once")
			}
		}
		if stuck {
			act = "stuck"
		}
		switch act {
		case "stuck":
			// Stuck in the driver: it reads nothing more, writes nothing,
			// keeps its pipes, and does not exit until the test kills it
			// for real (the server's SIGKILL goes to the test's
			// killProcess, which leaves it pending) or the test is gone.
			atGate(false)
			for os.Getppid() == server {
				time.Sleep(50 * time.Millisecond)
			}
			return 0
		case "hang":
			atGate(false)    // the test knows the run is in flight
			collectGarbage() // all that the hung worker no longer holds is gone
			io.Copy(io.Discard, req)
			return 0 // hung, saying nothing, until the server hung up
		case "garbage":
			rep.Write([]byte("this is not a frame at all, just text on the wire"))
			io.Copy(io.Discard, req)
			return 0
		case "fatal", "fatal-hang":
			worker.WriteJSON(rep, worker.TypeFail, worker.Fail{ID: run.ID, Error: "the CUDA context is poisoned", Fatal: true})
			if act == "fatal" {
				return 4 // as the worker does after a fatal failure
			}
			io.Copy(io.Discard, req) // it said it would exit, and hangs instead
			return 0
		case "fail":
			worker.WriteJSON(rep, worker.TypeFail, worker.Fail{ID: run.ID, Error: "out of device memory: the run needs 9 GiB"})
			continue
		case "gated":
			atGate(true) // the run is in flight until the test lets it go
		}
		v, _ := url.ParseQuery(run.Query)
		fr, _ := kernels.ParseRun(v)
		c := fr.Config()
		h := c.Header(instrument.SourceGPU, "Fake GPU, driver 0.0")
		head, _ := instrument.AppendHeader(nil, &h)
		worker.WriteFrame(rep, worker.TypeChunk, head)
		if act == "crash" {
			os.Exit(2) // mid-run, as a poisoned CUDA context would end it
		}
		n := 0
		kernels.RunMirror(context.Background(), fr, func(r *instrument.Record) error {
			b, _ := instrument.AppendRecord(nil, &h, r)
			n++
			return worker.WriteFrame(rep, worker.TypeChunk, b)
		})
		worker.WriteJSON(rep, worker.TypeDone, worker.Done{ID: run.ID, Records: n})
		if mode == "exit-after-run" {
			atGate(true) // until the test has the run's end: the server is idle
			os.Exit(3)   // dies between runs, as a killed or crashed worker would
		}
	}
}

// collectGarbage runs the GC and waits until the finalizers it queued have
// run: a file the worker no longer holds is closed by then. Finalizers run
// on one goroutine, those of one collection before those of a later one
// (within one, in no set order): once the second round's sentinel has run,
// the first round's finalizers all have.
func collectGarbage() {
	for range 2 {
		ran := make(chan struct{})
		// Unreachable at once, and not a tiny allocation: its finalizer runs.
		runtime.SetFinalizer(new([64]byte), func(*[64]byte) { close(ran) })
		runtime.GC()
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			return
		}
	}
}

// atGate is the fake worker at the test's gate, a FIFO (FLASHSTEP_FAKE_GATE;
// none: it goes on at once). Opening it waits until the test opens its end,
// so the test knows where the worker is; with wait, it then reads until the
// test closes that end, so the test says when the worker goes on.
func atGate(wait bool) {
	path := os.Getenv("FLASHSTEP_FAKE_GATE")
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	if wait {
		io.Copy(io.Discard, f)
	}
	f.Close()
}

// newGate makes a gate for the fake worker and adds it to opts.Env.
func newGate(t *testing.T, opts *GPUOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	opts.Env = append(opts.Env, "FLASHSTEP_FAKE_GATE="+path)
	return path
}

// arrive waits until the fake worker is at the gate and returns the test's
// end of it: closing it lets a waiting worker go on.
func arrive(t *testing.T, gate string) *os.File {
	t.Helper()
	type opening struct {
		f   *os.File
		err error
	}
	opened := make(chan opening, 1)
	go func() {
		f, err := os.OpenFile(gate, os.O_WRONLY, 0) // returns once the worker opens its end
		opened <- opening{f, err}
	}()
	select {
	case o := <-opened:
		if o.err != nil {
			t.Fatal(o.err)
		}
		t.Cleanup(func() { o.f.Close() })
		return o.f
	case <-time.After(10 * time.Second):
		t.Fatal("the fake worker did not reach its gate in 10 s")
		return nil
	}
}

// eventually waits for cond, an event the GPU runner gives no signal of
// (a run taken into its queue, a worker replaced), failing the test after
// 10 s. It only waits: what a test asserts is asserted after it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

func startFake(t *testing.T, mode string, opts GPUOptions) (*GPU, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.Worker = self
	opts.Env = append(opts.Env, "FLASHSTEP_FAKE_WORKER="+mode, "FLASHSTEP_FAKE_STATE="+filepath.Join(t.TempDir(), "state"))
	g, err := StartGPU(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		t.Cleanup(g.Close)
	}
	return g, err
}

var toy = kernels.Config{Variant: instrument.VariantFlash2, N: 8, D: 4, Br: 2, Bc: 2, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal, Seed: 3}

// collect runs c, checked as a request's run is, on r and gathers its trace.
func collect(ctx context.Context, r Runner, c kernels.Config) ([]byte, error) {
	run, err := c.Check()
	if err != nil {
		return nil, err
	}
	var buf []byte
	err = r.Run(ctx, run, func(b []byte) error { buf = append(buf, b...); return nil })
	return buf, err
}

func TestNoGPUMeansCPUMode(t *testing.T) {
	t.Parallel()
	if _, err := startFake(t, "nogpu", GPUOptions{}); !errors.Is(err, ErrNoGPU) {
		t.Fatalf("a worker that exits at start-up: %v", err)
	}
	if _, err := StartGPU(GPUOptions{Worker: "/no/such/gpuworker"}, slog.Default()); !errors.Is(err, ErrNoGPU) {
		t.Fatalf("a missing worker: %v", err)
	}
}

func TestGPURunStreamsTrace(t *testing.T) {
	t.Parallel()
	g, err := startFake(t, "ok", GPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Hello().GPU != "Fake GPU" || g.Engine().Source != instrument.SourceGPU {
		t.Fatalf("hello %+v", g.Hello())
	}
	got, err := collect(context.Background(), g, toy)
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(got))
	if err != nil || len(recs) != h.Records || h.Source != instrument.SourceGPU {
		t.Fatalf("%v: %d records", err, len(recs))
	}
}

func TestWorkerCrashMidRunFailsOnlyThatRun(t *testing.T) {
	t.Parallel()
	g, err := startFake(t, "crash-once", GPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(context.Background(), g, toy)
	var we *problem.Error
	if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "died during the run") || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("crash mid-run: %v", err)
	}
	if _, err := collect(context.Background(), g, toy); err != nil {
		t.Fatalf("the run after the crash: %v", err)
	}
	if n, why := g.Status(); n != 1 || !strings.Contains(why, "died") {
		t.Fatalf("status after one crash: %d %q", n, why)
	}
	if !strings.Contains(g.Engine().Detail, "restarted 1 times") {
		t.Errorf("the page is not told of the restart: %s", g.Engine().Detail)
	}
}

// A worker that dies between runs is replaced before the next run needs it:
// that run must not fail.
func TestWorkerDeathBetweenRunsIsRepaired(t *testing.T) {
	t.Parallel()
	var opts GPUOptions
	gate := newGate(t, &opts)
	g, err := startFake(t, "exit-after-run", opts)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		c := toy
		c.Seed = uint64(500 + k)
		if _, err := collect(context.Background(), g, c); err != nil {
			t.Fatalf("run %d after a worker died idle: %v", k, err)
		}
		arrive(t, gate).Close() // the worker, idle, exits; the GPU runner replaces it
		eventually(t, fmt.Sprintf("worker %d to be replaced", k+1), func() bool { n, _ := g.Status(); return n == k+1 })
	}
	if n, why := g.Status(); n != 3 || !strings.Contains(why, "between runs") {
		t.Fatalf("status: %d restarts, %q", n, why)
	}
}

func TestWorkerHangIsCutOff(t *testing.T) {
	t.Parallel()
	g, err := startFake(t, "hang", GPUOptions{IdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = collect(context.Background(), g, toy)
	if err == nil || !strings.Contains(err.Error(), "stopped answering") || time.Since(start) > 5*time.Second {
		t.Fatalf("hang: %v after %v", err, time.Since(start))
	}
}

func TestWorkerGarbageIsCutOff(t *testing.T) {
	t.Parallel()
	g, err := startFake(t, "garbage", GPUOptions{IdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(context.Background(), g, toy)
	var we *problem.Error
	if !isWorkerError(err, &we) {
		t.Fatalf("garbage: %v", err)
	}
}

func TestWorkerFailureIsNotACrash(t *testing.T) {
	t.Parallel()
	g, err := startFake(t, "fail", GPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(context.Background(), g, toy)
	var re *problem.Error
	if !errors.As(err, &re) || re.Code != problem.Unprocessable || !strings.Contains(err.Error(), "out of device memory") {
		t.Fatalf("failed run: %v", err)
	}
	if n, _ := g.Status(); n != 0 {
		t.Fatalf("a refused run restarted the worker %d times", n)
	}
}

// within waits at most 10 s for a run's end: a run still going then has
// hung, and the test fails rather than hang with it.
func within(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still running after 10 s", what)
		return nil
	}
}

// A fatal failure ends the worker: the run fails saying why and the next run
// gets a fresh worker. A worker that says it will exit and then does not is
// ended after ExitTimeout: the dispatcher does not wait for it for good.
func TestFatalFailureReplacesTheWorker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode  string
		exit  time.Duration // ExitTimeout
		hangs bool
	}{
		{"fatal-once", time.Minute, false},                // it exits: no waiting for the timeout
		{"fatal-hang-once", 200 * time.Millisecond, true}, // it does not exit: ended
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			g, err := startFake(t, tc.mode, GPUOptions{ExitTimeout: tc.exit})
			if err != nil {
				t.Fatal(err)
			}
			run := func(seed uint64) <-chan error {
				c := toy
				c.Seed = seed
				done := make(chan error, 1)
				go func() { _, err := collect(context.Background(), g, c); done <- err }()
				return done
			}
			err = within(t, "the run that failed fatally", run(700))
			var we *problem.Error
			if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "the run failed on the GPU: the CUDA context is poisoned") ||
				strings.Contains(err.Error(), "did not exit") != tc.hangs || strings.Contains(err.Error(), "died") {
				t.Fatalf("the fatal failure: %v", err)
			}
			if err := within(t, "the run after the fatal failure", run(701)); err != nil {
				t.Fatalf("the run after the fatal failure: %v", err)
			}
			if n, why := g.Status(); n != 1 || !strings.Contains(why, "poisoned") {
				t.Fatalf("status: %d restarts, %q", n, why)
			}
		})
	}
}

// A worker whose exit is noticed while a run is being taken from the queue
// is replaced before that run, which does not fail. The test holds the
// moment open: it marks a run in flight, as the dispatcher does on taking
// one, before the worker exits.
func TestWorkerDeathAsARunIsTakenIsRepaired(t *testing.T) {
	t.Parallel()
	var opts GPUOptions
	gate := newGate(t, &opts)
	g, err := startFake(t, "exit-after-run", opts)
	if err != nil {
		t.Fatal(err)
	}
	c := toy
	c.Seed = 800
	if _, err := collect(context.Background(), g, c); err != nil {
		t.Fatal(err)
	}
	g.procMu.Lock()
	p := g.proc
	g.procMu.Unlock()
	g.inFlight.Store(1)     // a run is being taken
	arrive(t, gate).Close() // the worker, idle, exits
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not exit in 10 s")
	}
	c.Seed = 801
	if _, err := collect(context.Background(), g, c); err != nil {
		t.Fatalf("the run taken as the worker died: %v", err)
	}
	if n, why := g.Status(); n != 1 || !strings.Contains(why, "between runs") {
		t.Fatalf("status: %d restarts, %q", n, why)
	}
	arrive(t, gate).Close() // the second worker exits too; the GPU runner replaces it
}

// spawn closes the pipes it made when it cannot make the next: the test
// leaves room for one pipe, so the second fails, and compares the open
// files before and after. Not parallel: it lowers the process's file limit.
func TestSpawnClosesItsPipesWhenOneFails(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	// No collection while the test counts files: one would close a leaked
	// file through its finalizer and hide the leak.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	r, w, err := os.Pipe() // the poller's own files are made by now
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	before := openFDs(t)
	// Room for two more files: the third lowest free descriptor is the limit.
	var free []uint64
	for fd := uint64(0); len(free) < 3; fd++ {
		if !before[fd] {
			free = append(free, fd)
		}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = free[2]
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	g := &GPU{opts: GPUOptions{Worker: "/no/such/gpuworker"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, _, err = g.spawn()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("spawn with room for one pipe: %v", err)
	}
	after := openFDs(t)
	for fd := range after {
		if !before[fd] {
			t.Errorf("fd %d is left open", fd)
		}
	}
}

// openFDs is the set of this process's open file descriptors.
func openFDs(t *testing.T) map[uint64]bool {
	t.Helper()
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	fds := map[uint64]bool{}
	for _, name := range names {
		fd, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if fd != uint64(dir.Fd()) { // not the listing's own
			fds[fd] = true
		}
	}
	return fds
}

func TestQueueFullSaysHowManyAhead(t *testing.T) {
	t.Parallel()
	opts := GPUOptions{QueueLength: 1}
	gate := newGate(t, &opts)
	g, err := startFake(t, "gated", opts)
	if err != nil {
		t.Fatal(err)
	}
	start := func(k int) <-chan error {
		c := toy
		c.Seed = uint64(100 + k) // no cache hits
		done := make(chan error, 1)
		go func() { _, err := collect(context.Background(), g, c); done <- err }()
		return done
	}
	first := start(0)
	inFlight := arrive(t, gate) // the first run is on the worker
	second := start(1)
	eventually(t, "the second run to be queued", func() bool { return len(g.queue) == 1 })
	// One in flight, one queued: the third is refused at once.
	_, err = collect(context.Background(), g, toy)
	var busy *problem.Error
	if !errors.As(err, &busy) || busy.Code != problem.Busy || busy.Ahead != 2 || err.Error() != "busy: GPU busy, 2 runs ahead of you" {
		t.Fatalf("the third run: %v", err)
	}
	inFlight.Close()
	if err := <-first; err != nil {
		t.Fatalf("the first run: %v", err)
	}
	arrive(t, gate).Close()
	if err := <-second; err != nil {
		t.Fatalf("the queued run: %v", err)
	}
}

func TestRouter(t *testing.T) {
	t.Parallel()
	recs, err := LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{NoGPU: "no worker", Recordings: recs}
	// A recorded run is replayed byte for byte.
	rec := recs.All()[0]
	got, err := collect(context.Background(), r, rec.Config)
	if err != nil || !bytes.Equal(got, rec.data) {
		t.Fatalf("replay of %s: %v", rec.Name, err)
	}
	// Any other run comes from the mirror.
	c := toy
	c.Seed = 987654321
	got, err = collect(context.Background(), r, c)
	if h, _, derr := instrument.ReadAll(bytes.NewReader(got)); err != nil || derr != nil || h.Source != instrument.SourceCPUMirror {
		t.Fatalf("mirror run: %v %v", err, derr)
	}
	// engine=cpu bypasses a recording.
	c = rec.Config
	c.Engine = instrument.SourceCPUMirror
	got, err = collect(context.Background(), r, c)
	if h, _, derr := instrument.ReadAll(bytes.NewReader(got)); err != nil || derr != nil || h.Source != instrument.SourceCPUMirror {
		t.Fatalf("engine=cpu: %v %v", err, derr)
	}
	// engine=gpu and timing mode need a GPU, and say so by field.
	c.Engine = instrument.SourceGPU
	var fe kernels.FieldErrors
	if _, err := collect(context.Background(), r, c); !errors.As(err, &fe) || fe[0].Field != kernels.FieldEngine {
		t.Fatalf("engine=gpu without a GPU: %v", err)
	}
	c = toy
	c.Timing = true
	if _, err := collect(context.Background(), r, c); !errors.As(err, &fe) || fe[0].Field != kernels.FieldMode || !strings.Contains(fe[0].Message, "recorded timelines") {
		t.Fatalf("timing without a GPU: %v", err)
	}
	// A roles run that no recording holds: refused for roles, not timing.
	c = kernels.Config{Variant: instrument.VariantFlash3WS, N: 256, D: 64, Br: 128, Bc: 128, Batch: 1, Heads: 1,
		Pattern: instrument.PatternNormal, Seed: 5, Timing: true, Roles: true}
	if _, err := collect(context.Background(), r, c); !errors.As(err, &fe) || fe[0].Field != kernels.FieldMode || !strings.HasPrefix(fe[0].Message, "roles mode needs the GPU") {
		t.Fatalf("roles without a GPU: %v", err)
	}
	if e := r.Engine(); e.Source != instrument.SourceCPUMirror || !strings.Contains(e.Detail, "H100") {
		t.Fatalf("engine %+v", e)
	}
}

// A shutdown does not wait for a kernel: Close ends a worker whose run is
// in flight after a second, and the run fails saying why.
func TestCloseDoesNotWaitForARunInFlight(t *testing.T) {
	t.Parallel()
	opts := GPUOptions{IdleTimeout: time.Minute}
	gate := newGate(t, &opts)
	g, err := startFake(t, "hang", opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := collect(context.Background(), g, toy); done <- err }()
	arrive(t, gate) // the run is on the worker, which will never answer
	start := time.Now()
	g.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v", took)
	}
	var we *problem.Error
	if err := <-done; !isWorkerError(err, &we) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("the run in flight: %v", err)
	}
}

// A worker the server ends is not a worker that died: the reason the server
// recorded when it decided to end it is what the run is told, not the
// closed pipe that follows. Close ends a worker whose run is still in flight
// a second later from its own goroutine, and the run learns of it only by
// the worker's pipe closing: the closed pipe always comes first here.
func TestWorkerEndedByTheServerIsNotReportedDead(t *testing.T) {
	t.Parallel()
	opts := GPUOptions{IdleTimeout: time.Minute}
	gate := newGate(t, &opts)
	g, err := startFake(t, "hang", opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := collect(context.Background(), g, toy); done <- err }()
	arrive(t, gate) // the run is on the worker, which will never answer
	g.Close()
	err = <-done
	var we *problem.Error
	if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "still in flight") || strings.Contains(err.Error(), "died") {
		t.Fatalf("the run the shutdown cut off: %v", err)
	}
	if _, why := g.Status(); !strings.Contains(why, "still in flight") || strings.Contains(why, "died") {
		t.Fatalf("the status says %q", why)
	}
}

// pendingKills stands in for a kernel that leaves SIGKILL pending, as it
// does for a worker in uninterruptible sleep in the driver: the server's
// kill (GPUOptions.killProcess) does nothing, and the worker lives on,
// holding its pipes. Everything the server waits on is real. The test kills
// a worker for real when the driver would let it go, and all of them when
// it is done (releaseAll).
type pendingKills struct {
	mu    sync.Mutex
	procs []*os.Process
}

func newPendingKills(opts *GPUOptions) *pendingKills {
	k := &pendingKills{}
	opts.killProcess = func(p *os.Process) error {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.procs = append(k.procs, p)
		return nil
	}
	return k
}

// releaseAll kills every worker the server has killed, for real. A test
// registers it after startFake, so that it runs before the GPU runner's
// Close: a test that failed because the server waits on a stuck worker for
// good then still ends.
func (k *pendingKills) releaseAll() {
	for _, p := range k.pending() {
		p.Kill()
	}
}

// pending is the workers the server has killed, in order.
func (k *pendingKills) pending() []*os.Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*os.Process(nil), k.procs...)
}

// goCollect runs toy, with seed, on g in the background.
func goCollect(g *GPU, seed uint64) <-chan error {
	c := toy
	c.Seed = seed // no cache hits
	done := make(chan error, 1)
	go func() { _, err := collect(context.Background(), g, c); done <- err }()
	return done
}

// abandonedWorkers is how many killed workers g has abandoned that have
// not exited.
func abandonedWorkers(g *GPU) int {
	g.procMu.Lock()
	defer g.procMu.Unlock()
	return g.abandoned
}

// A worker stuck in the driver outlives its SIGKILL. The server waits
// KillTimeout for it, not for good, and abandons it: the run on it fails
// saying so, the next run gets a fresh worker, both well within the bound,
// and the abandoned worker is still reaped when it exits at last.
func TestWorkerThatOutlivesItsKillIsAbandoned(t *testing.T) {
	t.Parallel()
	opts := GPUOptions{IdleTimeout: 300 * time.Millisecond, KillTimeout: 500 * time.Millisecond}
	g, kills, gate := startStuck(t, "stuck-once", opts)
	var err error
	g.procMu.Lock()
	stuck := g.proc
	g.procMu.Unlock()
	done := goCollect(g, 900)
	arrive(t, gate) // the run is on the worker, which is stuck for good
	start := time.Now()
	err = within(t, "the run on the stuck worker", done)
	// What the run waits for is IdleTimeout then KillTimeout; the rest is
	// room for a loaded machine.
	bound := opts.IdleTimeout + opts.KillTimeout + 3*time.Second
	var we *problem.Error
	if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "stopped answering") ||
		!strings.Contains(err.Error(), "did not exit within 500ms of SIGKILL and was abandoned") {
		t.Fatalf("the run on the stuck worker: %v", err)
	}
	if took := time.Since(start); took > bound {
		t.Fatalf("the run on the stuck worker failed after %v, past %v", took, bound)
	}
	select {
	case <-stuck.exited:
		t.Fatalf("the stuck worker exited (%v): the test modelled nothing", stuck.exit)
	default:
	}
	if p := kills.pending(); len(p) != 1 || p[0] != stuck.cmd.Process {
		t.Fatalf("the server killed %d workers, want the stuck one", len(p))
	}
	if n := abandonedWorkers(g); n != 1 {
		t.Fatalf("%d workers abandoned", n)
	}

	start = time.Now()
	if err := within(t, "the run after the abandoned worker", goCollect(g, 901)); err != nil {
		t.Fatalf("the run after the abandoned worker: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the run after the abandoned worker took %v", took)
	}
	if n, why := g.Status(); n != 1 || !strings.Contains(why, "abandoned") {
		t.Fatalf("status: %d restarts, %q", n, why)
	}

	stuck.cmd.Process.Kill() // the driver lets it go
	select {
	case <-stuck.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned worker was not reaped in 10 s after it could exit")
	}
	eventually(t, "the abandoned worker to be counted off", func() bool { return abandonedWorkers(g) == 0 })
}

// Workers that outlive their SIGKILL one after another are not replaced
// without end: with maxAbandoned of them stuck, a run is told at once that
// the GPU worker is unavailable, and once one of them exits the next run
// gets a fresh worker.
func TestStuckWorkersMakeTheGPUUnavailable(t *testing.T) {
	t.Parallel()
	if maxAbandoned != 2 {
		t.Fatalf("maxAbandoned is %d: the fake worker's mode stuck-twice must match it", maxAbandoned)
	}
	opts := GPUOptions{IdleTimeout: 300 * time.Millisecond, KillTimeout: 300 * time.Millisecond}
	g, kills, gate := startStuck(t, "stuck-twice", opts)
	var err error
	var we *problem.Error
	for k := range maxAbandoned {
		done := goCollect(g, uint64(910+k))
		arrive(t, gate) // the run is on a worker that is stuck for good
		err := within(t, fmt.Sprintf("the run on stuck worker %d", k+1), done)
		if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "was abandoned") {
			t.Fatalf("the run on stuck worker %d: %v", k+1, err)
		}
		if last := k == maxAbandoned-1; strings.Contains(err.Error(), "GPU worker unavailable") != last || (we.Code == problem.Unavailable) != last {
			t.Fatalf("the run on stuck worker %d (unavailable only after the last): %v (Unavailable %t)", k+1, err, (we.Code == problem.Unavailable))
		}
	}
	start := time.Now()
	err = within(t, "a run with every worker stuck", goCollect(g, 920))
	if !isWorkerError(err, &we) || !(we.Code == problem.Unavailable) || !strings.HasPrefix(err.Error(), "GPU worker unavailable: 2 GPU workers did not exit when killed") {
		t.Fatalf("a run with every worker stuck: %v (Unavailable %t)", err, (we.Code == problem.Unavailable))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a run with every worker stuck was refused after %v, not at once", took)
	}
	if p := kills.pending(); len(p) != maxAbandoned {
		t.Fatalf("the server killed %d workers, want %d", len(p), maxAbandoned)
	}

	kills.pending()[0].Kill() // the driver lets the first go
	eventually(t, "the first stuck worker to be counted off", func() bool { return abandonedWorkers(g) == maxAbandoned-1 })
	if err := within(t, "the run after a stuck worker exited", goCollect(g, 921)); err != nil {
		t.Fatalf("the run after a stuck worker exited: %v", err)
	}
}

// A shutdown does not wait for a worker stuck in the driver either. Close
// ends the worker of a run still in flight a second later; no closed pipe
// tells the run, which sees that the worker was ended and ends it, waiting
// KillTimeout for its exit, no more.
func TestCloseDoesNotWaitForAWorkerThatOutlivesItsKill(t *testing.T) {
	t.Parallel()
	opts := GPUOptions{IdleTimeout: time.Minute, KillTimeout: 500 * time.Millisecond}
	g, _, gate := startStuck(t, "stuck-once", opts)
	var err error
	done := goCollect(g, 930)
	arrive(t, gate) // the run is on the worker, which is stuck for good
	start := time.Now()
	closed := make(chan error, 1)
	go func() { g.Close(); closed <- nil }()
	within(t, "Close", closed)
	if took, bound := time.Since(start), time.Second+opts.KillTimeout+3*time.Second; took > bound {
		t.Fatalf("Close took %v, past %v", took, bound)
	}
	err = within(t, "the run the shutdown cut off", done)
	var we *problem.Error
	if !isWorkerError(err, &we) || !strings.Contains(err.Error(), "shutting down") || !strings.Contains(err.Error(), "still in flight") ||
		!strings.Contains(err.Error(), "was abandoned") {
		t.Fatalf("the run the shutdown cut off: %v", err)
	}
}

// startStuck starts the fake worker in one of its stuck modes, with the
// kills it is sent left pending (released, for real, when the test ends)
// and a gate that holds its runs.
func startStuck(t *testing.T, mode string, opts GPUOptions) (*GPU, *pendingKills, string) {
	t.Helper()
	kills := newPendingKills(&opts)
	gate := newGate(t, &opts)
	g, err := startFake(t, mode, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kills.releaseAll)
	return g, kills, gate
}

// isWorkerError says whether err is a run lost to the worker
// (problem.Lost) or refused because no worker can run it now
// (problem.Unavailable), and sets we to it.
func isWorkerError(err error, we **problem.Error) bool {
	return errors.As(err, we) && ((*we).Code == problem.Lost || (*we).Code == problem.Unavailable)
}
