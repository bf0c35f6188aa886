package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"flashstep/client"
	"flashstep/docs"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/lessons"
	"flashstep/problem"
	"flashstep/templates"

	"github.com/go-chi/chi/v5"
)

// The course: the course map, each lesson's page, and the checkpoint API
// that grades a student's prediction against the trace of the lesson's run.

func (s *Server) course() (*lessons.Course, error) {
	c, err := lessons.Default()
	if err != nil {
		return nil, fmt.Errorf("the course does not load: %w", err)
	}
	return c, nil
}

func (s *Server) lessonIndex(w http.ResponseWriter, r *http.Request) error {
	c, err := s.course()
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.CoursePage(s.page("The course", "lessons"), templates.CourseView{Lessons: c.Lessons}))
}

func (s *Server) lessonPage(w http.ResponseWriter, r *http.Request) error {
	c, err := s.course()
	if err != nil {
		return err
	}
	slug := chi.URLParam(r, "slug")
	l, ok := c.Lesson(slug)
	if !ok {
		return render(w, r, http.StatusNotFound, templates.LessonNotFound(s.page("No such lesson", "lessons"), templates.CourseView{Lessons: c.Lessons}, slug))
	}
	prev, next := c.Neighbours(l)
	v := templates.LessonView{Lesson: l, Prev: prev, Next: next, Total: len(c.Lessons), Course: c.Lessons}
	for _, e := range lab.All() {
		if e.Practises == l.Slug {
			v.Lab = append(v.Lab, s.labExercise(e))
		}
	}
	return render(w, r, http.StatusOK, templates.LessonPage(s.page(l.Title, "lessons"), v))
}

// glossary is the course's glossary page.
func (s *Server) glossary(w http.ResponseWriter, r *http.Request) error {
	c, err := s.course()
	if err != nil {
		return err
	}
	v := templates.GlossaryView{}
	for _, t := range lessons.Glossary {
		l, _ := c.Lesson(t.Lesson)
		v.Terms = append(v.Terms, templates.GlossaryEntry{Term: t, Lesson: l})
	}
	return render(w, r, http.StatusOK, templates.GlossaryPage(s.page("Glossary", "glossary"), v))
}

// document shows one worklog of docs/ (GET /docs/{name}), or the
// compiler's report kernels/ptx/ptxas.txt (as /docs/ptxas.txt): the
// sources a lesson's figures name.
func (s *Server) document(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if name == "ptxas.txt" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, err := io.WriteString(w, kernels.PtxasText())
		return err
	}
	src, err := fs.ReadFile(docs.Files, name)
	if err != nil || !strings.HasSuffix(name, ".md") || strings.Contains(name, "/") {
		return errNotFound
	}
	html, err := lessons.RenderDocument(src)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.DocPage(s.page("docs/"+name, "lessons"), templates.DocView{Name: name, HTML: html}))
}

// checkpointRequest is the body of POST /api/checkpoints/{lesson}/{id}.
type checkpointRequest struct {
	Answer string `json:"answer"`
	Reveal bool   `json:"reveal"` // give up and see the answer
}

const maxCheckpointBody = 4 << 10

// gradeCheckpoint grades an answer against the trace of the checkpoint's
// run, obtained exactly as the embedded stepper obtains it: through the
// server's engines (the GPU, a recording of the same run, or the CPU mirror).
func (s *Server) gradeCheckpoint(w http.ResponseWriter, r *http.Request) error {
	c, err := s.course()
	if err != nil {
		return err
	}
	l, ok := c.Lesson(chi.URLParam(r, "lesson"))
	if !ok {
		return problem.Newf(problem.NotFound, "no lesson %q", chi.URLParam(r, "lesson"))
	}
	cp, ok := l.Checkpoint(chi.URLParam(r, "id"))
	if !ok {
		return problem.Newf(problem.NotFound, "lesson %s has no checkpoint %q", l.Slug, chi.URLParam(r, "id"))
	}
	var req checkpointRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCheckpointBody+1))
	if err != nil {
		return err
	}
	if len(body) > maxCheckpointBody {
		return problem.Newf(problem.TooLarge, "the request body is over %d bytes", maxCheckpointBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return problem.New(problem.Invalid, `the body must be JSON {"answer": "…", "reveal": false}: `+err.Error())
	}
	// Most checkpoints read the trace of their run; the playground's and
	// the loop's are worked out by the lessons package itself.
	var trace *lessons.Trace
	if cp.NeedsTrace() {
		if trace, err = s.presetTrace(r.Context(), cp, client.Addr(r)); err != nil {
			return err
		}
	}
	judged, err := cp.Judge(trace, req.Answer, req.Reveal)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, judged)
	return nil
}

// presetTrace is runTrace of cp's run, its lesson's preset: a lesson holds
// its runs as configurations, so this is where one becomes a kernels.Run.
func (s *Server) presetTrace(ctx context.Context, cp *lessons.Checkpoint, addr string) (*lessons.Trace, error) {
	run, err := cp.Run.Check()
	if err != nil {
		return nil, err
	}
	return s.runTrace(ctx, run, addr)
}

// runTrace runs r through the server's engines (the GPU, a recording of the
// same run, or the mirror: the numbers a page showing r has) and decodes the
// whole trace, for a lesson's checkpoint or a room's poll to grade against.
func (s *Server) runTrace(ctx context.Context, r kernels.Run, addr string) (*lessons.Trace, error) {
	chunks, err := s.runs.Collect(ctx, r, addr)
	if err != nil {
		return nil, err
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(bytes.Join(chunks, nil)))
	if err != nil {
		return nil, err
	}
	if len(recs) != h.Records {
		return nil, errors.New("the run's trace is incomplete")
	}
	return lessons.NewTrace(h, recs), nil
}
