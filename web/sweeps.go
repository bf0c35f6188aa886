package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/sweep"
	"flashstep/traffic"

	"github.com/go-chi/chi/v5"
)

var errNoSweeps = &httpError{http.StatusNotFound, "this server runs no sweeps"}

// maxSweepForm bounds the body of POST /api/sweeps.
const maxSweepForm = 4 << 10

// startSweep queues a sweep: 202 and the job, 400 naming the field, 403
// from another site's page, or 503 when the queue cannot take it.
func (s *Server) startSweep(w http.ResponseWriter, r *http.Request) error {
	if s.sweeps == nil {
		return errNoSweeps
	}
	if !fromThisSite(r) {
		return &httpError{http.StatusForbidden, "sweeps are started from this site's own pages"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSweepForm)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", maxSweepForm)}
		}
		return &httpError{http.StatusBadRequest, "the form must be URL-encoded fields: " + err.Error()}
	}
	spec, err := sweep.ParseSpec(r.Form)
	if err != nil {
		return err
	}
	job, err := s.sweeps.Submit(spec, clientAddr(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/sweeps/"+job.ID)
	writeJSON(w, http.StatusAccepted, job)
	return nil
}

// sweepJob answers GET /api/sweeps/{id}, and {id}.csv, {id}.json downloads.
// "recorded" is the sweep recorded on a GPU.
func (s *Server) sweepJob(w http.ResponseWriter, r *http.Request) error {
	id, format := chi.URLParam(r, "id"), ""
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		id, format = id[:i], id[i+1:]
	}
	var rec sweep.Record
	switch {
	case id == "recorded":
		if s.recorded == nil {
			return &httpError{http.StatusNotFound, "no recorded sweep ships with this build"}
		}
		rec = *s.recorded
	case s.sweeps == nil:
		return errNoSweeps
	default:
		job, ok := s.sweeps.Get(id)
		if !ok {
			return &httpError{http.StatusNotFound, "no sweep " + strconv.Quote(id)}
		}
		if format == "" {
			writeJSON(w, http.StatusOK, job)
			return nil
		}
		rec = sweep.RecordOf(job)
	}
	name := fmt.Sprintf("flashstep-sweep-%s", id)
	switch format {
	case "", "json":
		w.Header().Set("Content-Type", "application/json")
		if format == "json" {
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.json"`)
		}
		return rec.WriteJSON(w)
	case "csv":
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
		return rec.WriteCSV(w)
	}
	return &httpError{http.StatusNotFound, "a sweep downloads as .csv or .json"}
}

func (s *Server) cancelSweep(w http.ResponseWriter, r *http.Request) error {
	if s.sweeps == nil {
		return errNoSweeps
	}
	if !fromThisSite(r) {
		return &httpError{http.StatusForbidden, "sweeps are cancelled from this site's own pages"}
	}
	job, err := s.sweeps.Cancel(chi.URLParam(r, "id"))
	if errors.Is(err, sweep.ErrNoJob) {
		return &httpError{http.StatusNotFound, "no such sweep"}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

func (s *Server) sdpaReference(w http.ResponseWriter, r *http.Request) error {
	if s.sdpa == nil {
		return &httpError{http.StatusNotFound, "no PyTorch reference timings ship with this build"}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.sdpa)
	return nil
}

// memoryPlan answers the memory calculator: naive against flash for any
// B, H, N, d, in the forward pass (the default) or the backward
// (pass=backward), on this server's GPU or the H100 the recordings come
// from.
func (s *Server) memoryPlan(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var errs kernels.FieldErrors
	num := func(field string) int {
		n, err := strconv.Atoi(strings.TrimSpace(q.Get(field)))
		if err != nil {
			errs = append(errs, kernels.FieldError{Field: field, Message: field + " must be a whole number (got " + strconv.Quote(trunc(q.Get(field))) + ")"})
		}
		return n
	}
	b, h, n, d := num("b"), num("h"), num("n"), num("d")
	dt := instrument.DTypeF32
	switch q.Get("dtype") {
	case "", "f32":
	case "bf16":
		dt = instrument.DTypeBF16
	default:
		errs = append(errs, kernels.FieldError{Field: "dtype", Message: "dtype must be f32 or bf16 (got " + strconv.Quote(trunc(q.Get("dtype"))) + ")"})
	}
	pass, ok := traffic.ParsePass(q.Get("pass"))
	if !ok {
		errs = append(errs, kernels.FieldError{Field: "pass", Message: "pass must be " + string(traffic.PassForward) + " or " + string(traffic.PassBackward) + " (got " + strconv.Quote(trunc(q.Get("pass"))) + ")"})
	}
	if len(errs) > 0 {
		return errs
	}
	gpu, bytes := "NVIDIA H100 80GB HBM3 (the recordings' GPU)", traffic.H100MemoryBytes
	if hello, ok := s.runner.GPUHello(); ok {
		gpu, bytes = hello.GPU+" (this server's)", hello.MemoryBytes
	}
	plan, err := traffic.PlanPass(pass, b, h, n, d, dt, bytes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"gpu": gpu, "pass": plan.Pass, "plan": plan})
	return nil
}

func trunc(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}
