package classroom

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"flashstep/client"
	"flashstep/problem"
	"flashstep/rooms"
)

// The HTTP fallback of a room's websocket, for networks that block
// websockets: GET /r/{code}/events is the same downstream as server-sent
// events (one "data:" line of rooms.Event JSON per event; the first is
// {"type":"session","member","key"}), and POST /r/{code}/send carries the
// participant's messages: {"member","key","message":{…rooms.Up…}}. The key,
// 128 random bits known only to the events connection's reader, is what
// stops one participant sending as another. The student is the one the
// request's fs_student cookie names, as for the websocket (package doc).

// sseSession is one events connection's member and the hash of its key.
type sseSession struct {
	member *rooms.Member
	key    [sha256.Size]byte
}

// sseSessions are this server's events connections, by member.
type sseSessions struct {
	byMember map[string]*sseSession
}

func (s *Server) roomEvents(w http.ResponseWriter, r *http.Request) error {
	m, err := s.joinRoom(r)
	if err != nil {
		return err
	}
	defer m.Leave()
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	key := base64.RawURLEncoding.EncodeToString(keyBytes)
	s.sseMu.Lock()
	s.sse.byMember[m.ID] = &sseSession{member: m, key: sha256.Sum256([]byte(key))}
	s.sseMu.Unlock()
	defer func() {
		s.sseMu.Lock()
		delete(s.sse.byMember, m.ID)
		s.sseMu.Unlock()
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must pass events on at once
	rc := http.NewResponseController(w)
	send := func(data []byte) error {
		rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	session, _ := json.Marshal(map[string]string{"type": "session", "member": m.ID, "key": key})
	if err := send(session); err != nil {
		return nil
	}
	ping := time.NewTicker(pingPeriod / 2)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-ping.C:
			// A comment line: keeps proxies from timing the stream out.
			rc.SetWriteDeadline(time.Now().Add(writeWait))
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return nil
			}
		case <-m.Box.Ready():
			for _, e := range m.Box.Take() {
				if err := send(e.JSON()); err != nil {
					return nil
				}
				if e.Type == rooms.EventClosed {
					return nil
				}
			}
		}
	}
}

// sendRequest is the body of POST /r/{code}/send.
type sendRequest struct {
	Member  string          `json:"member"`
	Key     string          `json:"key"`
	Message json.RawMessage `json:"message"`
}

func (s *Server) roomSend(w http.ResponseWriter, r *http.Request) error {
	if !client.FromThisSite(r) {
		return problem.New(problem.Forbidden, "messages come from this site's own pages")
	}
	limit := int64(s.roomLimits.MaxMessage + 256)
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return &problem.Error{Code: problem.TooLarge, Field: "message", Limit: int64(s.roomLimits.MaxMessage),
			Message: fmt.Sprintf("must be at most %d bytes", s.roomLimits.MaxMessage)}
	}
	var req sendRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return problem.New(problem.Invalid, `the body must be JSON {"member": "…", "key": "…", "message": {…}}: `+err.Error())
	}
	s.sseMu.Lock()
	sess := s.sse.byMember[req.Member]
	s.sseMu.Unlock()
	given := sha256.Sum256([]byte(req.Key))
	if sess == nil || sess.member.Code != roomCode(r) || subtle.ConstantTimeCompare(sess.key[:], given[:]) != 1 {
		return problem.New(problem.Forbidden, "member and key: not an open events connection of this room on this server; reconnect")
	}
	if err := s.roomMessage(sess.member, req.Message); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
