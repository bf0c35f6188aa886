package classroom

import (
	"context"
	"net/http"
	"time"

	"flashstep/client"
	"flashstep/internal/wsclose"
	"flashstep/problem"
	"flashstep/rooms"

	"github.com/gorilla/websocket"
)

// The websocket of a room's participant, /r/{code}/ws.
//
// Server to browser: text frames, each one rooms.Event as JSON, hello
// first (the room as it is: a late joiner or a reconnect lands on the
// current step), then steps, runs, polls and, to the presenter, tallies.
// When the room ends the last event is {"type":"closed","why","reason"} and
// the close frame carries the reason too: 4000 ended by the presenter, 4001
// expired, 1012 the server restarted. A refused join is a close frame at
// once: 4004 no such room, 4003 a token that is not the room's, 4009 room
// full, 4029 too many joins or wrong codes from this address (the reason
// says in how many seconds to retry). The student is the one the request's
// fs_student cookie names, issued by the room's page; without one the
// connection follows the room as no student (see the package doc).
//
// Browser to server: rooms.Up as JSON text, at most Limits.MaxMessage
// bytes; a larger one closes the connection with 1009 (the room and the
// others in it go on). A message the participant may not send, or a
// malformed one, is refused with a notice event naming the field; the
// connection stays.
var roomUpgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 4096,
	CheckOrigin:     client.SameOrigin,
}

// roomSocket joins the room with this code and serves the participant.
func (s *Server) roomSocket(w http.ResponseWriter, r *http.Request) {
	m, err := s.joinRoom(r)
	conn, uerr := roomUpgrader.Upgrade(w, r, nil)
	if uerr != nil {
		if m != nil {
			m.Leave()
		}
		return // the upgrader has answered with an HTTP error
	}
	if err != nil {
		// The page can read a close frame's reason, not an HTTP status.
		p := problem.Of(err)
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(p.Code.CloseCode(), problem.CloseReason(p.Error())), time.Now().Add(writeWait))
		conn.Close()
		return
	}
	defer m.Leave()
	readerDone := make(chan struct{})
	go s.readRoom(conn, m, readerDone)
	writeRoom(conn, m, readerDone)
	<-readerDone
}

// joinRoom joins the room a websocket or events request names: the code
// looked up as every route does (peekRoom), the join counted against the
// address's joins a minute, the presenter known by the cookie's token and
// the student by the identity the room issued, if the cookie holds one.
func (s *Server) joinRoom(r *http.Request) (*rooms.Member, error) {
	code := roomCode(r)
	st, err := s.Peek(r, code, "")
	if err != nil {
		return nil, err
	}
	if err := s.admitJoin(r); err != nil {
		return nil, err
	}
	return s.rooms.Join(r.Context(), code, presenterToken(r), StudentIn(r, st))
}

// writeRoom is the connection's only writer: whatever the mailbox holds,
// pings, and the close. A reader that falls behind blocks only this
// goroutine; its mailbox meanwhile keeps just the latest of each kind, and
// a write that cannot finish within writeWait drops the connection.
func writeRoom(conn *websocket.Conn, m *rooms.Member, readerDone <-chan struct{}) {
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	defer conn.Close()
	for {
		select {
		case <-readerDone:
			return
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return
			}
		case <-m.Box.Ready():
			for _, e := range m.Box.Take() {
				conn.SetWriteDeadline(time.Now().Add(writeWait))
				if err := conn.WriteMessage(websocket.TextMessage, e.JSON()); err != nil {
					return
				}
				if e.Type == rooms.EventClosed {
					conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCodeOf(e), problem.CloseReason(e.Reason)), time.Now().Add(writeWait))
					select {
					case <-readerDone:
					case <-time.After(closeGrace):
					}
					return
				}
			}
		}
	}
}

// readRoom takes the participant's messages to the room.
func (s *Server) readRoom(conn *websocket.Conn, m *rooms.Member, done chan<- struct{}) {
	defer close(done)
	conn.SetReadLimit(int64(s.roomLimits.MaxMessage))
	conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			// Over the read limit, gorilla has sent close 1009: the rest of
			// the message is drained before the writer closes.
			wsclose.DrainAfter(conn, err, 200*time.Millisecond)
			return
		}
		conn.SetReadDeadline(time.Now().Add(pongWait))
		if kind != websocket.TextMessage {
			notify(m, problem.InvalidField("message", "must be JSON text, not binary"))
			continue
		}
		if err := s.roomMessage(m, data); err != nil {
			notify(m, err)
		}
	}
}

// roomMessage handles one message of a participant, whichever transport
// brought it.
func (s *Server) roomMessage(m *rooms.Member, data []byte) error {
	u, err := rooms.ParseUp(data, s.roomLimits)
	if err != nil {
		return err
	}
	switch u.Type {
	case rooms.CmdRun:
		if !m.Presenter {
			break // the room refuses it, with its own words
		}
		q, err := roomQuery(u.Page, u.Query, s.roomLimits.MaxQuery)
		if err != nil {
			if p, ok := problem.As(err); ok && p.Field != "" {
				return p // names its field already
			}
			return problem.InvalidField("query", "%s", problem.Of(err).Error())
		}
		u.Query = q
	case rooms.CmdLabResult:
		if m.Presenter {
			break // the room refuses it, with its own words
		}
		verdict, err := s.labVerdictOf(m, u)
		if err != nil {
			return err
		}
		u.Answer, u.Ticket = string(verdict), ""
	case rooms.CmdPoll:
		if !m.Presenter {
			return problem.InvalidField("type", `only the presenter may send "poll"`)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := s.rooms.Peek(ctx, m.Code, "")
		if err != nil {
			return err
		}
		var p *rooms.Poll
		switch u.Poll {
		case rooms.PollCheckpoint:
			p, err = s.checkpointPoll(ctx, st, "room "+m.Code)
		case "":
			p, err = s.newPoll(ctx, st, "room "+m.Code)
		default:
			return problem.InvalidField("poll", "must be %q or empty (predict m), got %q", rooms.PollCheckpoint, truncate(u.Poll, 20))
		}
		if err != nil {
			return err
		}
		return m.OpenPoll(p)
	}
	return m.Send(u)
}

// notify tells one participant why its message was refused, naming the
// field at fault where there is one.
func notify(m *rooms.Member, err error) {
	e := &rooms.Event{Type: rooms.EventNotice, Error: err.Error()}
	if p, ok := problem.As(err); ok {
		e.Field, e.Error = p.Field, p.Error()
	}
	m.Box.Put(e)
}
