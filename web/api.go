package web

import (
	"flashstep/api"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"flashstep/client"
	"flashstep/kernels"
)

// checkConfig validates a configuration and estimates its trace, so the form
// can show each field's problem and the trace size before a run.
func (s *Server) checkConfig(w http.ResponseWriter, r *http.Request) error {
	check, err := api.Config(r.URL.Query(), func(run kernels.Run) (string, error) {
		route := s.runner.Route(run)
		return route.Says, route.Err // engine=gpu on a server without one: as /api/trace says
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, check)
	return nil
}

// downloadTrace streams the whole trace over plain HTTP as the engine computes
// it, for networks that break websockets and for saving a run to replay. A
// HEAD request learns the headers without starting the run. A client that
// stops reading is dropped after downloadWriteWait without progress.
func (s *Server) downloadTrace(w http.ResponseWriter, r *http.Request) error {
	run, err := parseRun(r.URL.Query())
	if err != nil {
		return err
	}
	if route := s.runner.Route(run); route.Err != nil {
		return route.Err
	}
	c := run.Config()
	// The headers of a trace file go out with its first chunk: a run
	// refused (busy, or failed before it began) answers JSON, not a file.
	fileHeaders := func() {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, traceFileName(&c)))
		w.Header().Set("X-Trace-Bytes-Estimate", fmt.Sprint(c.TraceBytes()))
		w.Header().Set("Cache-Control", "no-store")
	}
	if r.Method == http.MethodHead {
		fileHeaders()
		w.WriteHeader(http.StatusOK)
		return nil
	}
	rc := http.NewResponseController(w)
	started := false
	lastFlush := time.Now()
	err = s.readRun(r.Context(), run, client.Addr(r), nil, func(chunk []byte) error {
		if !started {
			fileHeaders()
		}
		started = true
		rc.SetWriteDeadline(time.Now().Add(downloadWriteWait))
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		if time.Since(lastFlush) > 50*time.Millisecond {
			lastFlush = time.Now()
			return rc.Flush()
		}
		return nil
	})
	if err != nil && started {
		// The status line is gone; cut the response short so the client
		// sees a broken transfer rather than a trace that merely ends early.
		if r.Context().Err() == nil {
			s.log.Warn("trace download failed mid-stream", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return err
}

// downloadWriteWait is how long one write of a download may wait for a
// client that has stopped reading.
const downloadWriteWait = 10 * time.Second

// parseRun reads the run an API is asked for: a field that is neither a
// run's nor one of extra is refused by name, with the rest.
func parseRun(v url.Values, extra ...string) (kernels.Run, error) { return api.ParseRun(v, extra...) }

func traceFileName(c *kernels.Config) string {
	causal := ""
	if c.Causal {
		causal = "-causal"
	}
	return fmt.Sprintf("flashstep-%s-n%d-d%d-br%d-bc%d%s-%s-seed%d.fstrace",
		c.Variant, c.N, c.D, c.Br, c.Bc, causal, c.Pattern, c.Seed)
}

// kernelSource answers /api/source?variant=…: a kernel's CUDA source and
// its marked phases, which the stepper shows beside each step.
func (s *Server) kernelSource(w http.ResponseWriter, r *http.Request) error {
	src, err := api.Source(r.URL.Query())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, src)
	return nil
}

// traceBytesAPI is GET /api/trace/bytes?<run>: what a student downloads to
// follow a run, compressed and not, which the presenter's room bar shows
// (runs.Sizes).
func (s *Server) traceBytesAPI(w http.ResponseWriter, r *http.Request) error {
	run, err := parseRun(r.URL.Query())
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK) // what a GET would answer, without measuring
		return nil
	}
	sz, err := s.runs.Sizes(r.Context(), run, client.Addr(r), maxFrameBytes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sz)
	return nil
}
