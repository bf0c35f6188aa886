package web

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"flashstep/kernels"
	"flashstep/problem"
)

// Every error a handler returns is answered by its code alone: a run lost
// to a crashed worker 502 (the worker, behind the server, failed), one no
// worker can run now 503 as a full queue is, with the Retry-After each
// says; a configuration's fields 400 naming each; anything else 500
// without its text.
func TestAnswerOf(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		body       string
		retryAfter string
	}{
		{problem.New(problem.Lost, "the GPU worker died; run again"), 502, "the GPU worker died; run again", ""},
		{fmt.Errorf("run: %w", problem.New(problem.Unavailable, "GPU worker unavailable")), 503, "GPU worker unavailable", "5"},
		{&problem.Error{Code: problem.Busy, Message: "8 sweeps are waiting", RetryAfter: time.Minute}, 503, "busy: 8 sweeps are waiting", "60"},
		{&problem.Error{Code: problem.RateLimited, Message: "too many joins", RetryAfter: 11500 * time.Millisecond}, 429, "too many joins", "12"},
		{problem.New(problem.RateLimited, "too many rooms"), 429, "too many rooms", ""},
		{kernels.FieldErrors{{Field: "n", Message: "n must be positive"}}, 400, "invalid configuration: n: n must be positive", ""},
		{problem.InvalidField("answer", "must be at most 64 characters"), 400, "answer: must be at most 64 characters", ""},
		{errors.New("disk on fire"), 500, "internal error", ""},
	} {
		w := httptest.NewRecorder()
		p, body := answerOf(w, tc.err)
		if p.Code.Status() != tc.status || body.Error != tc.body || w.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: %d %q Retry-After %q, want %d %q %q", tc.err, p.Code.Status(), body.Error, w.Header().Get("Retry-After"), tc.status, tc.body, tc.retryAfter)
		}
	}
}
