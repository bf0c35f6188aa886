package problem

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Every code has its status and its close code, the pages' 4000-range
// codes among them.
func TestCodeMappings(t *testing.T) {
	for _, tc := range []struct {
		code          Code
		status, close int
	}{
		{Internal, 500, 1011},
		{Invalid, 400, 1008},
		{Forbidden, 403, 4003},
		{NotFound, 404, 4004},
		{Conflict, 409, 4009},
		{TooLarge, 413, 1009},
		{TimedOut, 408, 1008},
		{Unprocessable, 422, 1011},
		{RateLimited, 429, 4029},
		{Lost, 502, 1011},
		{Busy, 503, 1013},
		{Full, 503, 4009},
		{Unavailable, 503, 1013},
	} {
		if got := tc.code.Status(); got != tc.status {
			t.Errorf("%v: status %d, want %d", tc.code, got, tc.status)
		}
		if got := tc.code.CloseCode(); got != tc.close {
			t.Errorf("%v: close code %d, want %d", tc.code, got, tc.close)
		}
	}
}

// An error's text names its field, or says busy; Of finds it through
// wrapping, and keeps any other error's text from the client.
func TestErrorTextAndOf(t *testing.T) {
	if got := InvalidField("answer", "must be at most %d characters", 64).Error(); got != "answer: must be at most 64 characters" {
		t.Errorf("field error: %q", got)
	}
	busy := &Error{Code: Busy, Message: "GPU busy, 2 runs ahead of you", Ahead: 2}
	if got := busy.Error(); got != "busy: GPU busy, 2 runs ahead of you" {
		t.Errorf("busy: %q", got)
	}
	if busy.Retry() != DefaultRetry || New(RateLimited, "x").Retry() != 0 || (&Error{Code: Busy, RetryAfter: time.Minute}).Retry() != time.Minute {
		t.Error("Retry: a 503 without RetryAfter waits DefaultRetry, a 429 says nothing, a RetryAfter is kept")
	}
	wrapped := fmt.Errorf("run: %w", busy)
	if e := Of(wrapped); e != busy || CodeOf(wrapped) != Busy {
		t.Errorf("Of a wrapped busy error: %#v", e)
	}
	cause := errors.New("disk on fire")
	e := Of(fmt.Errorf("saving: %w", cause))
	if e.Code != Internal || e.Error() != "internal error" || !errors.Is(e, cause) {
		t.Errorf("Of a plain error: %#v", e)
	}
	sentinel := New(NotFound, "no room has this code")
	limited := &Error{Code: RateLimited, Message: "too many rooms: at most 20", Limit: 20, Err: sentinel}
	if !errors.Is(limited, sentinel) || Of(limited) != limited {
		t.Error("an error that wraps a sentinel is found as itself, and Is the sentinel")
	}
}

// Fields, as a validator returns them, read as one Invalid error that
// names every field; the first is its Field.
func TestFieldsAsError(t *testing.T) {
	var err error = fmt.Errorf("parse: %w", Fields{{Field: "n", Message: "n must be positive"}, {Field: "d", Message: "d must be at most 256"}})
	e, ok := As(err)
	if !ok || e.Code != Invalid || e.Field != "n" || len(e.Fields) != 2 {
		t.Fatalf("As(Fields): %#v %v", e, ok)
	}
	if want := "invalid configuration: n: n must be positive; d: d must be at most 256"; e.Error() != want {
		t.Errorf("text %q, want %q", e.Error(), want)
	}
	var f Fields
	if !errors.As(err, &f) || f.ByField()["d"] != "d must be at most 256" {
		t.Errorf("Fields stay readable as themselves: %v", f)
	}
	if _, ok := As(Fields(nil)); ok {
		t.Error("no fields: no error to read")
	}
}

// A close frame's reason holds 123 bytes: a longer text is cut at a rune.
func TestCloseReason(t *testing.T) {
	if got := CloseReason("retry in 12 s"); got != "retry in 12 s" {
		t.Errorf("a short reason: %q", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := CloseReason(long)
	if len(got) > 123 || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("a long reason: %d bytes, %q", len(got), got)
	}
}
