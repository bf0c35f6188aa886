package classroom

import (
	"context"
	"fmt"
	"time"

	"flashstep/lab"
	"flashstep/labrun"
	"flashstep/problem"
	"flashstep/rooms"
	"flashstep/templates"
)

// A lab room: the presenter puts a lab exercise in front of the room, and
// its students' verdicts are counted (rooms.CmdLabResult).

// labChoices are the exercises a presenter may put in front of a room.
func labChoices() []templates.LabChoice {
	var out []templates.LabChoice
	for _, e := range lab.All() {
		out = append(out, templates.LabChoice{ID: e.ID, Title: fmt.Sprintf("Lab %d: %s", e.Number, e.Title)})
	}
	return out
}

// labVerdictOf is the verdict a student's lab_result reports, as the room
// counts it. Only a student the room issued reports one (a follower is
// refused). A loop exercise is graded in the student's browser, so its
// page's word is taken (a student who forges it forges only their own
// line of the tally). A kernel exercise's verdict is this server's: the
// message names the submission's ticket, which must be the sender's own,
// submitted from this room's page (POST /r/{code}/lab/{id}/submissions, package web), and its verdict is
// read here: a ticket passed round the class counts for its owner alone.
func (s *Server) labVerdictOf(m *rooms.Member, u rooms.Up) (rooms.Verdict, error) {
	if m.Student == "" {
		return "", rooms.NotCounted(m.Code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s.rooms.Peek(ctx, m.Code, "")
	if err != nil {
		return "", err
	}
	e, ok := lab.ByID(st.Query)
	if st.Page != rooms.PageLab || !ok {
		return "", problem.InvalidField("type", "this room shows no lab exercise: verdicts are taken while one is in front of the room")
	}
	if e.Track != lab.TrackKernel {
		return rooms.Verdict(u.Answer), nil
	}
	sub, ok := s.lab.Status(u.Ticket)
	switch {
	case !ok:
		return "", problem.InvalidField("ticket", "a kernel's verdict is counted from its submission on this server: no submission has this ticket")
	case sub.Room != m.Code || sub.Student != m.Student:
		return "", problem.InvalidField("ticket", "this submission is not yours: a kernel's verdict counts for the student who submitted it from this room's page")
	case sub.Exercise != e.ID:
		return "", problem.InvalidField("ticket", "this submission was for exercise %s, not %s", sub.Exercise, e.ID)
	case sub.State != labrun.StateDone || sub.Verdict == nil:
		return "", problem.InvalidField("ticket", "this submission has no verdict yet")
	case sub.Verdict.Verdict == "pass":
		return rooms.VerdictPass, nil
	}
	return rooms.VerdictFail, nil
}
