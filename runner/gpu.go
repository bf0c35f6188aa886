package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/problem"
	"flashstep/worker"
)

// GPU runs traces on the GPU through the worker process (cmd/gpuworker),
// which it starts, watches and restarts. One GPU serves many browsers: runs
// wait in a bounded queue and a full queue refuses (problem.Busy). Identical
// runs are computed once by the server's shared computations (package runs),
// keyed by the run, the kernels' PTX hash and the GPU's name and driver
// (Route's Key).
//
// A worker that dies, hangs or talks garbage fails only the run in flight,
// with a message that says so, and is replaced; the server goes on. No wait
// on a worker is unbounded: one that outlives its SIGKILL (stuck in the
// driver) is abandoned after KillTimeout, and a worker is started outside
// procMu, so neither holds up the dispatcher, Close or the next run.
type GPU struct {
	opts  GPUOptions
	log   *slog.Logger
	queue chan *gpuJob
	hello worker.Hello

	inFlight atomic.Int32
	nextID   atomic.Uint64

	// procMu guards the fields below it. It is never held across a wait
	// on a worker: not its start (start), not its exit (kill).
	procMu    sync.Mutex
	proc      *process
	held      *process // the worker a run has taken (take), until release
	starting  *start   // the worker being started, until it is proc or has failed
	abandoned int      // workers killed that have not exited (kill), at most maxAbandoned

	statMu   sync.Mutex // guards restarts and crash
	restarts int
	crash    string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// GPUOptions configure the GPU runner.
type GPUOptions struct {
	Worker       string   // the worker binary
	Args         []string // its arguments (tests use them)
	Env          []string // added to its environment
	QueueLength  int      // runs that may wait (default 8)
	HelloTimeout time.Duration
	IdleTimeout  time.Duration // a run's longest silence before the worker counts as hung
	ExitTimeout  time.Duration // how long a worker that reported a fatal failure has to exit before it is ended (default 5 s)
	KillTimeout  time.Duration // how long a killed worker has to exit before it is abandoned (default 5 s)

	// killProcess sends a worker SIGKILL (nil: os.Process.Kill). A test's
	// stands in for a kernel that leaves the signal pending: a worker in
	// uninterruptible sleep in the driver, alive and holding its pipes.
	killProcess func(*os.Process) error
}

// maxAbandoned is how many killed workers that have not exited the GPU
// runner leaves behind before it starts no more: a worker that outlives
// SIGKILL is stuck in the driver, and so will its replacements likely be,
// each holding what it held of the GPU. Past it the GPU is unavailable, and
// says so, until one of them exits.
const maxAbandoned = 2

// ErrNoGPU says the worker found no usable GPU: run on the CPU.
var ErrNoGPU = errors.New("no GPU")

// gpuBusy refuses a run when the queue is full (problem.Busy), saying how
// many runs are ahead.
func gpuBusy(ahead int) error {
	return &problem.Error{Code: problem.Busy, Message: fmt.Sprintf("GPU busy, %d runs ahead of you", ahead), Ahead: ahead}
}

// A run lost to the worker process itself (it crashed, hung or broke the
// protocol, and the worker has been replaced) is a problem.Lost: the client
// may run it again now. A run refused because no worker can run it now
// (none would start, two are stuck in the driver, the server is shutting
// down) is a problem.Unavailable: the client may try again later.
func workerLost(msg string) error        { return problem.New(problem.Lost, msg) }
func workerUnavailable(msg string) error { return problem.New(problem.Unavailable, msg) }

type gpuJob struct {
	ctx   context.Context
	c     kernels.Config
	emit  func([]byte) error
	bench *worker.Bench // a timing instead of a trace
	timed worker.Timed
	done  chan error
}

// process is one running worker.
type process struct {
	cmd     *exec.Cmd
	req     io.WriteCloser // its fd 3
	rep     *os.File       // the server's end of its fd 4, which the reader owns until drop
	frames  chan frame     // what it sends, until it closes or the server drops it
	exited  chan struct{}
	exit    error
	ended   atomic.Bool            // the server ended it (lost, Close): no surprise
	why     atomic.Pointer[string] // why the server ended it, its first reason (end)
	endedC  chan struct{}          // closed by the first end
	endOnce sync.Once

	dropped  chan struct{} // closed by drop: no one reads frames any more
	dropOnce sync.Once

	abandoned bool // killed, not exited, counted in GPU.abandoned; guarded by procMu
}

// start is a worker being started (GPU.start); done is closed when it is
// GPU.proc or has failed with err.
type start struct {
	done chan struct{}
	err  error
}

// end records that the server is ending p and why, before it does anything
// that ends it, and returns the reason that stands: the first recorded. The
// worker's pipe closes because of what the server did, and the run in
// flight may see that first (Close ends the worker from its own goroutine):
// runOne then reports this reason, not a death. A worker already seen to
// have exited ended on its own: nothing is recorded, it died.
func (p *process) end(why string) string {
	p.ended.Store(true)
	defer p.endOnce.Do(func() { close(p.endedC) })
	select {
	case <-p.exited:
	default:
		p.why.CompareAndSwap(nil, &why)
	}
	if w := p.why.Load(); w != nil {
		return *w
	}
	return why
}

// endedWhy is why the server ended p, or "" while it has not.
func (p *process) endedWhy() string {
	if w := p.why.Load(); w != nil {
		return *w
	}
	return ""
}

type frame struct {
	t       worker.Type
	payload []byte
	err     error
}

// StartGPU starts the worker and waits for its hello. It returns ErrNoGPU
// (wrapped) when the worker is missing or exits before saying hello: a
// machine without a GPU, not a crash to retry.
func StartGPU(opts GPUOptions, log *slog.Logger) (*GPU, error) {
	if opts.QueueLength <= 0 {
		opts.QueueLength = 8
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 2 * time.Minute // the first load JIT-compiles the PTX
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = time.Minute
	}
	if opts.ExitTimeout <= 0 {
		opts.ExitTimeout = 5 * time.Second
	}
	if opts.KillTimeout <= 0 {
		opts.KillTimeout = 5 * time.Second
	}
	if _, err := os.Stat(opts.Worker); err != nil {
		return nil, fmt.Errorf("%w: the GPU worker is not built, no %s beside the server: make gpu builds it", ErrNoGPU, filepath.Base(opts.Worker))
	}
	// Said before the wait, which on a machine's first start is about a
	// minute: the driver compiles every module's PTX before the hello.
	log.Info("starting the GPU worker: on a machine's first start the driver compiles every kernel's PTX first, about a minute", "worker", opts.Worker)
	g := &GPU{opts: opts, log: log, queue: make(chan *gpuJob, opts.QueueLength),
		stop: make(chan struct{}), done: make(chan struct{})}
	p, hello, err := g.spawn()
	if err != nil {
		return nil, err
	}
	g.procMu.Lock() // the worker may already have exited: exited reads proc
	g.proc, g.hello = p, hello
	g.procMu.Unlock()
	go g.dispatch()
	return g, nil
}

// Hello is what the worker said of its GPU and kernels.
func (g *GPU) Hello() worker.Hello { return g.hello }

// Status says how the worker has fared, for the page.
func (g *GPU) Status() (restarts int, lastCrash string) {
	g.statMu.Lock()
	defer g.statMu.Unlock()
	return g.restarts, g.crash
}

func (g *GPU) Engine() Engine {
	h := g.hello
	detail := fmt.Sprintf("Runs on this server's %s (driver %s, %d SMs): the CUDA kernels themselves, their PTX %s.", h.GPU, h.Driver, h.SMs, h.PTXHash)
	if n, crash := g.Status(); n > 0 {
		detail += fmt.Sprintf(" The GPU worker has been restarted %d times; last: %s.", n, crash)
	}
	return Engine{Source: instrument.SourceGPU, Name: h.GPU, Detail: detail, Short: "runs on this server's " + h.GPU + "."}
}

// spawn starts a worker and reads its hello. It waits at most HelloTimeout,
// and ends the worker when the server shuts down meanwhile.
func (g *GPU) spawn() (*process, worker.Hello, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, worker.Hello{}, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, worker.Hello{}, err
	}
	cmd := exec.Command(g.opts.Worker, g.opts.Args...)
	cmd.Env = append(os.Environ(), g.opts.Env...)
	cmd.ExtraFiles = []*os.File{reqR, repW} // fds 3 and 4
	logw := &lineLogger{log: g.log}
	cmd.Stdout, cmd.Stderr = logw, logw // the CUDA library prints on stdout
	// Wait returns this long after the worker exits even when a process it
	// started still holds its output: exited means the worker exited.
	cmd.WaitDelay = g.opts.KillTimeout
	if err := cmd.Start(); err != nil {
		reqR.Close()
		reqW.Close()
		repR.Close()
		repW.Close()
		return nil, worker.Hello{}, fmt.Errorf("%w: starting the GPU worker: %v", ErrNoGPU, err)
	}
	reqR.Close()
	repW.Close()
	p := &process{cmd: cmd, req: reqW, rep: repR, frames: make(chan frame, 16), exited: make(chan struct{}),
		endedC: make(chan struct{}), dropped: make(chan struct{})}
	go func() {
		defer repR.Close()
		r := bufio.NewReaderSize(repR, 1<<20)
		for {
			t, payload, err := worker.ReadFrame(r)
			select {
			case p.frames <- frame{t, payload, err}:
			case <-p.dropped:
				return // no one reads: what is left is the server's no more
			}
			if err != nil {
				close(p.frames)
				return
			}
		}
	}()
	go func() {
		p.exit = cmd.Wait()
		close(p.exited)
		g.exited(p)
	}()
	timer := time.NewTimer(g.opts.HelloTimeout)
	defer timer.Stop()
	select {
	case f := <-p.frames:
		if f.err != nil {
			// It closed its pipe: it is exiting, most likely for want of a
			// GPU. One that does not exit is ended (kill: not waited on for
			// long either).
			select {
			case <-p.exited:
				return nil, worker.Hello{}, fmt.Errorf("%w: the GPU worker exited at start-up, %v", ErrNoGPU, p.exit)
			case <-time.After(g.opts.ExitTimeout):
				why := g.kill(p, fmt.Sprintf("the GPU worker closed its pipe at start-up and did not exit within %v, so it was ended", g.opts.ExitTimeout))
				return nil, worker.Hello{}, fmt.Errorf("%w: %s", ErrNoGPU, why)
			}
		}
		var hello worker.Hello
		if f.t != worker.TypeHello || json.Unmarshal(f.payload, &hello) != nil {
			err := fmt.Errorf("the GPU worker did not say hello but sent a %s frame", f.t)
			return nil, worker.Hello{}, errors.New(g.kill(p, err.Error()))
		}
		return p, hello, nil
	case <-timer.C:
		err := fmt.Errorf("the GPU worker said nothing for %v at start-up", g.opts.HelloTimeout)
		return nil, worker.Hello{}, errors.New(g.kill(p, err.Error()))
	case <-g.stop:
		return nil, worker.Hello{}, errors.New(g.kill(p, "the server shut down as the GPU worker started"))
	}
}

// sendKill sends p SIGKILL.
func (g *GPU) sendKill(p *process) {
	if g.opts.killProcess != nil {
		g.opts.killProcess(p.cmd.Process)
		return
	}
	p.cmd.Process.Kill()
}

// kill ends p for why and waits at most KillTimeout for it to exit. It
// returns the reason that stands (end). A worker that outlives its SIGKILL
// is in uninterruptible sleep, in the driver most likely, and may stay
// there for long: it is abandoned, said in the reason returned and logged.
// Its Wait goes on in spawn's goroutine, which reaps it (no zombie) and
// counts it off whenever it exits; its pipes are closed here. kill is
// called without procMu, which it takes only to count.
func (g *GPU) kill(p *process, why string) string {
	why = p.end(why)
	p.req.Close()
	g.sendKill(p)
	timer := time.NewTimer(g.opts.KillTimeout)
	defer timer.Stop()
	defer p.drop()
	select {
	case <-p.exited:
		return why
	case <-timer.C:
	}
	g.procMu.Lock()
	select {
	case <-p.exited: // just now: nothing to count
		g.procMu.Unlock()
		return why
	default:
	}
	p.abandoned = true
	g.abandoned++
	n := g.abandoned
	g.procMu.Unlock()
	g.log.Error("GPU worker abandoned: it did not exit after SIGKILL", "pid", p.cmd.Process.Pid,
		"waited", g.opts.KillTimeout, "abandoned", n, "why", why)
	return why + fmt.Sprintf("; the GPU worker did not exit within %v of SIGKILL and was abandoned", g.opts.KillTimeout)
}

// drop says the server reads p's frames no more: its reader stops, and
// closes the server's end of the pipe, even while the worker (or a process
// it started) holds the other end.
func (p *process) drop() {
	p.dropOnce.Do(func() {
		close(p.dropped)
		p.rep.Close() // a Read blocked on it returns
	})
}

// exited is told by spawn's goroutine that p has exited. It counts off a
// worker that kill abandoned, and replaces a worker that exited on its own
// between runs, so that the next run finds a fresh one rather than a dead
// pipe. A worker that dies during a run is replaced by lost, which fails
// that run. Whether a run holds the worker is decided under procMu, as take
// decides it: a run taken as the worker exits either got it alive (its loss
// is the run's) or finds it replaced.
func (g *GPU) exited(p *process) {
	g.procMu.Lock()
	defer g.procMu.Unlock()
	if p.abandoned {
		p.abandoned = false
		g.abandoned--
		g.log.Warn("an abandoned GPU worker exited at last", "pid", p.cmd.Process.Pid, "exit", p.exit, "abandoned", g.abandoned)
	}
	if g.proc != p || g.held == p || p.ended.Load() {
		return
	}
	g.replaceExitedLocked(p)
	g.startLocked()
}

// replaceExitedLocked drops g.proc, p, which exited on its own while no run
// held it, and counts the restart. The caller holds procMu.
func (g *GPU) replaceExitedLocked(p *process) {
	g.proc = nil
	p.drop()
	why := "it exited"
	if p.exit != nil {
		why = p.exit.Error()
	}
	g.log.Error("GPU worker exited between runs", "why", why)
	g.statMu.Lock()
	g.restarts++
	g.crash = "the GPU worker exited between runs (" + why + ")"
	g.statMu.Unlock()
}

// startLocked starts a worker in the background, unless one is starting
// already, and returns that start; the caller holds procMu and waits for
// it, if at all, without. A start is refused at once when the server is
// shutting down or maxAbandoned workers are still stuck.
func (g *GPU) startLocked() *start {
	if g.starting != nil {
		return g.starting
	}
	s := &start{done: make(chan struct{})}
	switch {
	case g.stopped():
		s.err = workerUnavailable("the server is shutting down")
	case g.abandoned >= maxAbandoned:
		s.err = workerUnavailable(fmt.Sprintf("GPU worker unavailable: %d GPU workers did not exit when killed (stuck in the GPU driver?), and no new one is started until one does", g.abandoned))
	}
	if s.err != nil {
		close(s.done)
		return s
	}
	g.starting = s
	go g.start(s)
	return s
}

// start starts a worker for s (startLocked) and makes it proc. A worker
// that said hello as the server shut down is ended, and Close waits for
// that: it waits for the start it saw.
func (g *GPU) start(s *start) {
	defer close(s.done)
	p, hello, err := g.spawn()
	g.procMu.Lock()
	stopped := g.stopped()
	if err == nil && !stopped {
		g.proc = p
	}
	if err != nil || !stopped {
		g.starting = nil
	}
	g.procMu.Unlock()
	if err == nil && stopped {
		err = errors.New(g.kill(p, "the server shut down as the GPU worker started"))
		g.procMu.Lock()
		g.starting = nil
		g.procMu.Unlock()
	}
	if err != nil {
		g.log.Error("restarting the GPU worker", "err", err)
		s.err = workerUnavailable("GPU worker unavailable: it could not be restarted: " + err.Error())
		return
	}
	if hello.PTXHash != g.hello.PTXHash || hello.GPU != g.hello.GPU {
		g.log.Warn("the restarted GPU worker differs", "was", g.hello.GPU, "now", hello.GPU)
	}
}

func (g *GPU) stopped() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}

// Close stops the dispatcher and the worker. A run in flight gets a second
// to finish; then the worker is ended, which ends the run: a shutdown waits
// for no kernel, and for a worker that outlives its SIGKILL no more than
// KillTimeout.
func (g *GPU) Close() { g.closeOnce.Do(g.close) }

func (g *GPU) close() {
	close(g.stop) // from here no worker starts (startLocked, start)
	select {
	case <-g.done:
	case <-time.After(time.Second):
		g.procMu.Lock()
		p := g.proc
		g.procMu.Unlock()
		if p != nil {
			// The run sees it ended (runOne), even when its pipe stays
			// open, and ends it (lost, kill): the dispatcher is done in at
			// most KillTimeout.
			p.end("the run was still in flight a second later, so the GPU worker was ended")
			g.sendKill(p)
		}
		<-g.done
	}
	g.procMu.Lock()
	s := g.starting
	g.procMu.Unlock()
	if s != nil {
		<-s.done // it sees stop, and ends its worker (spawn, start)
	}
	g.procMu.Lock()
	p := g.proc
	g.proc = nil
	g.procMu.Unlock()
	if p == nil {
		return
	}
	p.end("the server is shutting down")
	p.req.Close() // the worker exits on EOF
	select {
	case <-p.exited:
		p.drop()
	case <-time.After(time.Second):
		g.kill(p, "the GPU worker did not exit when the server shut down")
	}
}

// Run queues r for the GPU and streams its trace to emit. A run the
// compiled kernels do not run, or whose trace offsets do not fit
// (launch.ValidateTraced), is refused. It returns a problem.Busy at once when
// the queue is full; otherwise it returns when the run is over, and never
// calls emit after.
func (g *GPU) Run(ctx context.Context, r kernels.Run, emit func([]byte) error) error {
	c := r.Config()
	if err := launch.ValidateTraced(&c); err != nil {
		return err
	}
	j := &gpuJob{ctx: ctx, c: c, emit: emit, done: make(chan error, 1)}
	select {
	case g.queue <- j:
	default:
		return gpuBusy(len(g.queue) + int(g.inFlight.Load()))
	}
	return <-j.done
}

// runKey names the numbers a run on this GPU produces: the run, the PTX
// that computes it, the GPU and its driver.
func (g *GPU) runKey(c *kernels.Config) string {
	return strings.Join([]string{c.Key(), g.hello.PTXHash, g.hello.GPU, g.hello.Driver}, "|")
}

// dispatch runs the queue, one run at a time: one GPU.
func (g *GPU) dispatch() {
	defer close(g.done)
	for {
		select {
		case <-g.stop:
			for {
				select {
				case j := <-g.queue:
					j.done <- workerUnavailable("the server is shutting down")
				default:
					return
				}
			}
		case j := <-g.queue:
			if err := j.ctx.Err(); err != nil {
				j.done <- err
				continue
			}
			g.inFlight.Store(1)
			err := g.runOne(j)
			g.inFlight.Store(0)
			j.done <- err
		}
	}
}

// Bench times a run of the untraced kernels on the GPU, in the same queue as
// traced runs: one GPU.
func (g *GPU) Bench(ctx context.Context, b worker.Bench) (worker.Timed, error) {
	j := &gpuJob{ctx: ctx, bench: &b, done: make(chan error, 1)}
	select {
	case g.queue <- j:
	default:
		return worker.Timed{}, gpuBusy(len(g.queue) + int(g.inFlight.Load()))
	}
	err := <-j.done
	return j.timed, err
}

// runOne sends one run to the worker and relays its chunks. The worker's
// frames are read to the end of the run even when the browser has gone, so
// the next run starts clean.
func (g *GPU) runOne(j *gpuJob) error {
	p, err := g.take(j.ctx)
	if err != nil {
		return err
	}
	defer g.release(p)
	id := g.nextID.Add(1)
	if j.bench != nil {
		j.bench.ID = id
		err = worker.WriteJSON(p.req, worker.TypeBench, j.bench)
	} else {
		err = worker.WriteJSON(p.req, worker.TypeRun, worker.Run{ID: id, Query: j.c.Values().Encode()})
	}
	if err != nil {
		return g.lost(p, fmt.Sprintf("the GPU worker could not take the run (%v)", err))
	}
	var emitErr error
	idle := time.NewTimer(g.opts.IdleTimeout)
	defer idle.Stop()
	ended := p.endedC
	for {
		select {
		case <-ended:
			// Close ended it. Its pipe closes when it exits, but a worker
			// stuck in the driver neither exits nor closes it.
			if why := p.endedWhy(); why != "" {
				return g.lost(p, why)
			}
			ended = nil // it had exited on its own: its pipe says how
		case f, ok := <-p.frames:
			if why := p.endedWhy(); why != "" && (!ok || f.err != nil) {
				return g.lost(p, why) // the server ended it: its pipe closed for that
			}
			if ok && f.err != nil && !errors.Is(f.err, io.EOF) && !errors.Is(f.err, io.ErrUnexpectedEOF) {
				return g.lost(p, fmt.Sprintf("the GPU worker broke the protocol (%v)", f.err))
			}
			if !ok || f.err != nil {
				why := "its pipe closed"
				select {
				case <-p.exited:
					why = "it exited"
					if p.exit != nil {
						why = p.exit.Error()
					}
				case <-time.After(time.Second):
				}
				return g.lost(p, fmt.Sprintf("the GPU worker died during the run (%s)", why))
			}
			idle.Reset(g.opts.IdleTimeout)
			switch f.t {
			case worker.TypeChunk:
				if emitErr == nil {
					emitErr = j.emit(f.payload)
				}
			case worker.TypeTimed:
				if json.Unmarshal(f.payload, &j.timed) != nil || j.timed.ID != id || j.bench == nil {
					return g.lost(p, "the GPU worker answered another timing")
				}
				return nil
			case worker.TypeDone:
				var done worker.Done
				if json.Unmarshal(f.payload, &done) != nil || done.ID != id {
					return g.lost(p, "the GPU worker answered another run")
				}
				return emitErr
			case worker.TypeFail:
				var fail worker.Fail
				if json.Unmarshal(f.payload, &fail) != nil || fail.ID != id {
					return g.lost(p, "the GPU worker sent a malformed failure")
				}
				if fail.Fatal {
					// The worker exits after a fatal failure. One that does
					// not is ended after ExitTimeout (lost records why
					// before it kills): the dispatcher waits for no worker
					// for good.
					why := "the run failed on the GPU: " + fail.Error
					exit := time.NewTimer(g.opts.ExitTimeout)
					select {
					case <-p.exited:
					case <-exit.C:
						why += fmt.Sprintf("; the GPU worker did not exit within %v after it, so it was ended", g.opts.ExitTimeout)
					}
					exit.Stop()
					return g.lost(p, why)
				}
				return problem.New(problem.Unprocessable, fail.Error) // the worker refused the run or could not do it (out of device memory, say); it is fine
			default:
				return g.lost(p, fmt.Sprintf("the GPU worker sent an unexpected %s frame", f.t))
			}
		case <-idle.C:
			return g.lost(p, fmt.Sprintf("the GPU worker stopped answering for %v", g.opts.IdleTimeout))
		}
	}
}

// take returns the worker for a run and marks it held. A worker already
// seen to have exited is not given to the run: it is replaced first, as
// exited would have replaced it. While a worker starts, take waits for it
// (at most HelloTimeout, or until ctx is done) without procMu; a start
// that fails, or is refused, fails the run with a problem.Unavailable that says the
// GPU worker is unavailable.
func (g *GPU) take(ctx context.Context) (*process, error) {
	for starts := 0; ; starts++ {
		g.procMu.Lock()
		if p := g.proc; p != nil {
			select {
			case <-p.exited:
				if p.ended.Load() {
					g.proc = nil // the server ended it: not a death to count
					p.drop()
				} else {
					g.replaceExitedLocked(p)
				}
			default:
			}
		}
		if p := g.proc; p != nil {
			g.held = p
			g.procMu.Unlock()
			return p, nil
		}
		if starts == 2 {
			g.procMu.Unlock()
			return nil, workerUnavailable("GPU worker unavailable: two GPU workers in a row exited as soon as they started")
		}
		s := g.startLocked()
		g.procMu.Unlock()
		select {
		case <-s.done:
			if s.err != nil {
				return nil, s.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release says the run that took p is over with it.
func (g *GPU) release(p *process) {
	g.procMu.Lock()
	if g.held == p {
		g.held = nil
	}
	g.procMu.Unlock()
}

// lost fails the run in flight for what happened to the worker, kills it
// (kill: a worker that outlives that is abandoned) and starts the next one
// at once, so the next run finds it ready, or is told the GPU worker is
// unavailable.
func (g *GPU) lost(p *process, why string) error {
	why = g.kill(p, why) // an earlier decision of the server's stands
	g.log.Error("GPU worker lost", "why", why)
	g.statMu.Lock()
	g.restarts++
	g.crash = why
	g.statMu.Unlock()
	g.procMu.Lock()
	if g.proc == p {
		g.proc = nil
	}
	var s *start
	if !g.stopped() {
		s = g.startLocked()
	}
	g.procMu.Unlock()
	if s == nil {
		return workerUnavailable("the server is shutting down: " + why)
	}
	select {
	case <-s.done:
		if s.err != nil {
			return workerUnavailable(why + "; " + s.err.Error())
		}
	default:
	}
	return workerLost(why + "; the worker has been restarted, run again")
}

// lineLogger forwards the worker's output to the log, line by line.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.log.Info("gpuworker: " + string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}
