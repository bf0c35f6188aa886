package web

import (
	"context"
	"net/http"

	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/lessons"
	"flashstep/rooms"
	"flashstep/templates"
)

// classroomHost is what the classroom (package classroom) asks of the
// server: the pages a room shows, and the traces its polls read.
type classroomHost struct{ s *Server }

func (h classroomHost) Page(title, nav string) templates.Page { return h.s.page(title, nav) }

func (h classroomHost) Show(w http.ResponseWriter, r *http.Request, st rooms.State) error {
	switch st.Page {
	case rooms.PageLab:
		e, ok := lab.ByID(st.Query)
		if !ok {
			return errNotFound // an exercise this server does not have (a room made by another version)
		}
		return h.s.renderLab(w, r, e)
	case rooms.PageCompare:
		return h.s.comparePage(w, r)
	}
	return h.s.stepper(w, r)
}

func (h classroomHost) Trace(ctx context.Context, run kernels.Run, who string) (*lessons.Trace, error) {
	return h.s.runTrace(ctx, run, who)
}

func (h classroomHost) Course() (*lessons.Course, error) { return h.s.course() }
