package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"flashstep/classroom"
	"flashstep/client"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/labrun"
	"flashstep/ladder"
	"flashstep/problem"
	"flashstep/recordings"
	"flashstep/rooms"
	"flashstep/templates"
)

// DefaultLabLoopTime is how long a student's JavaScript may run for one
// batch of calls on the lab's loop track: an exercise's right answer takes
// milliseconds, so past it the code is stuck in a loop. A class on slow
// laptops may want longer (-lab-loop-time).
const DefaultLabLoopTime = 3 * time.Second

// The lab: the exercises' index and pages, each exercise's solution (sent
// only when a student asks for it) and its grader module. The loop track
// runs in the browser. The kernel track's submissions go to labrun, which
// compiles and runs them on the GPU; where it is off, the pages say what it
// needs and step the solution's recorded run beside the reference kernel's.

// kernelTrackWhy is what the kernel track's pages say while it is off, as
// a submission's refusal does (labrun.ErrOff).
const kernelTrackWhy = labrun.OffWhy

// What the kernel track's pages and the lab's index say on the static
// site, which has no server to compile on.
const (
	kernelTrackWhySite = "The kernel track compiles your CUDA at run time (NVRTC) and runs it on a server's GPU, in a process of its own, " +
		"which this static site has not: write your kernel here and check it against the solution, step the solution's run, recorded on a GPU, " +
		"beside the reference kernel's, and step the reference kernel's own run below. To run yours, start a server: in a clone of the repository, make run, on a machine with an NVIDIA GPU."
	kernelTrackOffSite = "This static site has no server to compile them on (in a clone of the repository, make run, on a machine with an NVIDIA GPU): " +
		"their pages let you write a kernel, read the solution, and step the reference kernel's run."
)

// kernelTrackOffIndex is what the lab's index says while the track is off.
const kernelTrackOffIndex = "It is off at this server, which has no GPU for it (or was not started with -lab-kernels on): " +
	"their pages let you write a kernel, read the solution, and step the reference kernel's run."

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
	why := kernelTrackOffIndex
	if s.site {
		why = kernelTrackOffSite
	}
	return render(w, r, http.StatusOK, templates.LabIndex(s.page("The lab", "lab"), all, s.lab.On(), why, lab.HarnessDoc))
}

// kernelsOffInRoom is what a kernel exercise's page says in a room whose
// presenter turned the kernel track off.
const kernelsOffInRoom = "The presenter turned the kernel track off for this room: write your kernel here and check it against the solution, " +
	"step the solution's run, recorded on a GPU, beside the reference kernel's, and step the reference kernel's own run below. " +
	"Your code stays in this browser; when the track is turned on again, this page reloads with it."

func (s *Server) labPage(w http.ResponseWriter, r *http.Request) error {
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok {
		return errNotFound
	}
	return s.renderLab(w, r, e)
}

// renderLab is exercise e's page, on its own or in a room (the room's
// page, when the presenter put e in front of it).
func (s *Server) renderLab(w http.ResponseWriter, r *http.Request, e *lab.Exercise) error {
	on, why := s.lab.On(), kernelTrackWhy
	if s.site {
		why = kernelTrackWhySite
	}
	place, inRoom := classroom.PlaceOf(r)
	if inRoom && on && place.State.KernelsOff {
		on, why = false, kernelsOffInRoom
	}
	v := templates.LabView{Exercise: s.labExercise(e), Of: len(lab.All()), Statement: e.Statement, Hints: e.Hints, Why: why, KernelTrack: on,
		Classroom: s.class.View(r, rooms.PageLab, e.ID, false),
		Data: templates.LabData{ID: e.ID, Track: e.Track, Lang: e.Lang, Entry: e.Entry, Run: e.Run.Values().Encode(), Starter: e.Starter,
			Hints: len(e.Hints), LoopTimeMS: s.labLoopTime.Milliseconds(), KernelTrack: on, Checks: on && s.lab.Checks() && e.Track == lab.TrackKernel, ServerKernels: s.lab.On()}}
	if inRoom {
		v.Data.Room = place.Code
	}
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

// labRecorded sends a kernel exercise's solution's verdict as it was
// recorded on a GPU: what a page without the kernel track steps.
func (s *Server) labRecorded(w http.ResponseWriter, r *http.Request) error {
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok || e.Recorded == nil {
		return errNotFound
	}
	// The solution's own time is the recording's; the rungs beside it are
	// the ladder's figures as /ladder shows them, not those of the day
	// it was recorded.
	var rec labrun.Recording
	if err := json.Unmarshal(e.Recorded, &rec); err != nil {
		return err
	}
	if p := rec.Verdict.Placed; p != nil && p.Note == "" {
		tab, err := ladder.Build(recordings.Files)
		if err != nil {
			return err
		}
		p.Among(tab, e, "the solution")
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeJSON(w, http.StatusOK, rec)
	return nil
}

// labSubmit queues a kernel-track submission: the source in the body
// (text, at most lab.MaxSourceBytes), check=memcheck or check=racecheck
// to run it under compute-sanitizer where the server offers it. It
// answers 202 with the submission's id, which labStatus reports on; a
// second submission while one is live, or a full queue, is answered busy.
// A room's page submits through labSubmitInRoom, whose request carries
// the student's cookie; room=CODE here still names the room (refused
// while its presenter has the kernel track off, or shows another page or
// exercise), but such a submission is nobody's in the room and its
// verdict is counted for no student.
func (s *Server) labSubmit(w http.ResponseWriter, r *http.Request) error {
	return s.submitKernel(w, r, r.URL.Query().Get("room"), false)
}

// labSubmitInRoom is POST /r/{code}/lab/{id}/submissions, from a lab
// room's page: as labSubmit, the submission recorded as the room's and
// its student's (the identity the room issued, in the fs_student cookie
// scoped to the room's path), whose lab_result alone may count it.
func (s *Server) labSubmitInRoom(w http.ResponseWriter, r *http.Request) error {
	return s.submitKernel(w, r, chi.URLParam(r, "code"), true)
}

// submitKernel is both submission routes. The source is read and checked
// for anything naming a file first, so every server answers such a source
// alike, kernel track on or off; then the request must come from this
// site's pages (another site's page could otherwise spend its visitors'
// GPU turns); then the exercise, the check, the room (which must show
// this exercise, 409 otherwise); the service says whether the track is
// on.
func (s *Server) submitKernel(w http.ResponseWriter, r *http.Request, room string, inRoom bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, lab.MaxSourceBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &problem.Error{Code: problem.TooLarge, Field: "source", Limit: lab.MaxSourceBytes,
				Message: fmt.Sprintf("the source must be at most %d bytes (%d KiB)", lab.MaxSourceBytes, lab.MaxSourceBytes>>10)}
		}
		return problem.InvalidField("source", "the body could not be read: %s", err.Error())
	}
	if err := lab.CheckSource(string(body)); err != nil {
		return err
	}
	if !client.FromThisSite(r) {
		return problem.New(problem.Forbidden, "kernels are submitted from this site's own pages")
	}
	e, ok := lab.ByID(chi.URLParam(r, "id"))
	if !ok {
		return errNotFound
	}
	if e.Track != lab.TrackKernel {
		return labrun.BrowserExercise(e)
	}
	check, err := labrun.ParseCheck(r.URL.Query().Get("check"))
	if err != nil {
		return err
	}
	var owner labrun.Owner
	if inRoom || room != "" {
		// The code counts as every room route's does (classroom's Peek): a
		// wrong one against the address's wrong codes, a malformed one too.
		code := rooms.NormalizeCode(room)
		st, err := s.class.Peek(r, code, "")
		if code == "" && !inRoom && errors.Is(err, rooms.ErrNoRoom) {
			return kernels.FieldErrors{{Field: "room", Message: fmt.Sprintf("room must be a room's code, like K7QM-4TXZ (got %q)", truncate(room, 24))}}
		}
		if err != nil {
			return err
		}
		if st.KernelsOff {
			return problem.New(problem.Forbidden, "the presenter turned the kernel track off for room "+rooms.FormatCode(code))
		}
		// A room takes kernels for the exercise in front of it alone: its
		// students' identities are free, so a room of any other page, or
		// of another exercise, would be a way to queue any kernel under a
		// fresh identity each time.
		if st.Page != rooms.PageLab {
			return problem.Newf(problem.Conflict, "room %s shows no lab exercise now, so it takes no kernel for %s: a room takes kernels only for the exercise in front of it", rooms.FormatCode(code), e.ID)
		}
		if st.Query != e.ID {
			return problem.Newf(problem.Conflict, "room %s shows exercise %s, not %s: a room takes kernels only for the exercise in front of it", rooms.FormatCode(code), st.Query, e.ID)
		}
		owner.Room = code
		if inRoom {
			owner.Student = classroom.StudentIn(r, st)
		}
	}
	id, err := s.lab.Submit(e, string(body), client.Addr(r), check, owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id})
	return nil
}

// labStatus reports on a submission: queued (with how many are ahead),
// running, or done with its verdict. A submission nobody asks about for a
// while is cancelled.
func (s *Server) labStatus(w http.ResponseWriter, r *http.Request) error {
	st, ok := s.lab.Status(chi.URLParam(r, "ticket"))
	if !ok {
		return errNotFound
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
