package web

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

	"flashstep/client"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/templates"

	"github.com/go-chi/chi/v5"
)

// Classroom rooms over HTTP. Every URL of a room lies under /r/{code}, so
// the presenter's control token can travel in a cookie scoped to that path
// (HttpOnly, SameSite=Strict): it is never in a page, a URL or a script's
// reach, and a student's browser never has it.
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
// Every route that takes a code looks it up through peekRoom, so a wrong
// code counts against the address's wrong codes whichever route it comes
// by, and no route tells a guesser more than the join form does.
//
//	POST /rooms               the stepper's Present button: create, set the cookie, 303 to /r/{code}
//	POST /api/rooms           the same for programs: JSON {code, join_url, token}
//	GET  /join[?code=]        a form to type a code; a good code redirects to the room
//	GET  /r/{code}            the room's page: the stepper (or side by side) following the room
//	GET  /r/{code}/ws         the participant's websocket (see rooms_ws.go)
//	GET  /r/{code}/events     the same downstream as server-sent events, where websockets are blocked
//	POST /r/{code}/send       the upstream of an events connection
//	GET  /r/{code}/qr.svg     the join URL as a QR code
//	POST /r/{code}/lab/{id}/submissions a kernel from a lab room's page, its student's (lab.go)
//	GET  /api/trace/bytes?run what a student downloads to follow a run, compressed and not
const (
	presenterCookie = "fs_presenter"
	studentCookie   = "fs_student"
)

// Close codes a room's connection ends with when the room ends (the
// page shows the reason); a refused join closes with its error's code
// (problem.Code.CloseCode: 4003, 4004, 4009, 4029, 1013).
const (
	closeRoomEnded   = 4000 // the presenter ended the room
	closeRoomExpired = 4001 // nobody used it for the idle limit
	closeRoomLost    = 4010 // the server running the room stopped answering (natsrooms)
	closeGoingAway   = 1001 // this server leaves, the room goes on: the page reconnects
	closeRestart     = 1012 // the server is restarting: the room is lost
)

// restartMessage is what every participant reads when the server shuts down.
const restartMessage = "The server is restarting, and this room ended with it: rooms live in the server's memory. Ask the presenter for a new code."

// roomPlace is how a page in a room learns it is one.
type roomPlace struct {
	code      string
	presenter bool
	state     rooms.State
}

type roomPlaceKey struct{}

// classroomView is what the stepper and side-by-side pages show of the
// classroom: the Present button, or the room's bar when the page is in one.
func (s *Server) classroomView(r *http.Request, page, query string, embed bool) templates.ClassroomView {
	v := templates.ClassroomView{Page: page, Query: query, Embed: embed, Site: s.site}
	place, ok := r.Context().Value(roomPlaceKey{}).(roomPlace)
	if !ok {
		return v
	}
	join := s.joinURL(r, place.code)
	v.Room = &templates.RoomView{Code: place.code, CodeShown: rooms.FormatCode(place.code), JoinURL: join,
		Presenter: place.presenter, QR: "/r/" + place.code + "/qr.svg",
		Data: templates.RoomData{Code: place.code, Presenter: place.presenter, Page: page, JoinURL: join}}
	if place.presenter {
		v.Room.Lab = labChoices()
	}
	if page == rooms.PageLab {
		if e, ok := lab.ByID(query); ok {
			v.Room.Data.Lab, v.Room.Data.LabRun = e.ID, e.Run.Values().Encode()
			v.Room.KernelLab = e.Track == lab.TrackKernel && s.lab.On()
			v.Room.KernelsOff = place.state.KernelsOff
		}
	}
	if l, cp := s.roomCheckpoint(place.state); l != nil {
		v.Room.LessonTitle, v.Room.LessonHref = l.Title, lessonHref(l.Slug, place.state.Widget)
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

// peekRoom looks up the room a request names, as every route that takes
// a code does: the lookup holds one of the address's wrong codes until
// the room turns out to exist (guess), so a wrong code counts whichever
// route brings it, and while they are spent every code is refused.
func (s *Server) peekRoom(r *http.Request, code, token string) (rooms.State, error) {
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

// studentIn is the student a request's fs_student cookie names in the room
// whose state is st: an identity the room issued, or "" for none (no
// cookie, a forged or another room's one): a follower.
func studentIn(r *http.Request, st rooms.State) string {
	for _, c := range r.CookiesNamed(studentCookie) {
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
	return &http.Cookie{Name: studentCookie, Value: pass, Path: "/r/" + code, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.roomLimits.IdleExpiry.Seconds()) + 3600}
}

// roomRequest is what creating a room takes.
type roomRequest struct {
	Page  string `json:"page"`
	Query string `json:"query"`
	Step  int    `json:"step"`
	// From a lesson: its widget names the page and the run (rooms_lesson.go).
	Lesson string `json:"lesson,omitempty"`
	Widget string `json:"widget,omitempty"`
}

type roomCreated struct {
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
func (s *Server) createRoom(r *http.Request, req roomRequest) (roomCreated, error) {
	if !client.FromThisSite(r) {
		return roomCreated{}, problem.New(problem.Forbidden, "rooms are created from this site's own pages")
	}
	if !s.creates.Allow(client.Addr(r), s.creates.Now()) {
		return roomCreated{}, problem.New(problem.RateLimited, "too many rooms created from your address: at most 20 a minute")
	}
	if req.Lesson != "" || req.Widget != "" {
		var err error
		if req, err = s.lessonRun(req); err != nil {
			return roomCreated{}, err
		}
	}
	if req.Page == "" {
		req.Page = rooms.PageStepper
	}
	if req.Page != rooms.PageStepper && req.Page != rooms.PageCompare && req.Page != rooms.PageLab {
		return roomCreated{}, problem.InvalidField("page", "must be %q, %q or %q", rooms.PageStepper, rooms.PageCompare, rooms.PageLab)
	}
	query, err := roomQuery(req.Page, req.Query, s.roomLimits.MaxQuery)
	if err != nil {
		return roomCreated{}, err
	}
	// Students start where the presenter stood when pressing Present.
	c, err := s.rooms.Create(r.Context(), rooms.Run{Page: req.Page, Query: query, Step: req.Step, Lesson: req.Lesson, Widget: req.Widget}, client.Addr(r))
	if err != nil {
		return roomCreated{}, err
	}
	return roomCreated{Code: c.Code, Shown: rooms.FormatCode(c.Code), JoinURL: s.joinURL(r, c.Code), Token: c.Token,
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
	run, err := parseRun(q)
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
	made, err := s.createRoom(r, roomRequest{Page: r.PostForm.Get("page"), Query: r.PostForm.Get("query"), Step: step,
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
	var req roomRequest
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
	http.SetCookie(w, &http.Cookie{Name: presenterCookie, Value: token, Path: "/r/" + code, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(life.Seconds()) + 3600})
}

func presenterToken(r *http.Request) string {
	if c, err := r.Cookie(presenterCookie); err == nil {
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
			setRetryAfter(w, p)
			v.Error = p.Error()
			return render(w, r, p.Code.Status(), templates.JoinPage(s.page("Join a room", ""), v))
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
		return render(w, r, http.StatusNotFound, templates.JoinPage(s.page("Join a room", ""), v))
	}
	return render(w, r, http.StatusOK, templates.JoinPage(s.page("Join a room", ""), v))
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
	st, err := s.peekRoom(r, code, presenterToken(r))
	if errors.Is(err, rooms.ErrBadToken) {
		// A stale cookie (an old room's): a student's view.
		st, err = s.rooms.Peek(r.Context(), code, "")
	}
	if err != nil {
		return err
	}
	if !st.Presenter && studentIn(r, st) == "" {
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
	r2 := r.Clone(context.WithValue(r.Context(), roomPlaceKey{}, roomPlace{code: code, presenter: st.Presenter, state: st}))
	q, _ := url.ParseQuery(st.Query)
	if st.Step > 0 {
		q.Set("step", strconv.Itoa(st.Step))
	}
	r2.URL.RawQuery = q.Encode()
	if st.Page == rooms.PageLab {
		e, ok := lab.ByID(st.Query)
		if !ok {
			return errNotFound // an exercise this server does not have (a room made by another version)
		}
		return s.renderLab(w, r2, e)
	}
	if st.Page == rooms.PageCompare {
		return s.comparePage(w, r2)
	}
	return s.stepper(w, r2)
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
		return closeRoomExpired
	case rooms.WhyRestart:
		return closeRestart
	case rooms.WhyLost:
		return closeRoomLost
	case rooms.WhyMoved:
		return closeGoingAway
	}
	return closeRoomEnded
}
