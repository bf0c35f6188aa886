package web

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"flashstep/problem"
	"flashstep/templates"
)

var errNotFound = problem.New(problem.NotFound, "Page not found")

// apiErrorBody is the JSON of every API error. Fields names each invalid
// field of a configuration with the limit it broke.
type apiErrorBody = problem.Body

// answerOf is what a client is told of err: its status (the code's, as
// package problem maps it), the body, and the headers that go with it
// (Retry-After when the error says when to try again). An error that is
// no problem.Error is the server's own failure: "internal error".
func answerOf(w http.ResponseWriter, err error) (*problem.Error, apiErrorBody) {
	p := problem.Of(err)
	setRetryAfter(w, p)
	return p, p.Body()
}

// setRetryAfter says in Retry-After when the client may try again, where
// the error says.
func setRetryAfter(w http.ResponseWriter, p *problem.Error) {
	if secs := p.RetrySeconds(); secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
}

// handleAPI adapts a handler that returns an error to one that answers it as
// JSON; no API handler writes its own error response.
func (s *Server) handleAPI(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			p, body := answerOf(w, err)
			s.logFailure("api", r, p, err)
			writeJSON(w, p.Code.Status(), body)
		}
	}
}

// handlePage adapts a page handler: errors become an HTML error page.
func (s *Server) handlePage(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			p, body := answerOf(w, err)
			s.logFailure("page", r, p, err)
			status := p.Code.Status()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			templates.ErrorPage(s.page(body.Error, ""), status, body.Error).Render(r.Context(), w)
		}
	}
}

// logFailure logs what the server failed at. A busy or unavailable
// answer (503) is no failure: the server did as its limits say, and
// counts them (runs.Stats).
func (s *Server) logFailure(what string, r *http.Request, p *problem.Error, err error) {
	switch status := p.Code.Status(); {
	case status == http.StatusServiceUnavailable:
		s.log.Debug(what, "path", r.URL.Path, "busy", err)
	case status >= 500:
		s.log.Error(what, "path", r.URL.Path, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		s.log.Debug("request", slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Duration("took", time.Since(start)))
	})
}
