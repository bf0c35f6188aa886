package classroom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flashstep/api"
	"flashstep/client"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/templates"

	"github.com/go-chi/chi/v5"
)

// The cookies that carry the presenter's control token and a student's
// identity, each scoped to its room's path.
const (
	PresenterCookie = "fs_presenter"
	StudentCookie   = "fs_student"
)

// Close codes a room's connection ends with when the room ends (the
// page shows the reason); a refused join closes with its error's code
// (problem.Code.CloseCode: 4003, 4004, 4009, 4029, 1013).
const (
	CloseEnded     = 4000 // the presenter ended the room
	CloseExpired   = 4001 // nobody used it for the idle limit
	CloseLost      = 4010 // the server running the room stopped answering (natsrooms)
	CloseGoingAway = 1001 // this server leaves, the room goes on: the page reconnects
	CloseRestart   = 1012 // the server is restarting: the room is lost
)

// restartMessage is what every participant reads when the server shuts down.
const restartMessage = "The server is restarting, and this room ended with it: rooms live in the server's memory. Ask the presenter for a new code."

// Place is where a page in a room is: the room's code, whether the page
// is its presenter's, and the room as the page was asked for.
type Place struct {
	Code      string
	Presenter bool
	State     rooms.State
}

type placeKey struct{}

// PlaceOf is the room a page's request is for, when the room's page (Host.Show)
// renders it.
func PlaceOf(r *http.Request) (Place, bool) {
	p, ok := r.Context().Value(placeKey{}).(Place)
	return p, ok
}

// View is what the stepper, the side by side and a lab exercise's page
// show of the classroom: the Present button, or the room's bar when the
// page is in one.
func (s *Server) View(r *http.Request, page, query string, embed bool) templates.ClassroomView {
	v := templates.ClassroomView{Page: page, Query: query, Embed: embed, Site: s.site}
	place, ok := PlaceOf(r)
	if !ok {
		return v
	}
	join := s.joinURL(r, place.Code)
	v.Room = &templates.RoomView{Code: place.Code, CodeShown: rooms.FormatCode(place.Code), JoinURL: join,
		Presenter: place.Presenter, QR: "/r/" + place.Code + "/qr.svg",
		Data: templates.RoomData{Code: place.Code, Presenter: place.Presenter, Page: page, JoinURL: join}}
	if place.Presenter {
		v.Room.Lab = labChoices()
	}
	if page == rooms.PageLab {
		if e, ok := lab.ByID(query); ok {
			v.Room.Data.Lab, v.Room.Data.LabRun = e.ID, e.Run.Values().Encode()
			v.Room.KernelLab = e.Track == lab.TrackKernel && s.lab.On()
			v.Room.KernelsOff = place.State.KernelsOff
		}
	}
	if l, cp := s.roomCheckpoint(place.State); l != nil {
		v.Room.LessonTitle, v.Room.LessonHref = l.Title, lessonHref(l.Slug, place.State.Widget)
		if cp != nil {
			v.Room.Checkpoint = plainText(cp.Question)
		}
	}
	return v
}

func (s *Server) joinURL(r *http.Request, code string) string {
	base := s.publicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/r/" + code
}

// The per-address join limits. A wrong code counts against the wrong
// codes a minute only (the guesses an attacker gets), whichever URL it
// comes by (the join form, a room's page, its websocket or events); a
// connection to a room that exists counts against the joins a minute only
// (a class behind one NAT joins at once), and so does a room's page that
// issues a student's identity; a page that finds the cookie, and the join
// form, do not count, or each student would count at every reload. A
// student's first visit so costs two joins (the page, the socket): the
// default joins a minute hold a class of 300 behind one address. While an address
// has spent its wrong codes, every code from it is refused, the right ones
// too: were a right code let in, the refusals would tell a guesser which
// of its guesses is right. The refusal says for how long, in Retry-After
// and in its words (a websocket's close reason, which holds 123 bytes at
// most).

// guess reserves one of the address's wrong codes before a code is looked
// up, or refuses every code while they are spent; settle gives the code
// back once it turns out to exist. Reserving first makes guesses sent at
// once count at once: each holds a wrong code until it is known to be right.
func (s *Server) guess(r *http.Request) (settle func(exists bool), err error) {
	giveBack, wait, ok := s.failedJoins.Reserve(client.Addr(r))
	if !ok {
		return nil, limited(wait, s.failedJoins.PerMinute(), "too many wrong codes from your address (at most %d a minute): every code is refused; retry in %d s")
	}
	return func(exists bool) {
		if exists {
			giveBack()
		}
	}, nil
}

// admitJoin counts a connection to a room that exists against the joins a
// minute of its address.
func (s *Server) admitJoin(r *http.Request) error {
	if ok, wait := s.joins.Take(client.Addr(r)); !ok {
		return limited(wait, s.joins.PerMinute(), "too many joins from your address (at most %d a minute); retry in %d s")
	}
	return nil
}

// limited refuses an address that has spent what it may do a minute
// (problem.RateLimited): format says the limit, then the wait in whole
// seconds, which the answer's Retry-After says too.
func limited(wait time.Duration, perMinute int, format string) error {
	secs := max(int(math.Ceil(wait.Seconds())), 1)
	return &problem.Error{Code: problem.RateLimited, Message: fmt.Sprintf(format, perMinute, secs),
		Limit: int64(perMinute), RetryAfter: time.Duration(secs) * time.Second}
}

// Peek looks up the room a request names, as every route that takes a
// code does (a lab room's kernel submissions too): the lookup holds one of
// the address's wrong codes until the room turns out to exist (guess), so
// a wrong code counts whichever route brings it, and while they are spent
// every code is refused. token, if any, is the presenter's.
func (s *Server) Peek(r *http.Request, code, token string) (rooms.State, error) {
	settle, err := s.guess(r)
	if err != nil {
		return rooms.State{}, err
	}
	var st rooms.State
	err = rooms.ErrNoRoom
	if code != "" {
		st, err = s.rooms.Peek(r.Context(), code, token)
	}
	settle(!errors.Is(err, rooms.ErrNoRoom))
	return st, err
}

// StudentIn is the student a request's fs_student cookie names in the room
// whose state is st: an identity the room issued, or "" for none (no
// cookie, a forged or another room's one): a follower.
func StudentIn(r *http.Request, st rooms.State) string {
	for _, c := range r.CookiesNamed(StudentCookie) {
		if id := st.IssuedStudent(c.Value); id != "" {
			return id
		}
	}
	return ""
}

// studentCookieFor is the cookie that keeps a student's pass (the identity
// and the room's MAC of it) in room code: for about the room's lifetime,
// sent back only to the room's URLs.
func (s *Server) studentCookieFor(code, pass string) *http.Cookie {
	return &http.Cookie{Name: StudentCookie, Value: pass, Path: "/r/" + code, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.roomLimits.IdleExpiry.Seconds()) + 3600}
}

// Request is what creating a room takes (POST /api/rooms as JSON, the
// Present button's form).
type Request struct {
	Page  string `json:"page"`
	Query string `json:"query"`
	Step  int    `json:"step"`
	// From a lesson: its widget names the page and the run (lesson.go).
	Lesson string `json:"lesson,omitempty"`
	Widget string `json:"widget,omitempty"`
}

// Created is what the presenter gets back of a new room (POST
// /api/rooms): its code, the token, where students join.
type Created struct {
	Code     string `json:"code"`
	Shown    string `json:"shown"` // the code as read aloud: K7QM-4TXZ
	JoinURL  string `json:"join_url"`
	Token    string `json:"token"`
	Page     string `json:"page"`
	Query    string `json:"query"`
	Socket   string `json:"socket"`
	Presents string `json:"presents"` // the presenter's page
}

// createRoom validates the run and opens a room on it at the given step.
func (s *Server) createRoom(r *http.Request, req Request) (Created, error) {
	if !client.FromThisSite(r) {
		return Created{}, problem.New(problem.Forbidden, "rooms are created from this site's own pages")
	}
	if !s.creates.Allow(client.Addr(r), s.creates.Now()) {
		return Created{}, problem.New(problem.RateLimited, "too many rooms created from your address: at most 20 a minute")
	}
	if req.Lesson != "" || req.Widget != "" {
		var err error
		if req, err = s.lessonRun(req); err != nil {
			return Created{}, err
		}
	}
	if req.Page == "" {
		req.Page = rooms.PageStepper
	}
	if req.Page != rooms.PageStepper && req.Page != rooms.PageCompare && req.Page != rooms.PageLab {
		return Created{}, problem.InvalidField("page", "must be %q, %q or %q", rooms.PageStepper, rooms.PageCompare, rooms.PageLab)
	}
	query, err := roomQuery(req.Page, req.Query, s.roomLimits.MaxQuery)
	if err != nil {
		return Created{}, err
	}
	// Students start where the presenter stood when pressing Present.
	c, err := s.rooms.Create(r.Context(), rooms.Run{Page: req.Page, Query: query, Step: req.Step, Lesson: req.Lesson, Widget: req.Widget}, client.Addr(r))
	if err != nil {
		return Created{}, err
	}
	return Created{Code: c.Code, Shown: rooms.FormatCode(c.Code), JoinURL: s.joinURL(r, c.Code), Token: c.Token,
		Page: req.Page, Query: query, Socket: "/r/" + c.Code + "/ws", Presents: "/r/" + c.Code}, nil
}

// roomQuery checks what a room's page shows: a lab exercise's id, or a
// run's query in its canonical form.
func roomQuery(page, query string, maxQuery int) (string, error) {
	if page != rooms.PageLab {
		return canonicalRun(query, maxQuery)
	}
	if _, ok := lab.ByID(query); !ok {
		var ids []string
		for _, e := range lab.All() {
			ids = append(ids, e.ID)
		}
		return "", problem.InvalidField("query", "a lab room's query is an exercise's id, one of %s (got %q)", strings.Join(ids, ", "), truncate(query, 40))
	}
	return query, nil
}

// canonicalRun checks a run's query as the stepper does and returns its
// canonical form, so a room never carries a run that cannot start.
func canonicalRun(query string, maxQuery int) (string, error) {
	if len(query) > maxQuery {
		return "", problem.InvalidField("query", "must be at most %d bytes, got %d", maxQuery, len(query))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", problem.InvalidField("query", "not a URL query: %v", err)
	}
	if len(q) == 0 {
		return "", problem.InvalidField("query", "is required: the run the room shows, as /step names it (variant=flash2&n=…)")
	}
	run, err := api.ParseRun(q)
	var fe kernels.FieldErrors
	if errors.As(err, &fe) {
		return "", problem.InvalidField("query", "%s", fe.Error())
	}
	if err != nil {
		return "", err
	}
	c := run.Config()
	return c.Values().Encode(), nil
}

// presentForm is the stepper's Present button: a plain form, so it needs
// no script on a page that is not in a room.
func (s *Server) presentForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return problem.New(problem.TooLarge, "the request body is over 4096 bytes")
		}
		return problem.New(problem.Invalid, "the form is malformed: "+err.Error())
	}
	step, _ := strconv.Atoi(r.PostForm.Get("step"))
	made, err := s.createRoom(r, Request{Page: r.PostForm.Get("page"), Query: r.PostForm.Get("query"), Step: step,
		Lesson: r.PostForm.Get("lesson"), Widget: r.PostForm.Get("widget")})
	if err != nil {
		return err
	}
	setPresenterCookie(w, made.Code, made.Token, s.roomLimits.IdleExpiry)
	http.Redirect(w, r, made.Presents, http.StatusSeeOther)
	return nil
}

// createRoomAPI is POST /api/rooms, for programs (the load generator):
// the token comes back in the body, and in the cookie as for a browser.
func (s *Server) createRoomAPI(w http.ResponseWriter, r *http.Request) error {
	var req Request
	body, err := io.ReadAll(io.LimitReader(r.Body, 4097))
	if err != nil {
		return err
	}
	if len(body) > 4096 {
		return problem.New(problem.TooLarge, "the request body is over 4096 bytes")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return problem.New(problem.Invalid, `the body must be JSON {"page": "step", "query": "…", "step": 1}: `+err.Error())
	}
	made, err := s.createRoom(r, req)
	if err != nil {
		return err
	}
	setPresenterCookie(w, made.Code, made.Token, s.roomLimits.IdleExpiry)
	writeJSON(w, http.StatusCreated, made)
	return nil
}

func setPresenterCookie(w http.ResponseWriter, code, token string, life time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: PresenterCookie, Value: token, Path: "/r/" + code, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(life.Seconds()) + 3600})
}

func presenterToken(r *http.Request) string {
	if c, err := r.Cookie(PresenterCookie); err == nil {
		return c.Value
	}
	return ""
}

// roomCode reads the {code} of a room URL; a code typed loosely is
// redirected to its canonical URL by the page handler.
func roomCode(r *http.Request) string { return rooms.NormalizeCode(chi.URLParam(r, "code")) }

// joinPage is the form where a student types a code.
func (s *Server) joinPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.JoinView{Code: r.URL.Query().Get("code")}
	if r.URL.Query().Has("code") {
		code := rooms.NormalizeCode(v.Code)
		exists := false
		settle, err := s.guess(r)
		if err == nil {
			if code != "" {
				_, perr := s.rooms.Peek(r.Context(), code, "")
				exists = perr == nil
			}
			settle(exists)
		}
		if err != nil {
			p := problem.Of(err)
			if secs := p.RetrySeconds(); secs > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(secs))
			}
			v.Error = p.Error()
			return templates.Write(w, r, p.Code.Status(), templates.JoinPage(s.host.Page("Join a room", ""), v))
		}
		switch {
		case code == "":
			v.Error = fmt.Sprintf("code: a room's code is %d letters and digits, like K7QM-4TXZ (got %q)", rooms.CodeLength, truncate(v.Code, 20))
		case !exists:
			v.Error = "code: " + rooms.ErrNoRoom.Error()
		default:
			http.Redirect(w, r, "/r/"+code, http.StatusSeeOther)
			return nil
		}
		return templates.Write(w, r, http.StatusNotFound, templates.JoinPage(s.host.Page("Join a room", ""), v))
	}
	return templates.Write(w, r, http.StatusOK, templates.JoinPage(s.host.Page("Join a room", ""), v))
}

// roomPage is a room's page: the stepper (or the side by side) at the
// room's run and step, with the classroom bar. Whether it is the
// presenter's is the cookie's say.
func (s *Server) roomPage(w http.ResponseWriter, r *http.Request) error {
	raw := chi.URLParam(r, "code")
	code := rooms.NormalizeCode(raw)
	if code != "" && code != raw {
		http.Redirect(w, r, "/r/"+code, http.StatusMovedPermanently)
		return nil
	}
	st, err := s.Peek(r, code, presenterToken(r))
	if errors.Is(err, rooms.ErrBadToken) {
		// A stale cookie (an old room's): a student's view.
		st, err = s.rooms.Peek(r.Context(), code, "")
	}
	if err != nil {
		return err
	}
	if !st.Presenter && StudentIn(r, st) == "" {
		// The page is where a student's identity comes from. Issuing one
		// counts against the address's joins a minute, as a connection
		// does, so an address draws identities no faster than it may join;
		// a reload that brings the cookie back costs nothing.
		if err := s.admitJoin(r); err != nil {
			return err
		}
		if _, pass := st.IssueStudent(); pass != "" {
			http.SetCookie(w, s.studentCookieFor(code, pass))
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	r2 := r.Clone(context.WithValue(r.Context(), placeKey{}, Place{Code: code, Presenter: st.Presenter, State: st}))
	q, _ := url.ParseQuery(st.Query)
	if st.Step > 0 {
		q.Set("step", strconv.Itoa(st.Step))
	}
	r2.URL.RawQuery = q.Encode()
	return s.host.Show(w, r2, st)
}

// qrCode is the room's join URL as an SVG QR code, for the presenter's
// screen. It names only the join URL, which every student may see.
func (s *Server) qrCode(w http.ResponseWriter, r *http.Request) error {
	code := roomCode(r)
	if code == "" {
		return errNotFound
	}
	svg, err := qrSVG(s.joinURL(r, code))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "private, max-age=3600")
	w.Write(svg)
	return nil
}

// closeCodeOf maps a room's end to the close code the page reads.
func closeCodeOf(e *rooms.Event) int {
	switch e.Why {
	case rooms.WhyExpired:
		return CloseExpired
	case rooms.WhyRestart:
		return CloseRestart
	case rooms.WhyLost:
		return CloseLost
	case rooms.WhyMoved:
		return CloseGoingAway
	}
	return CloseEnded
}
