package web

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"flashstep/kernels"
	"flashstep/labrun"
	"flashstep/runner"
	"flashstep/runs"
	"flashstep/sweep"
	"flashstep/templates"
)

// httpError is an error with the status it answers.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

var errNotFound = &httpError{http.StatusNotFound, "Page not found"}

// apiErrorBody is the JSON of every API error. Fields names each invalid
// field of a configuration with the limit it broke.
type apiErrorBody struct {
	Error  string              `json:"error"`
	Fields kernels.FieldErrors `json:"fields,omitempty"`
}

// statusOf maps an error to its HTTP status and what the client may read:
// the one place errors become responses.
func statusOf(err error) (int, apiErrorBody) {
	var fe kernels.FieldErrors
	var he *httpError
	var busy *runner.BusyError
	var full *runs.BusyError
	var sweeps *sweep.BusyError
	var lost *runner.WorkerError
	var refused *runner.RunError
	var labBusy *labrun.BusyError
	switch {
	case errors.As(err, &fe):
		return http.StatusBadRequest, apiErrorBody{Error: "invalid configuration: " + fe.Error(), Fields: fe}
	case errors.As(err, &he):
		return he.status, apiErrorBody{Error: he.message}
	case errors.As(err, &busy):
		return http.StatusServiceUnavailable, apiErrorBody{Error: busy.Error()}
	case errors.As(err, &full):
		return http.StatusServiceUnavailable, apiErrorBody{Error: "busy: " + full.Reason}
	case errors.As(err, &sweeps):
		return http.StatusServiceUnavailable, apiErrorBody{Error: "busy: " + sweeps.Reason}
	case errors.Is(err, runs.ErrClosed):
		return http.StatusServiceUnavailable, apiErrorBody{Error: err.Error()}
	case errors.As(err, &lost) && lost.Unavailable:
		return http.StatusServiceUnavailable, apiErrorBody{Error: lost.Error()}
	case errors.As(err, &lost):
		return http.StatusBadGateway, apiErrorBody{Error: lost.Error()}
	case errors.As(err, &labBusy):
		return http.StatusServiceUnavailable, apiErrorBody{Error: labBusy.Error()}
	case errors.Is(err, labrun.ErrOff):
		return http.StatusForbidden, apiErrorBody{Error: kernelTrackWhy}
	case errors.As(err, &refused):
		return http.StatusUnprocessableEntity, apiErrorBody{Error: refused.Error()}
	}
	return http.StatusInternalServerError, apiErrorBody{Error: "internal error"}
}

// handleAPI adapts a handler that returns an error to one that answers it as
// JSON; no API handler writes its own error response.
func (s *Server) handleAPI(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			status, body := statusOf(err)
			s.logFailure("api", r, status, err)
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", retryAfter(err))
			}
			writeJSON(w, status, body)
		}
	}
}

// handlePage adapts a page handler: errors become an HTML error page.
func (s *Server) handlePage(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			status, body := statusOf(err)
			s.logFailure("page", r, status, err)
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", retryAfter(err))
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			templates.ErrorPage(s.page(body.Error, ""), status, body.Error).Render(r.Context(), w)
		}
	}
}

// logFailure logs what the server failed at. A busy answer (503) is no
// failure: the server did as its limits say, and counts them (runs.Stats).
func (s *Server) logFailure(what string, r *http.Request, status int, err error) {
	switch {
	case status == http.StatusServiceUnavailable:
		s.log.Debug(what, "path", r.URL.Path, "busy", err)
	case status >= 500:
		s.log.Error(what, "path", r.URL.Path, "err", err)
	}
}

// retryAfter is the Retry-After of a 503: what a busy answer said; a
// sweep's turn comes in about a minute; else 5 s.
func retryAfter(err error) string {
	var full *runs.BusyError
	var sweeps *sweep.BusyError
	switch {
	case errors.As(err, &full) && full.RetryAfter > 0:
		return strconv.Itoa(int(math.Ceil(full.RetryAfter.Seconds())))
	case errors.As(err, &sweeps):
		return "60"
	}
	return "5"
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
