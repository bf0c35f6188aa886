// Package web owns flashstep's HTTP surface: the routes, the pages, the JSON
// API, the trace download and the websocket that streams a trace as its
// engine computes it. Every handler's error is answered by its code alone
// (package problem; errors.go). The classroom's routes are package
// classroom's, mounted here; the pages a room shows and the traces its
// polls read are this package's (classroom.go).
package web

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"flashstep/classroom"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/labrun"
	"flashstep/runner"
	"flashstep/runs"
	"flashstep/sweep"
	"flashstep/templates"
	"flashstep/worker"
)

// Server serves flashstep. It keeps track of its open websockets so that a
// shutdown can close them properly: http.Server.Shutdown does not close
// hijacked connections.
type Server struct {
	lab      *labrun.Service // the lab's kernel track
	runner   Engines
	runs     *runs.Hub // every trace the server sends is computed through it, once per run
	sweeps   *sweep.Manager
	recorded *sweep.Record          // the sweep recorded on a GPU, if any
	sdpa     json.RawMessage        // PyTorch's reference timings recorded with it
	traffic  *sweep.MeasuredTraffic // hardware counters of profiled runs
	log      *slog.Logger
	static   fs.FS
	router   http.Handler
	site     bool // rendering the static site's pages (Deps.Site)

	mu      sync.Mutex
	streams map[*stream]struct{}
	closing bool
	// draining is set at the first word of a shutdown: the health check
	// answers 503 and new work is refused at once.
	draining atomic.Bool

	// The classroom: its rooms' routes, websockets and events (package
	// classroom).
	class *classroom.Server

	// What a client may hold up: the time its request's body may take
	// (bodies.go), and the proxies whose word on the client's address the
	// per-address limits take (package client).
	bodyTimeout    time.Duration
	trustedProxies []netip.Prefix

	// How long a student's JavaScript may run for one batch of calls on
	// the lab's loop track, told to the lab's pages (lab.go).
	labLoopTime time.Duration
}

// Engines is what the server needs of whatever computes its runs
// (runner.Router in production).
type Engines interface {
	// Route says where r would run, and runs it there.
	Route(r kernels.Run) runner.Route
	// Engine says where the server's numbers come from, for the banner.
	Engine() runner.Engine
	// GPUHello is the GPU worker's hello, when there is a GPU.
	GPUHello() (worker.Hello, bool)
	// AllRecordings lists the recorded runs.
	AllRecordings() []*runner.Recording
}

// Deps is what the server is built from.
type Deps struct {
	Engines Engines
	// Runs bounds and shares the computations (runs.Options' defaults
	// when zero).
	Runs     runs.Options
	Sweeps   *sweep.Manager
	Recorded *sweep.Record
	SDPA     json.RawMessage
	Traffic  *sweep.MeasuredTraffic
	Static   fs.FS // the browser's files: static.Files in production
	Log      *slog.Logger
	// Classroom is the classroom's rooms and limits: in this process
	// when its Rooms is nil, or on a broker shared by servers.
	Classroom classroom.Options
	// Lab runs the lab's kernel track; nil or off: the track's pages say
	// what it needs and step the reference run.
	Lab *labrun.Service
	// BodyTimeout is how long a request's body may take to arrive once its
	// headers have (DefaultBodyTimeout when zero); past it the answer is
	// 408 and the connection closes.
	BodyTimeout time.Duration
	// LabLoopTime is how long a student's JavaScript on the lab's loop
	// track may run in the browser for one batch of calls before the page
	// stops it (DefaultLabLoopTime when zero).
	LabLoopTime time.Duration
	// TrustedProxies are the reverse proxies in front of the server: from
	// them, the per-address limits count the client X-Forwarded-For names.
	// From any other peer the header is ignored.
	TrustedProxies []netip.Prefix
	// Site renders the pages of the static site (`make site`, package
	// sitebuild) rather than a server's: the banner says what a static
	// copy does and cannot, and the pages' scripts take their runs and
	// grades from the browser's WebAssembly instead of this server.
	Site bool
}

// NewServer wires the routes around its dependencies.
func NewServer(d Deps) *Server {
	s := &Server{runner: d.Engines, runs: runs.New(d.Engines, d.Runs), sweeps: d.Sweeps, recorded: d.Recorded, sdpa: d.SDPA, traffic: d.Traffic, log: d.Log, static: d.Static,
		streams: map[*stream]struct{}{}, site: d.Site}
	s.bodyTimeout = d.BodyTimeout
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	s.labLoopTime = d.LabLoopTime
	if s.labLoopTime <= 0 {
		s.labLoopTime = DefaultLabLoopTime
	}
	s.trustedProxies = d.TrustedProxies
	s.lab = d.Lab
	if s.lab == nil {
		s.lab = labrun.New(labrun.Options{})
	}
	s.class = classroom.New(d.Classroom, classroomHost{s}, s.lab, s.site)
	s.router = s.routes()
	warnMissingVendor(d.Static, d.Log)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Drain is the first step of a shutdown: from now on the health check
// answers 503 and new runs, streams, rooms, sweeps and lab kernels are
// refused; every computation stops; every open websocket is told the server is going away
// (close code 1001). Requests in flight finish (a download of a trace
// already computed, a page). Calling it again is harmless.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.runs.Close()
	s.lab.Close()
	s.CloseStreams()
}

// Draining says whether a shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// RunStats are the shared computations' counters (the load generator reads
// them through /debug/stats).
func (s *Server) RunStats() runs.Stats { return s.runs.Stats() }

// CloseStreams tells every open websocket that the server is going away
// (close code 1001) and refuses new ones. Drain calls it; so does
// http.Server.Shutdown where it is registered with RegisterOnShutdown.
func (s *Server) CloseStreams() {
	s.mu.Lock()
	s.closing = true
	open := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		open = append(open, st)
	}
	s.mu.Unlock()
	for _, st := range open {
		st.goingAway()
	}
	s.CloseRooms()
}

// CloseRooms ends the rooms this server holds and tells every participant
// why: rooms live in memory. http.Server.Shutdown runs CloseStreams without
// waiting for it, so a program whose rooms go through a broker calls this
// too before it closes the broker's connection. Calling it again is harmless.
func (s *Server) CloseRooms() { s.class.Close() }

func (s *Server) track(st *stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.streams[st] = struct{}{}
	return true
}

func (s *Server) untrack(st *stream) {
	s.mu.Lock()
	delete(s.streams, st)
	s.mu.Unlock()
}

func (s *Server) page(title, nav string) templates.Page {
	e := s.runner.Engine()
	return templates.Page{Title: title, Nav: nav, Site: s.site, Engine: templates.Engine{
		Name: e.Name, Detail: e.Detail, Short: e.Short, CPU: e.Source == instrument.SourceCPUMirror,
	}}
}

// health answers the load balancer: 200 while the server takes work, 503
// from the first moment of a shutdown.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}

// refuseWhileDraining answers every new request of a server that is
// shutting down with 503, so that a load balancer moves on at once;
// requests already in flight are not its business.
func (s *Server) refuseWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Retry-After", "5")
			w.Header().Set("Connection", "close")
			http.Error(w, "shutting down: try again in a moment", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}
