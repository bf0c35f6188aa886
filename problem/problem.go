// Package problem owns the server's error vocabulary: one coded error
// (Error) for everything a client is refused or told went wrong (an
// invalid field, a full queue, a room that does not exist, a request from
// another site, a worker that crashed), with its message in the client's
// words, the field at fault where there is one and, where they help, the
// limit that was broken and when to try again. It also owns the one
// mapping of each code to an HTTP status (Code.Status) and to a websocket
// close code (Code.CloseCode): the transports (package web, package
// classroom) read the code, never a package's own error type.
//
// Packages that refuse something return an *Error (or Fields, the list a
// validator fills, which errors.As reads as one *Error); errors that are
// none of these are the server's own failures, Internal, and their text
// stays in the server's log.
package problem

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Code is what kind of refusal or failure an Error is: it decides the
// HTTP status and the websocket close code, and nothing else does.
type Code uint8

const (
	// Internal: the server failed at something no client can fix. Its
	// message is not shown; the cause goes to the log.
	Internal Code = iota
	// Invalid: a field's value breaks its rule or its limit.
	Invalid
	// Forbidden: not this client's to do (a request from another site's
	// page, a token that is not the room's, a track turned off).
	Forbidden
	// NotFound: nothing has that name (a page, a room's code, a sweep).
	NotFound
	// Conflict: the request does not fit what it meets (a room that
	// shows another exercise than the kernel submitted for it).
	Conflict
	// TooLarge: the request is over a size limit.
	TooLarge
	// TimedOut: the request's body did not arrive in time.
	TimedOut
	// Unprocessable: the request was taken, and what it asked could not
	// be done (the GPU worker refused the run: out of device memory).
	Unprocessable
	// RateLimited: the client's address has done what it may for now
	// (joins or wrong codes a minute, rooms open).
	RateLimited
	// Lost: the process behind the server failed while it worked (the GPU
	// worker crashed or hung, and was replaced): try again.
	Lost
	// Busy: a queue or bound is full now; the client may try again later
	// (RetryAfter), and may be told how many are ahead (Ahead).
	Busy
	// Full: a room holds as many participants as it may.
	Full
	// Unavailable: the server cannot take this now (it is shutting down,
	// no GPU worker starts, too many rooms are open).
	Unavailable
)

var codeNames = [...]string{Internal: "internal", Invalid: "invalid", Forbidden: "forbidden", NotFound: "not found",
	Conflict: "conflict", TooLarge: "too large", TimedOut: "timed out", Unprocessable: "unprocessable", RateLimited: "rate limited",
	Lost: "lost", Busy: "busy", Full: "full", Unavailable: "unavailable"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// Status is the HTTP status that answers an error of code c.
func (c Code) Status() int {
	switch c {
	case Invalid:
		return 400
	case Forbidden:
		return 403
	case NotFound:
		return 404
	case Conflict:
		return 409
	case TimedOut:
		return 408
	case TooLarge:
		return 413
	case Unprocessable:
		return 422
	case RateLimited:
		return 429
	case Lost:
		return 502
	case Busy, Full, Unavailable:
		return 503
	}
	return 500
}

// Websocket close codes beyond RFC 6455's: 4000 plus the HTTP status, as
// the pages read them (static/js/classroom.js).
const (
	CloseForbidden   = 4003
	CloseNotFound    = 4004
	CloseFull        = 4009
	CloseRateLimited = 4029
)

// CloseCode is the websocket close code that ends a connection refused
// with an error of code c: 1008 (policy violation) for an invalid
// message or one that did not come in time, 1009 for one too large, 1013 (try again later) for a busy or
// unavailable server, 4003, 4004, 4009 and 4029 as the HTTP statuses
// 403, 404, 409 and 429, 1011 for a failure.
func (c Code) CloseCode() int {
	switch c {
	case Invalid, TimedOut:
		return 1008
	case TooLarge:
		return 1009
	case Busy, Unavailable:
		return 1013
	case Forbidden:
		return CloseForbidden
	case NotFound:
		return CloseNotFound
	case Full, Conflict:
		return CloseFull
	case RateLimited:
		return CloseRateLimited
	}
	return 1011
}

// CloseReason fits a text in a websocket close frame's reason, which holds
// 123 bytes at most: a longer one is cut at a rune and ends in "…".
func CloseReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	r := []rune(s)
	for len(string(r)) > 120 {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// DefaultRetry is how long a refusal of a busy or unavailable server asks
// a client to wait when it does not say (RetryAfter zero).
const DefaultRetry = 5 * time.Second

// Error is a refusal, or a failure, as a client is told of it.
type Error struct {
	Code Code
	// Message says what went wrong, and what to do about it, in the
	// client's words; for a Busy error, why it is busy.
	Message string
	// Field names the field at fault, as URLs, forms and messages name
	// it ("n", "query", "answer"); "" for none. Fields lists every field
	// at fault where there are several (an Error read from Fields).
	Field  string
	Fields Fields
	// Limit is the bound that was broken (bytes, a count, per minute),
	// where one was; 0 for none.
	Limit int64
	// Ahead is how many requests wait before this one (a full queue).
	Ahead int
	// RetryAfter is when the client may try again; 0: DefaultRetry for a
	// busy or unavailable server, nothing said otherwise.
	RetryAfter time.Duration
	// Err is what caused it, for the log and errors.Is; it is never shown.
	Err error
}

// Error is the text a client reads: the message after the field it names
// ("answer: must be at most 64 characters"), or after "busy: " for a busy
// server. An error read from Fields names each of its fields itself.
func (e *Error) Error() string {
	switch {
	case e.Code == Busy:
		return "busy: " + e.Message
	case e.Field != "" && len(e.Fields) == 0:
		return e.Field + ": " + e.Message
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Retry is how long the client should wait before it tries again: its
// RetryAfter, or DefaultRetry where a busy or unavailable server (503)
// said nothing.
func (e *Error) Retry() time.Duration {
	if e.RetryAfter <= 0 && e.Code.Status() == 503 {
		return DefaultRetry
	}
	return e.RetryAfter
}

// RetrySeconds is Retry in whole seconds, at least 1, as an HTTP
// Retry-After says it; 0 where the error says nothing of when.
func (e *Error) RetrySeconds() int {
	wait := e.Retry()
	if wait <= 0 {
		return 0
	}
	return max(int(math.Ceil(wait.Seconds())), 1)
}

// Body is the JSON an HTTP answer carries of an error: the text a client
// reads and, for invalid fields, each field with its problem.
type Body struct {
	Error  string `json:"error"`
	Fields Fields `json:"fields,omitempty"`
}

// Body is what an HTTP answer says of e.
func (e *Error) Body() Body { return Body{Error: e.Error(), Fields: e.Fields} }

// New is an error of code c with a message.
func New(c Code, message string) *Error { return &Error{Code: c, Message: message} }

// Newf is New with the message formatted.
func Newf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// InvalidField is a field's bad value: Invalid, naming the field.
func InvalidField(field, format string, args ...any) *Error {
	return &Error{Code: Invalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// As finds the *Error in err's chain, the outermost where several are.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// CodeOf is the code of err: its *Error's, Internal for any other error.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// Of is err as the client is told of it: its *Error, or for any other
// error an Internal one whose message says no more than "internal error"
// (the cause stays in Err, for the log).
func Of(err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	return &Error{Code: Internal, Message: "internal error", Err: err}
}

// Field is one field's problem, named as in URLs and forms.
type Field struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Fields is every problem a validator found in one request, field by
// field. It is an error so that a validator may return what it gathered;
// errors.As reads it as one *Error of code Invalid that lists them.
type Fields []Field

func (f Fields) Error() string {
	parts := make([]string, len(f))
	for i, p := range f {
		parts[i] = p.Field + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// ByField maps each field to its message, for forms.
func (f Fields) ByField() map[string]string {
	m := make(map[string]string, len(f))
	for _, p := range f {
		m[p.Field] = p.Message
	}
	return m
}

// As lets errors.As read f as an *Error: Invalid, its message
// "invalid configuration: " and every field's, its Field the first.
func (f Fields) As(target any) bool {
	t, ok := target.(**Error)
	if !ok || len(f) == 0 {
		return false
	}
	*t = &Error{Code: Invalid, Message: "invalid configuration: " + f.Error(), Field: f[0].Field, Fields: f}
	return true
}
