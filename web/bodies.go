package web

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"flashstep/lab"
	"flashstep/problem"
)

// DefaultBodyTimeout is how long a request's body may take to arrive, from
// the moment its headers have, when Deps says nothing else: the largest
// body any route takes (a lab kernel's 64 KiB) needs 6.4 KB/s.
const DefaultBodyTimeout = 10 * time.Second

// bodyPrefetch is the most of a body read before its handler runs: above
// the largest any route takes (a lab kernel's source), so that a handler
// meets its own limit within what arrived under the deadline.
const bodyPrefetch = lab.MaxSourceBytes + 4<<10

// bodyDeadline gives a request that carries a body (a length, or chunks)
// Deps.BodyTimeout for the body to arrive, and reads it before the handler
// runs. A connection that promises a body and sends it slowly, or never,
// was held open for ever; enough of them took every file descriptor the
// server had. Past the deadline the answer is 408, naming the limit, and
// the connection closes. A request without a body (a page, a trace
// download, a websocket, an event stream) is not its business: those may
// stay open as long as they need.
//
// Reading the body here, rather than bounding the handler's reads, lets
// every route refuse a late body the same way, before it has written
// anything of its own. Once the whole body is in, the deadline is lifted:
// a handler may take its time (net/http's watch on the connection, which
// tells a handler that its client left, lifts it too). A body longer than
// any route takes keeps it: what the handler reads of the rest, and what
// the server discards after it, must come by the same deadline.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)); err != nil {
			next.ServeHTTP(w, r) // no connection under it (a test's recorder): nothing held open
			return
		}
		var got bytes.Buffer
		n, err := got.ReadFrom(io.LimitReader(r.Body, bodyPrefetch))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			refuseBody(w, problem.New(problem.TimedOut, "the request body did not arrive within "+seconds(s.bodyTimeout)))
			return
		case err != nil:
			refuseBody(w, problem.New(problem.Invalid, "the request body could not be read: "+err.Error()))
			return
		}
		orig := r.Body
		r = r.WithContext(r.Context())
		if n < bodyPrefetch {
			rc.SetReadDeadline(time.Time{})
			r.Body = io.NopCloser(&got)
		} else {
			// More than any route takes: the handler meets its limit in
			// what was read.
			r.Body = prefetched{io.MultiReader(&got, orig), orig}
		}
		next.ServeHTTP(w, r)
	})
}

// prefetched is a body whose start was read ahead.
type prefetched struct {
	io.Reader
	io.Closer
}

// refuseBody answers a body that did not come (or came malformed) and
// closes the connection, the rest of the body unread.
func refuseBody(w http.ResponseWriter, p *problem.Error) {
	closeAfterReply(w)
	writeJSON(w, p.Code.Status(), p.Body())
}

// closeAfterReply has the server close the connection once this reply is
// written, and close it gracefully: it shuts its side for writing and
// waits a moment before it closes, so that a client still sending reads
// the answer rather than a reset. The server closes so after a body runs
// over a MaxBytesReader's limit, which is the one way to ask it: one byte
// over a limit of none.
func closeAfterReply(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.MaxBytesReader(w, io.NopCloser(strings.NewReader("x")), 0).Read(make([]byte, 1))
}

// seconds says a duration as the refusals do: "10 s", "0.3 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}
