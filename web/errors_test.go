package web

import (
	"fmt"
	"net/http"
	"testing"

	"flashstep/runner"
)

// A run lost to a worker that crashed, and whose worker was restarted,
// answers 502 (the worker, behind the server, failed); a run refused
// because no worker can run one now (none starts, two are stuck, a crash
// whose restart failed, a shutdown) answers 503, as a full queue does, so
// a client knows to try again later.
func TestWorkerErrorsStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&runner.WorkerError{}, http.StatusBadGateway},
		{fmt.Errorf("run: %w", &runner.WorkerError{}), http.StatusBadGateway},
		{&runner.WorkerError{Unavailable: true}, http.StatusServiceUnavailable},
		{fmt.Errorf("run: %w", &runner.WorkerError{Unavailable: true}), http.StatusServiceUnavailable},
	} {
		if got, _ := statusOf(tc.err); got != tc.want {
			t.Errorf("%#v: status %d, want %d", tc.err, got, tc.want)
		}
	}
}
