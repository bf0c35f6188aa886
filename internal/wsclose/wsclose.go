// Package wsclose owns one detail of how the server's websockets end: after
// a message over the read limit, the close frame (1009) must reach the
// peer. The library sends it at once, but the rest of the oversized message
// is still unread on the socket, and a socket closed with unread input
// sends a reset, which makes the peer's kernel discard the close frame
// before the peer reads it. Drain reads that rest first, so that closing
// sends a FIN behind the frame.
package wsclose

import (
	"errors"
	"io"
	"time"

	"github.com/gorilla/websocket"
)

// DrainAfter reads and discards what the peer sends for up to d, or until
// it closes, when err is a message over the read limit; it reports whether
// it was. The caller closes the connection after it.
func DrainAfter(conn *websocket.Conn, err error, d time.Duration) bool {
	if !errors.Is(err, websocket.ErrReadLimit) {
		return false
	}
	raw := conn.NetConn()
	raw.SetReadDeadline(time.Now().Add(d))
	io.Copy(io.Discard, raw)
	return true
}
