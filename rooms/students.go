package rooms

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Students the room counts. A student is an identity the room issued: the
// room's page draws one (IssueStudent) and keeps it in the browser's
// cookie, and every connection that brings the cookie back is that one
// student, however many tabs or reconnects it has. A connection without
// one (a program that keeps no cookie, a script opening sockets by the
// dozen) follows the room but counts as no student: its answers and lab
// results are refused, so thirty sockets are never thirty students.
//
// The cookie holds the identity and its MAC, HMAC-SHA256 under a key of
// the room's own, drawn when it opens: a client cannot make up an identity
// that passes, nor carry one from another room. The key is the room's,
// not the server's, because rooms shared through NATS (natsrooms) are
// reached through any server: a page drawn on one server and a socket
// through another must agree on the key, and a per-server key would then
// have to be configured alike on every server. The room's key travels with
// its state (State.StudentKey, in the owner's answer to a peek), over the
// broker that already carries the control tokens, so no server needs a
// secret of its own, and the key lives and dies with the room.

// studentKeyBytes is the size of a room's key: 256 bits.
const studentKeyBytes = 32

// studentMACBytes is how much of the MAC a pass keeps: 128 bits.
const studentMACBytes = 16

func newStudentKey() []byte {
	k := make([]byte, studentKeyBytes)
	rand.Read(k)
	return k
}

func studentMAC(key []byte, id string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("flashstep student " + id))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:studentMACBytes])
}

// IssueStudent draws a fresh student identity for the room and its pass,
// what the student's cookie keeps: the identity and the room's MAC of it.
// A state without a key (a room from a server that predates keys) issues
// none: ("", "").
func (st State) IssueStudent() (id, pass string) {
	if len(st.StudentKey) == 0 {
		return "", ""
	}
	id = NewStudent()
	return id, id + "." + studentMAC(st.StudentKey, id)
}

// IssuedStudent is the identity a pass carries when the room issued it,
// and "" for anything else: no pass, a forged or truncated one, another
// room's.
func (st State) IssuedStudent(pass string) string {
	id, mac, ok := strings.Cut(pass, ".")
	if !ok || len(st.StudentKey) == 0 || !ValidStudent(id) {
		return ""
	}
	if !hmac.Equal([]byte(mac), []byte(studentMAC(st.StudentKey, id))) {
		return ""
	}
	return id
}

// NotCounted is the refusal of an answer or a lab result from a
// connection that carries no student the room issued (a follower).
func NotCounted(code string) error { return notCounted(code) }

func notCounted(code string) error {
	return fieldErr("student", "this connection counts as no student, so its answers and lab results are not counted: "+
		"open the room's page, /r/%s, in a browser that keeps cookies; the page keeps a cookie that names you to the room, and your answers count from there", code)
}
