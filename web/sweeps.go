package web

import (
	"errors"
	"flashstep/api"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"flashstep/client"
	"flashstep/problem"
	"flashstep/sweep"

	"github.com/go-chi/chi/v5"
)

var errNoSweeps = problem.New(problem.NotFound, "this server runs no sweeps")

// maxSweepForm bounds the body of POST /api/sweeps.
const maxSweepForm = 4 << 10

// startSweep queues a sweep: 202 and the job, 400 naming the field, 403
// from another site's page, or 503 when the queue cannot take it.
func (s *Server) startSweep(w http.ResponseWriter, r *http.Request) error {
	if s.sweeps == nil {
		return errNoSweeps
	}
	if !client.FromThisSite(r) {
		return problem.New(problem.Forbidden, "sweeps are started from this site's own pages")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSweepForm)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return problem.Newf(problem.TooLarge, "the request body is over %d bytes", maxSweepForm)
		}
		return problem.New(problem.Invalid, "the form must be URL-encoded fields: "+err.Error())
	}
	spec, err := sweep.ParseSpec(r.Form)
	if err != nil {
		return err
	}
	job, err := s.sweeps.Submit(spec, client.Addr(r))
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
			return problem.New(problem.NotFound, "no recorded sweep ships with this build")
		}
		rec = *s.recorded
	case s.sweeps == nil:
		return errNoSweeps
	default:
		job, ok := s.sweeps.Get(id)
		if !ok {
			return problem.New(problem.NotFound, "no sweep "+strconv.Quote(id))
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
	return problem.New(problem.NotFound, "a sweep downloads as .csv or .json")
}

func (s *Server) cancelSweep(w http.ResponseWriter, r *http.Request) error {
	if s.sweeps == nil {
		return errNoSweeps
	}
	if !client.FromThisSite(r) {
		return problem.New(problem.Forbidden, "sweeps are cancelled from this site's own pages")
	}
	job, err := s.sweeps.Cancel(chi.URLParam(r, "id"))
	if errors.Is(err, sweep.ErrNoJob) {
		return problem.New(problem.NotFound, "no such sweep")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

func (s *Server) sdpaReference(w http.ResponseWriter, r *http.Request) error {
	if s.sdpa == nil {
		return problem.New(problem.NotFound, "no PyTorch reference timings ship with this build")
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
	gpu := api.RecordingsGPU
	if hello, ok := s.runner.GPUHello(); ok {
		gpu = api.MemoryGPU{Name: hello.GPU + " (this server's)", Bytes: hello.MemoryBytes}
	}
	plan, err := api.Memory(r.URL.Query(), gpu)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, plan)
	return nil
}
