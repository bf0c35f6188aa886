package web

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"flashstep/lab"
	"flashstep/templates"
)

// The lab: the exercises' index and pages, each exercise's solution (sent
// only when a student asks for it) and its grader module. The loop track
// runs in the browser; the kernel track needs the GPU harness, which this
// build does not have, so its pages say so and step the reference run.

// kernelTrackWhy is what the kernel track's pages say while it is off.
const kernelTrackWhy = "The kernel track compiles your CUDA at run time (NVRTC) and runs it on the server's GPU, " +
	"in a process of its own. It is not on at this server: write your kernel here and check it against the solution, " +
	"and step the reference kernel's run below to see what every record of yours should hold."

func (s *Server) labExercise(e *lab.Exercise) templates.LabExercise {
	v := templates.LabExercise{Number: e.Number, ID: e.ID, Title: e.Title, Track: e.Track, Lang: e.Lang, Practises: e.Practises}
	if c, err := s.course(); err == nil {
		if l, ok := c.Lesson(e.Practises); ok {
			v.Lesson = l.Title
		}
	}
	return v
}

func (s *Server) labIndex(w http.ResponseWriter, r *http.Request) error {
	var all []templates.LabExercise
	for _, e := range lab.All() {
		all = append(all, s.labExercise(e))
	}
	return render(w, r, http.StatusOK, templates.LabIndex(s.page("The lab", "lab"), all, false, kernelTrackWhy))
}

func (s *Server) labPage(w http.ResponseWriter, r *http.Request) error {
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok {
		return errNotFound
	}
	v := templates.LabView{Exercise: s.labExercise(e), Statement: e.Statement, Hints: e.Hints, Why: kernelTrackWhy,
		Data: templates.LabData{ID: e.ID, Track: e.Track, Lang: e.Lang, Entry: e.Entry, Run: e.Run.Values().Encode(), Starter: e.Starter, Hints: len(e.Hints)}}
	if next := e.Next(); next != nil {
		n := s.labExercise(next)
		v.Next = &n
	}
	return render(w, r, http.StatusOK, templates.LabPage(s.page(fmt.Sprintf("Lab %d: %s", e.Number, e.Title), "lab"), v))
}

// labSolution sends an exercise's solution, as text: the page asks for it
// only when the student does.
func (s *Server) labSolution(w http.ResponseWriter, r *http.Request) error {
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok {
		return errNotFound
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write([]byte(e.Solution))
	return nil
}

// labGrader sends a loop exercise's grade.js, the module the page imports.
func (s *Server) labGrader(w http.ResponseWriter, r *http.Request) error {
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok || e.Grader == "" {
		return errNotFound
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write([]byte(e.Grader))
	return nil
}
