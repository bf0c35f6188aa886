// Command server runs flashstep: the pages, the API and the trace streams.
//
//	server [-addr localhost:8080] [-worker path/to/gpuworker | -worker none]
//	       [-nats nats://host:4222] [-public-url http://10.0.0.5:8080]
//	       [-lab-kernels auto|on|off] [-lab-worker path] [-room-idle 3h]
//	       [-body-timeout 10s] [-conns-per-addr 256] [-max-conns n]
//	       [-trusted-proxies 127.0.0.1] [-lab-user nobody] [-lab-loop-time 3s]
//
// It starts the GPU worker (by default the gpuworker binary beside it) and
// runs on the GPU when the worker finds one. Otherwise it is in CPU mode:
// runs recorded on a GPU are replayed, any other comes from the CPU mirror of
// its kernel.
//
// With a GPU, the lab's kernel track (students' CUDA, compiled with NVRTC
// and run one process per submission) is on when the server listens on
// loopback alone; -lab-kernels on turns it on for a classroom server.
//
// Classroom rooms live in this process unless -nats names a NATS server:
// then every flashstep server started with the same -nats shares them, so
// several can stand behind one load balancer.
//
// What one client may hold is bounded: a request's body must arrive within
// -body-timeout of its headers (which have 10 s), and one address may hold
// -conns-per-addr connections open; past either the server answers (408,
// 503) and closes. Behind a reverse proxy, -trusted-proxies names it: its
// connections carry a whole class and are not held to -conns-per-addr, and
// the per-address limits count the client its X-Forwarded-For names.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"flashstep/classroom"
	"flashstep/client"
	"flashstep/connlimit"
	"flashstep/instrument"
	"flashstep/labrun"
	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/rooms"
	"flashstep/rooms/natsrooms"
	"flashstep/runner"
	"flashstep/runs"
	"flashstep/sandbox"
	"flashstep/static"
	"flashstep/sweep"
	"flashstep/web"

	"github.com/nats-io/nats.go"
)

// otherMemory is, in MiB, what the server holds besides its traces: the
// embedded recordings and pages, rooms, and each connection's buffers.
const otherMemory = 128

// A shutdown takes at most shutdownBudget: for drainNotice of it new
// requests are answered 503 before the listener closes, the rooms' last
// word to the broker is given roomsWord at the end, and requests in flight
// the rest.
const (
	shutdownBudget = 2800 * time.Millisecond
	drainNotice    = 500 * time.Millisecond
	roomsWord      = 300 * time.Millisecond
)

// startGPU starts the GPU worker. It returns nil and why when there is no GPU
// to run on: then the server is in CPU mode, which is no error.
func startGPU(path string, log *slog.Logger) (*runner.GPU, string) {
	if path == "none" {
		return nil, "started with -worker none"
	}
	g, err := runner.StartGPU(runner.GPUOptions{Worker: path}, log)
	switch {
	case err == nil:
		h := g.Hello()
		log.Info("GPU mode", "gpu", h.GPU, "driver", h.Driver, "sms", h.SMs, "ptx", h.PTXHash)
		return g, ""
	case errors.Is(err, runner.ErrNoGPU):
		log.Info("CPU mode", "why", err)
		return nil, strings.TrimPrefix(err.Error(), runner.ErrNoGPU.Error()+": ")
	default:
		log.Error("the GPU worker failed to start; CPU mode", "err", err)
		return nil, err.Error()
	}
}

// findSanitizer is compute-sanitizer's path on this machine, "" if it has
// none: students may then ask for memcheck on a kernel.
func findSanitizer() string {
	if p, err := exec.LookPath("compute-sanitizer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/cuda/bin/compute-sanitizer"); err == nil {
		return "/usr/local/cuda/bin/compute-sanitizer"
	}
	return ""
}

// loopbackOnly says whether addr listens on this machine's loopback alone:
// there the kernel track is on by default, for the one person at the
// keyboard; a server the class reaches turns it on with -lab-kernels on.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "flashstep:", err)
		os.Exit(1)
	}
}

// run starts the server and serves until ctx is done, then shuts down
// gracefully: open websockets get close 1001, requests in flight finish. If
// ready is not nil it receives the listening address, for tests.
func run(ctx context.Context, args []string, stdout io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "localhost:8080", "address to listen on")
	workerPath := fs.String("worker", "", `the GPU worker binary (default: gpuworker beside this binary); "none": CPU mode`)
	verbose := fs.Bool("v", false, "log every request")
	natsURL := fs.String("nats", "", "share classroom rooms with other servers through this NATS server (default: rooms in this process)")
	roomIdle := fs.Duration("room-idle", rooms.DefaultLimits.PresenterIdle, "how long a room lives while its presenter's page stays open but sends nothing (no step, run or poll): then it ends, and the room is told after how long")
	publicURL := fs.String("public-url", "", "the address students use to reach this server, for join links and QR codes (default: the presenter's)")
	traceMemory := fs.Int64("trace-memory", 256, "MiB for traces: computing, cached and being sent (runs past it wait, then are refused as busy)")
	computeSlots := fs.Int("compute-slots", 0, "runs the CPU mirror computes at once (default: one per core); more wait in a queue")
	labWorker := fs.String("lab-worker", "", "the binary run with -lab for each student's kernel (default: the GPU worker); naming one turns the kernel track on with -lab-kernels on, GPU or not")
	labUser := fs.String("lab-user", "nobody", "the unprivileged user each student's kernel runs as, when the server runs as root (see docs/DEPLOY.md)")
	labLoopTime := fs.Duration("lab-loop-time", web.DefaultLabLoopTime, "how long a student's JavaScript on the lab's loop track may run in the browser for one batch of calls before the page stops it as stuck (raise it for a class on slow laptops)")
	labKernels := fs.String("lab-kernels", "auto", `the lab's kernel track, students' CUDA compiled and run on the GPU: "auto" (on with a GPU when the server listens on loopback alone), "on" (a classroom server), or "off"`)
	bodyTimeout := fs.Duration("body-timeout", web.DefaultBodyTimeout, "how long a request's body may take to arrive once its headers have; past it the answer is 408 and the connection closes")
	connsPerAddr := fs.Int("conns-per-addr", connlimit.DefaultPerAddress, "connections one client address (IPv6: one /64) may hold open at once; past it a connection is answered 503 and closed. A browser holds about 8: a class of 300 behind one NAT, without a proxy, needs 2500. 0: no cap")
	maxConns := fs.Int("max-conns", 0, "connections open at once in all; past it a connection is answered 503 and closed (default: the limit on open files, less 256 kept for the server's own)")
	trustedProxiesFlag := fs.String("trusted-proxies", "", "comma-separated addresses or CIDR ranges of the reverse proxies in front of the server (127.0.0.1,10.0.0.16/30): their connections are not held to -conns-per-addr, and the per-address limits count the client their X-Forwarded-For names; the ranges must hold the proxies only, never clients, whose X-Forwarded-For would be believed")
	siteDir := fs.String("write-site", "", "write the static site into this folder and exit (make site): every page, the browser's files, the recordings and the data a server's APIs would answer; no GPU, no listening")
	siteBase := fs.String("site-base", "/", "with -write-site: the path the site will be served under (/flashstep/ for a project's GitHub Pages)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *siteDir != "" {
		return writeSite(*siteDir, *siteBase)
	}
	if *bodyTimeout < time.Millisecond || *bodyTimeout > 10*time.Minute {
		return fmt.Errorf("-body-timeout must be from 1ms to 10m, got %v", *bodyTimeout)
	}
	if *labLoopTime < 500*time.Millisecond || *labLoopTime > time.Minute {
		return fmt.Errorf("-lab-loop-time must be from 500ms to 1m, got %v", *labLoopTime)
	}
	if *connsPerAddr < 0 {
		return fmt.Errorf("-conns-per-addr must be 0 (no cap) or more, got %d", *connsPerAddr)
	}
	if *maxConns < 0 {
		return fmt.Errorf("-max-conns must be 0 (the limit on open files, less a reserve) or more, got %d", *maxConns)
	}
	if *maxConns == 0 {
		*maxConns = connlimit.DefaultTotal()
	}
	trustedProxies, err := client.ParseTrustedProxies(*trustedProxiesFlag)
	if err != nil {
		return fmt.Errorf("-trusted-proxies: %w", err)
	}
	if *labKernels != "auto" && *labKernels != "on" && *labKernels != "off" {
		return fmt.Errorf("-lab-kernels must be auto, on or off, got %q", *labKernels)
	}
	if *roomIdle < time.Minute {
		return fmt.Errorf("-room-idle must be at least 1m (a lesson's pause is longer), got %v", *roomIdle)
	}
	if *workerPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		*workerPath = filepath.Join(filepath.Dir(exe), "gpuworker")
	}
	if *computeSlots < 0 || *computeSlots > 1024 {
		return fmt.Errorf("-compute-slots must be from 1 to 1024 (0: one per core), got %d", *computeSlots)
	}
	if *traceMemory < 64 || *traceMemory > 1<<20 {
		return fmt.Errorf("-trace-memory must be from 64 to %d MiB, got %d", 1<<20, *traceMemory)
	}
	// The traces are most of what the server holds; past them and what
	// every connection buffers, the garbage collector works harder rather
	// than let the heap double (GOMEMLIMIT, if set, says otherwise).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit((*traceMemory + otherMemory) << 20)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: level}))

	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		return err
	}
	router := &runner.Router{Recordings: recs}
	if g, why := startGPU(*workerPath, log); g != nil {
		router.GPU = g
		defer g.Close() // at once if the shutdown closed it
	} else {
		router.NoGPU = why
	}
	eng := router
	execs := map[instrument.Source]sweep.Executor{instrument.SourceCPUMirror: sweep.CPU{}}
	if router.GPU != nil {
		execs[instrument.SourceGPU] = runner.GPUSweeps{GPU: router.GPU}
	}
	sweeps := sweep.NewManager(execs)
	defer sweeps.Close() // at once if the shutdown closed it
	recorded, sdpa, err := sweep.LoadRecorded(recordings.Files)
	if err != nil {
		return err
	}
	traffic, err := sweep.LoadTraffic(recordings.Files)
	if err != nil {
		return err
	}
	roomLimits := rooms.Limits{PresenterIdle: *roomIdle} // the same for rooms here and shared through NATS
	var roomService rooms.Service                        // nil: in this process
	if *natsURL != "" {
		nc, err := nats.Connect(*natsURL, nats.Name("flashstep"), nats.MaxReconnects(-1))
		if err != nil {
			return fmt.Errorf("-nats %s: %w", *natsURL, err)
		}
		defer nc.Close()
		roomService = natsrooms.New(nc, roomLimits)
		log.Info("classroom rooms shared through NATS", "url", *natsURL)
	}
	var labKernelsOn bool
	switch *labKernels {
	case "on":
		labKernelsOn = router.GPU != nil || *labWorker != ""
	case "auto":
		labKernelsOn = router.GPU != nil && loopbackOnly(*addr)
	}
	if *labWorker == "" {
		*labWorker = *workerPath
	}
	labOpts := labrun.Options{}
	if labKernelsOn {
		labOpts.Command = []string{*labWorker}
		labOpts.Sandbox = sandbox.Options{User: *labUser}
		if err := labOpts.Sandbox.Check(); err != nil {
			return fmt.Errorf("-lab-user %s: %w", *labUser, err)
		}
		if labOpts.Ladder, err = ladder.Build(recordings.Files); err != nil {
			log.Warn("the ladder's figures do not load: passing kernels are timed but not placed", "err", err)
		}
		labOpts.Sanitizer = findSanitizer()
		log.Info("the lab's kernel track is on: students' kernels run on the GPU, one process each")
	}
	labService := labrun.New(labOpts)
	defer labService.Close()
	app := web.NewServer(web.Deps{Engines: eng, Lab: labService, Runs: runs.Options{Memory: *traceMemory << 20, Slots: map[instrument.Source]int{instrument.SourceCPUMirror: *computeSlots}}, Sweeps: sweeps, Recorded: recorded, SDPA: sdpa, Traffic: traffic,
		Static: static.Files, Log: log, Classroom: classroom.Options{Rooms: roomService, Limits: roomLimits, PublicURL: *publicURL}, BodyTimeout: *bodyTimeout, LabLoopTime: *labLoopTime, TrustedProxies: trustedProxies})
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Past its caps a connection hears 503 from the listener itself, and
	// reaches no handler.
	limited := connlimit.New(ln, connlimit.Options{PerAddress: *connsPerAddr, Total: *maxConns, Exempt: trustedProxies})
	log.Info("flashstep listening", "url", "http://"+ln.Addr().String(), "engine", eng.Engine().Name, "recordings", len(recs.All()),
		"conns_per_addr", *connsPerAddr, "max_conns", *maxConns, "trusted_proxies", len(trustedProxies))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limited) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A shutdown refuses new work at once (the health check answers 503),
	// stops every computation, closes every stream with 1001, and gives
	// requests in flight (a download of a trace already computed, a page)
	// what is left of shutdownBudget to finish; then it cuts them. A
	// handler that is stuck is not the server's failure: the exit status
	// stays 0.
	log.Info("shutting down")
	deadline := time.Now().Add(shutdownBudget)
	app.Drain()
	engines := make(chan struct{})
	go func() {
		// The GPU first: a sweep's point on it ends when its worker does.
		if router.GPU != nil {
			router.GPU.Close()
		}
		sweeps.Close()
		close(engines)
	}()
	// For a moment the listener stays open, so that new requests (a load
	// balancer's health check among them) hear an explicit 503 rather than
	// a refused connection.
	time.Sleep(min(drainNotice, time.Until(deadline)/4))
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(-roomsWord))
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still running at the deadline: cut", "err", err)
		srv.Close()
	}
	// Shutdown does not wait for the rooms: their last word must reach the
	// broker before its connection closes.
	app.CloseRooms()
	select {
	case <-engines:
	case <-time.After(time.Until(deadline)):
		log.Warn("the GPU worker or a sweep did not stop by the deadline")
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
