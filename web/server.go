// Package web owns flashstep's HTTP surface: the routes, the pages, the JSON
// API, the trace download and the websocket that streams a trace as its
// engine computes it.
package web

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/rooms"
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

	// The classroom: rooms and the limits on joining them.
	rooms                       rooms.Service
	roomLimits                  rooms.Limits
	joins, failedJoins, creates *rooms.AddrLimiter
	publicURL                   string
	sizes                       traceSizes
	sseMu                       sync.Mutex
	sse                         sseSessions
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
	// Rooms holds the classroom rooms: in this process when nil
	// (rooms.Memory with RoomLimits), or on a broker shared by servers.
	Rooms      rooms.Service
	RoomLimits rooms.Limits
	// PublicURL is how students reach this server ("http://10.0.0.5:8080"),
	// for join links and QR codes; empty: the host the presenter used.
	PublicURL string
}

// NewServer wires the routes around its dependencies.
func NewServer(d Deps) *Server {
	s := &Server{runner: d.Engines, sweeps: d.Sweeps, recorded: d.Recorded, sdpa: d.SDPA, traffic: d.Traffic, log: d.Log, static: d.Static,
		streams: map[*stream]struct{}{}}
	s.roomLimits = d.RoomLimits.WithDefaults()
	s.rooms = d.Rooms
	if s.rooms == nil {
		s.rooms = rooms.NewMemory(s.roomLimits)
	}
	s.joins = rooms.NewAddrLimiter(s.roomLimits.JoinsPerMinute)
	s.failedJoins = rooms.NewAddrLimiter(s.roomLimits.FailedJoinsPerMinute)
	s.creates = rooms.NewAddrLimiter(20)
	s.publicURL = strings.TrimSuffix(d.PublicURL, "/")
	s.sizes.byQ = map[string]traceBytes{}
	s.sse.byMember = map[string]*sseSession{}
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
	s.CloseRooms()
}

// CloseRooms ends the rooms this server holds and tells every participant
// why: rooms live in memory. http.Server.Shutdown runs CloseStreams without
// waiting for it, so a program whose rooms go through a broker calls this
// too before it closes the broker's connection. Calling it again is harmless.
func (s *Server) CloseRooms() { s.rooms.Close(restartMessage) }

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
