// Package classroom owns the classroom's transports: a room's routes over
// HTTP (creating one, the join form, the room's page, its QR code), the
// participant's websocket (ws.go) and its server-sent-events fallback
// (sse.go), the polls a presenter poses, read from the run's trace
// (poll.go), and the rooms presented from a lesson's widget (lesson.go).
// Package rooms owns what a room is and how it moves; this package carries
// it to browsers, and counts what each client address may do on the way
// (joins, wrong codes, rooms created).
//
// Every URL of a room lies under /r/{code}, so the presenter's control
// token can travel in a cookie scoped to that path (HttpOnly,
// SameSite=Strict): it is never in a page, a URL or a script's reach, and
// a student's browser never has it.
//
// A student's identity travels the same way, in the cookie fs_student
// (HttpOnly, SameSite=Lax, scoped to the room's path): 128 random bits and
// the room's MAC of them (rooms/students.go), which the room's page alone
// issues, to a browser that brings none back, counting it against the
// address's joins a minute. Every tab and every reconnect of one browser
// is one student, whose poll answer a new one replaces; a poll counts the
// answers of the students present. A websocket or events connection that
// brings no identity the room issued (a program that keeps no cookie, a
// script opening sockets by the dozen) follows the room as no student: it
// is not counted, and its answers and lab results are refused with a
// notice that names the room's page. Each of those connections still
// counts against the joins a minute and the room's capacity.
//
// Every route that takes a code looks it up through Peek, so a wrong code
// counts against the address's wrong codes whichever route it comes by,
// and no route tells a guesser more than the join form does.
//
//	POST /rooms               the stepper's Present button: create, set the cookie, 303 to /r/{code}
//	POST /api/rooms           the same for programs: JSON {code, join_url, token}
//	GET  /join[?code=]        a form to type a code; a good code redirects to the room
//	GET  /r/{code}            the room's page: the stepper (or side by side, or a lab exercise) following the room
//	GET  /r/{code}/ws         the participant's websocket (ws.go)
//	GET  /r/{code}/events     the same downstream as server-sent events, where websockets are blocked
//	POST /r/{code}/send       the upstream of an events connection
//	GET  /r/{code}/qr.svg     the join URL as a QR code
//
// The server around it (package web) renders the pages a room shows,
// computes the runs its polls read (Host), answers the errors its
// handlers return, and takes a lab room's kernels at
// /r/{code}/lab/{id}/submissions, looking the room up through Peek.
package classroom

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"flashstep/kernels"
	"flashstep/labrun"
	"flashstep/lessons"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/templates"
)

// Options are a classroom's rooms and limits.
type Options struct {
	// Rooms holds the rooms: in this process when nil (rooms.Memory with
	// Limits), or on a broker shared by servers (natsrooms).
	Rooms  rooms.Service
	Limits rooms.Limits
	// PublicURL is how students reach this server ("http://10.0.0.5:8080"),
	// for join links and QR codes; empty: the host the presenter used.
	PublicURL string
	// Now is the clock of the per-address limits (time.Now when nil): a
	// test moves it by hand.
	Now func() time.Time
}

// Host is what the classroom needs of the server it is part of.
type Host interface {
	// Page is the frame of a page titled title under the nav entry nav.
	Page(title, nav string) templates.Page
	// Show renders the page a room in state st shows (the stepper, the
	// side by side, a lab exercise) for r, whose URL holds the room's run
	// and step and whose context the room's place (PlaceOf).
	Show(w http.ResponseWriter, r *http.Request, st rooms.State) error
	// Trace is the whole trace of run, computed as a page showing it
	// would have it (the GPU, a recording, the mirror); who is the
	// address it counts against.
	Trace(ctx context.Context, run kernels.Run, who string) (*lessons.Trace, error)
	// Course is the course whose lessons' widgets rooms are presented from.
	Course() (*lessons.Course, error)
}

// Server is the classroom's side of the server: its routes and what they
// keep (the events connections, the per-address limits).
type Server struct {
	host       Host
	lab        *labrun.Service
	site       bool
	rooms      rooms.Service
	roomLimits rooms.Limits
	publicURL  string
	// joins, failedJoins and creates count each address's joins with a
	// good code, wrong codes and rooms created, a minute.
	joins, failedJoins, creates *rooms.AddrLimiter

	sseMu sync.Mutex
	sse   sseSessions
}

// New is a classroom on o's rooms. lab is the lab's kernel track, whose
// verdicts a lab room counts; site says the pages are the static site's,
// which has no rooms (its Present buttons say so).
func New(o Options, host Host, lab *labrun.Service, site bool) *Server {
	s := &Server{host: host, lab: lab, site: site, roomLimits: o.Limits.WithDefaults(), rooms: o.Rooms,
		publicURL: strings.TrimSuffix(o.PublicURL, "/"), sse: sseSessions{byMember: map[string]*sseSession{}}}
	if s.rooms == nil {
		s.rooms = rooms.NewMemory(s.roomLimits)
	}
	s.joins = rooms.NewAddrLimiter(s.roomLimits.JoinsPerMinute)
	s.failedJoins = rooms.NewAddrLimiter(s.roomLimits.FailedJoinsPerMinute)
	s.creates = rooms.NewAddrLimiter(20)
	if o.Now != nil {
		for _, l := range []*rooms.AddrLimiter{s.joins, s.failedJoins, s.creates} {
			l.SetClock(o.Now)
		}
	}
	return s
}

// Handler is a route's handler: what it returns, the server answers (an
// error page, or the API's JSON, by its problem code).
type Handler func(http.ResponseWriter, *http.Request) error

// Routes adds the classroom's routes to r: page adapts a page's handler,
// api an API's (the server's own adapters, which answer errors).
func (s *Server) Routes(r chi.Router, page, api func(Handler) http.HandlerFunc) {
	r.Post("/rooms", page(s.presentForm))
	r.Post("/api/rooms", api(s.createRoomAPI))
	r.Get("/join", page(s.joinPage))
	r.Get("/r/{code}", page(s.roomPage))
	r.Get("/r/{code}/ws", s.roomSocket)
	r.Get("/r/{code}/events", api(s.roomEvents))
	r.Post("/r/{code}/send", api(s.roomSend))
	r.Get("/r/{code}/qr.svg", api(s.qrCode))
}

// Close ends the rooms this server holds and tells every participant why:
// rooms live in memory. Calling it again is harmless.
func (s *Server) Close() { s.rooms.Close(restartMessage) }

// Stats are the rooms' figures, for the server's runtime figures.
func (s *Server) Stats() rooms.Stats { return s.rooms.Stats() }

// errNotFound answers a room page that names nothing this server has.
var errNotFound = problem.New(problem.NotFound, "Page not found")

// Websocket timing: a write that cannot finish within writeWait drops the
// connection; a ping goes out every pingPeriod, and a connection silent
// for pongWait is gone; a closed room's connection waits closeGrace for
// the page's close.
const (
	writeWait  = 10 * time.Second
	pongWait   = 60 * time.Second
	pingPeriod = pongWait * 9 / 10
	closeGrace = time.Second
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
