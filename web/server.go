// Package web owns flashstep's HTTP surface: the routes, the pages, the JSON
// API, the trace download and the websocket that streams a trace as its
// engine computes it.
package web

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/runner"
	"flashstep/sweep"
	"flashstep/templates"
	"flashstep/worker"
)

// Server serves flashstep. It keeps track of its open websockets so that a
// shutdown can close them properly: http.Server.Shutdown does not close
// hijacked connections.
type Server struct {
	runner   Engines
	sweeps   *sweep.Manager
	recorded *sweep.Record          // the sweep recorded on a GPU, if any
	sdpa     json.RawMessage        // PyTorch's reference timings recorded with it
	traffic  *sweep.MeasuredTraffic // hardware counters of profiled runs
	log      *slog.Logger
	static   fs.FS
	router   http.Handler

	mu      sync.Mutex
	streams map[*stream]struct{}
	closing bool
}

// Engines is what the server needs of whatever computes its runs
// (runner.Router in production).
type Engines interface {
	runner.Runner
	// For says which engine would compute c.
	For(c *kernels.Config) string
	// GPUHello is the GPU worker's hello, when there is a GPU.
	GPUHello() (worker.Hello, bool)
	// AllRecordings lists the recorded runs.
	AllRecordings() []*runner.Recording
}

// Deps is what the server is built from.
type Deps struct {
	Engines  Engines
	Sweeps   *sweep.Manager
	Recorded *sweep.Record
	SDPA     json.RawMessage
	Traffic  *sweep.MeasuredTraffic
	Static   fs.FS // the browser's files: static.Files in production
	Log      *slog.Logger
}

// NewServer wires the routes around its dependencies.
func NewServer(d Deps) *Server {
	s := &Server{runner: d.Engines, sweeps: d.Sweeps, recorded: d.Recorded, sdpa: d.SDPA, traffic: d.Traffic, log: d.Log, static: d.Static,
		streams: map[*stream]struct{}{}}
	s.router = s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// CloseStreams tells every open websocket that the server is going away
// (close code 1001) and refuses new ones. Register it with
// http.Server.RegisterOnShutdown.
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
}

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
	return templates.Page{Title: title, Nav: nav, Engine: templates.Engine{
		Name: e.Name, Detail: e.Detail, Short: e.Short, CPU: e.Source == instrument.SourceCPUMirror,
	}}
}
