package web

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"flashstep/client"
	"flashstep/internal/wsclose"
	"flashstep/kernels"
	"flashstep/problem"
	"flashstep/runs"

	"github.com/gorilla/websocket"
)

// The websocket protocol of /ws/trace?<config>.
//
// Server to browser, in order: while the run waits for the server, text
// frames {"type":"queued","ahead":k} each time its place changes, then
// {"type":"running"} when it begins; one binary frame holding the trace header,
// then binary frames each holding one or more whole records, then a text
// frame {"type":"done"|"cancelled"|"error", ...}, then a close frame. An
// invalid configuration gets {"type":"error","fields":[...]} and close 1008.
//
// Browser to server: text frames of JSON, at most maxClientMessage bytes.
// {"type":"cancel"} stops the run. A larger message closes the connection
// with 1009, anything else that is not such JSON with 1008.
const (
	writeWait        = 10 * time.Second
	pongWait         = 60 * time.Second
	pingPeriod       = pongWait * 9 / 10
	closeGrace       = time.Second
	maxClientMessage = 1024
	maxFrameBytes    = 256 << 10 // records are batched into frames up to this size
	outQueue         = 64
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 64 << 10,
	CheckOrigin:     client.SameOrigin,
}

// outMsg is one thing for the writer to send, in order.
type outMsg struct {
	binary []byte
	text   any // JSON-encoded into a text frame
	close  *closeMsg
}

type closeMsg struct {
	code   int
	reason string
}

// stream is one websocket connection. Only its writer goroutine writes to
// the connection (gorilla allows one concurrent writer); others hand it
// messages through out, or an urgent close through urgent.
type stream struct {
	conn   *websocket.Conn
	out    chan outMsg
	urgent chan closeMsg
	// endConn ends everything on this connection; stopRun only the run,
	// when the browser asks, so the writer can still say "cancelled".
	endConn context.CancelFunc
	stopRun context.CancelFunc

	mu        sync.Mutex
	cancelled bool // the browser asked to stop the run
}

func (st *stream) closeNow(code int, reason string) {
	select {
	case st.urgent <- closeMsg{code, reason}:
	default: // a close is already on its way
	}
	st.endConn()
}

func (st *stream) goingAway() { st.closeNow(websocket.CloseGoingAway, "server shutting down") }

// streamTrace upgrades to a websocket and streams the trace of the
// configuration in the URL as the engine computes it.
func (s *Server) streamTrace(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an HTTP error
	}
	// The request's context is no guide once the connection is hijacked.
	connCtx, endConn := context.WithCancel(context.Background())
	runCtx, stopRun := context.WithCancel(connCtx)
	defer stopRun()
	st := &stream{conn: conn, out: make(chan outMsg, outQueue), urgent: make(chan closeMsg, 1),
		endConn: endConn, stopRun: stopRun}
	if !s.track(st) {
		endConn()
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(writeWait))
		conn.Close()
		return
	}
	defer s.untrack(st)

	readerDone := make(chan struct{})
	go st.read(readerDone)

	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		s.run(connCtx, runCtx, st, r.URL.Query(), client.Addr(r))
	}()

	if err := st.write(readerDone); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			s.log.Info("trace stream dropped: its client stopped reading", "addr", client.Addr(r), "waited", writeWait)
		}
	}
	endConn()
	<-runDone
	<-readerDone
}

// run reads the run's shared trace and queues it for the writer, then the
// final text message and a close frame. While the computation waits its
// turn, the browser hears its place in the queue; a run the server cannot
// take now is refused with close 1013 and the reason.
func (s *Server) run(connCtx, runCtx context.Context, st *stream, q url.Values, addr string) {
	send := func(m outMsg) bool {
		select {
		case st.out <- m:
			return true
		case <-connCtx.Done():
			return false
		}
	}
	run, err := parseRun(q)
	if p, ok := problem.As(err); ok && p.Code == problem.Invalid {
		send(outMsg{text: map[string]any{"type": "error", "error": p.Error(), "fields": p.Fields}})
		send(outMsg{close: &closeMsg{p.Code.CloseCode(), "invalid configuration"}})
		return
	}
	start := time.Now()
	var records, bytes int
	err = s.readRun(runCtx, run, addr, func(ahead int) error {
		msg := map[string]any{"type": "queued", "ahead": ahead}
		if ahead < 0 {
			msg = map[string]any{"type": "running"}
		}
		if !send(outMsg{text: msg}) {
			return context.Canceled
		}
		return nil
	}, func(chunk []byte) error {
		if runCtx.Err() != nil || !send(outMsg{binary: chunk}) {
			return context.Canceled
		}
		records++
		bytes += len(chunk)
		return nil
	})
	st.mu.Lock()
	cancelled := st.cancelled
	st.mu.Unlock()
	switch {
	case err == nil:
		send(outMsg{text: map[string]any{"type": "done", "records": records - 1, "bytes": bytes, "ms": time.Since(start).Milliseconds()}})
		send(outMsg{close: &closeMsg{websocket.CloseNormalClosure, "trace complete"}})
	case cancelled:
		send(outMsg{text: map[string]any{"type": "cancelled", "records": max(records-1, 0)}})
		send(outMsg{close: &closeMsg{websocket.CloseNormalClosure, "cancelled"}})
	case connCtx.Err() != nil:
		// The connection is going away; nothing more to say on it.
	case errors.Is(err, runs.ErrClosed):
		st.goingAway()
	default:
		p := problem.Of(err)
		if p.Code == problem.Busy {
			send(outMsg{text: map[string]any{"type": "busy", "error": p.Message, "retry_after": p.RetrySeconds()}})
			send(outMsg{close: &closeMsg{p.Code.CloseCode(), problem.CloseReason(p.Error())}})
			return
		}
		msg := p.Error()
		if p.Code == problem.Internal {
			msg = "the run failed: " + err.Error()
		}
		if p.Code.Status() >= 500 && p.Code.Status() != http.StatusServiceUnavailable {
			s.log.Error("run failed", "err", err)
		}
		send(outMsg{text: map[string]any{"type": "error", "error": msg, "fields": p.Fields}})
		send(outMsg{close: &closeMsg{p.Code.CloseCode(), "run failed"}})
	}
}

// readRun reads the shared trace of r to its end: queued(ahead) while the
// computation waits its turn and queued(-1) when it begins after a wait,
// emit(chunk) for each chunk in trace order.
// It stops at ctx's end or emit's first error; the last reader to leave a
// computation stops it.
func (s *Server) readRun(ctx context.Context, r kernels.Run, addr string, queued func(ahead int) error, emit func([]byte) error) error {
	rd, err := s.runs.Open(r, addr)
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		u, err := rd.Next(ctx)
		if err != nil {
			return err
		}
		if (u.Ahead >= 0 || u.Started) && queued != nil {
			if err := queued(u.Ahead); err != nil {
				return err
			}
		}
		for _, ch := range u.Chunks {
			if err := emit(ch); err != nil {
				return err
			}
		}
		if u.Done {
			return nil
		}
	}
}

// write is the connection's only writer: queued messages in order, records
// batched into frames, pings, and the closing handshake.
func (st *stream) write(readerDone <-chan struct{}) error {
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	defer st.conn.Close()
	// Give the peer a moment to answer the close, as the protocol asks,
	// and the reader its moment to drain what the peer sent.
	awaitPeer := func() {
		select {
		case <-readerDone:
		case <-time.After(closeGrace):
		}
	}
	closeWith := func(cm closeMsg) {
		st.conn.SetWriteDeadline(time.Now().Add(writeWait))
		st.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(cm.code, cm.reason))
		awaitPeer()
	}
	// A write refused because a close went out already: the library sent
	// it from the reader (close 1009, a message over the read limit), and
	// the reader is draining the rest of that message. Closing now would
	// leave it unread, and the peer would get a reset in place of the close
	// frame.
	closedAlready := func(err error) bool {
		if errors.Is(err, websocket.ErrCloseSent) {
			awaitPeer()
			return true
		}
		return false
	}
	first := true
	for {
		select {
		case cm := <-st.urgent:
			closeWith(cm)
			return nil
		case <-readerDone:
			// The peer closed or broke the connection, or the reader
			// asked for a close on its way out: that one goes first.
			select {
			case cm := <-st.urgent:
				closeWith(cm)
			default:
			}
			return nil
		case <-ping.C:
			if err := st.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				if closedAlready(err) {
					return nil
				}
				return err
			}
		case m := <-st.out:
			st.conn.SetWriteDeadline(time.Now().Add(writeWait))
			var err error
			switch {
			case m.close != nil:
				closeWith(*m.close)
				return nil
			case m.text != nil:
				err = st.conn.WriteJSON(m.text)
			default:
				frame := m.binary
				// The header travels alone; records are batched while
				// more are already waiting.
				if !first {
					frame, m = st.batch(frame)
				}
				first = false
				err = st.conn.WriteMessage(websocket.BinaryMessage, frame)
				if err == nil && (m.text != nil || m.close != nil) {
					// batch stopped at a non-record message: send it next.
					if m.close != nil {
						closeWith(*m.close)
						return nil
					}
					err = st.conn.WriteJSON(m.text)
				}
			}
			if err != nil {
				if closedAlready(err) {
					return nil
				}
				return err
			}
		}
	}
}

// batch appends queued record chunks to frame up to maxFrameBytes. If it
// takes a message that is not a record, it returns it for sending next.
func (st *stream) batch(frame []byte) ([]byte, outMsg) {
	for len(frame) < maxFrameBytes {
		select {
		case m := <-st.out:
			if m.binary == nil {
				return frame, m
			}
			frame = append(frame[:len(frame):len(frame)], m.binary...)
		default:
			return frame, outMsg{}
		}
	}
	return frame, outMsg{}
}

// clientMessage is what the browser may send.
type clientMessage struct {
	Type string `json:"type"`
}

// read handles the browser's messages and the pongs that keep the
// connection's read deadline moving.
func (st *stream) read(done chan<- struct{}) {
	defer close(done)
	st.conn.SetReadLimit(maxClientMessage)
	st.conn.SetReadDeadline(time.Now().Add(pongWait))
	st.conn.SetPongHandler(func(string) error {
		return st.conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		kind, data, err := st.conn.ReadMessage()
		if err != nil {
			// A message over the read limit: the websocket library has
			// tried to answer close 1009, but gives up when the writer
			// holds the connection past its second (a slow client being
			// sent a long trace), so the writer is asked to say it too
			// (a second close frame is refused by the library, harmless).
			// The rest of the message is drained before the writer closes.
			if errors.Is(err, websocket.ErrReadLimit) {
				select {
				case st.urgent <- closeMsg{websocket.CloseMessageTooBig, "message too big"}:
				default: // a close is already on its way
				}
				wsclose.DrainAfter(st.conn, err, 200*time.Millisecond)
			}
			st.endConn()
			return
		}
		var msg clientMessage
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if kind != websocket.TextMessage || dec.Decode(&msg) != nil || msg.Type != "cancel" {
			st.closeNow(websocket.ClosePolicyViolation, "malformed message")
			continue // the writer closes; ReadMessage then fails
		}
		st.mu.Lock()
		st.cancelled = true
		st.mu.Unlock()
		st.stopRun()
	}
}
