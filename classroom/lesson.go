package classroom

import (
	"context"
	"math"
	"net/url"
	"strings"

	"flashstep/grading"
	"flashstep/lessons"
	"flashstep/problem"
	"flashstep/rooms"

	"golang.org/x/net/html"
)

// Rooms presented from a lesson: a lesson's embedded stepper, side by
// side or timeline gets a Present button (templates/lesson.templ) that
// opens a room on the widget's run at the step it shows, and the room's
// presenter may pose the lesson checkpoint nearest the widget, graded as
// the course grades it.

// lessonWidget finds a lesson's framed widget, for a room.
func (s *Server) lessonWidget(slug, id string) (*lessons.Lesson, *lessons.Widget, error) {
	c, err := s.host.Course()
	if err != nil {
		return nil, nil, err
	}
	if slug == "" {
		return nil, nil, problem.InvalidField("lesson", "a widget is presented from its lesson: name both the lesson and the widget")
	}
	l, ok := c.Lesson(slug)
	if !ok {
		return nil, nil, problem.InvalidField("lesson", "no lesson %q", truncate(slug, 40))
	}
	if id == "" {
		return nil, nil, problem.InvalidField("widget", "name one of lesson %s's widgets to present", slug)
	}
	for _, w := range l.Widgets {
		if w.ID == id {
			if !w.Framed() {
				return nil, nil, problem.InvalidField("widget", "%s is a %s, not a stepper, side by side or timeline: it cannot be presented", id, w.Kind)
			}
			return l, w, nil
		}
	}
	return nil, nil, problem.InvalidField("widget", "lesson %s has no widget %q", slug, truncate(id, 40))
}

// lessonRun is the room's run for a lesson's widget: its page and query
// come from the lesson, never from the form.
func (s *Server) lessonRun(req Request) (Request, error) {
	_, w, err := s.lessonWidget(req.Lesson, req.Widget)
	if err != nil {
		return req, err
	}
	req.Page = rooms.PageStepper
	if w.Kind == lessons.WidgetCompare {
		req.Page = rooms.PageCompare
	}
	req.Query = w.Run.Values().Encode()
	if req.Step <= 0 {
		req.Step = w.Step
	}
	return req, nil
}

// nearestCheckpoint is the checkpoint a room on widget w poses: the first
// about w after it in the lesson, else the first about w before it, else
// the checkpoint closest to it in the lesson's text; nil if none.
func nearestCheckpoint(l *lessons.Lesson, widgetID string) *lessons.Checkpoint {
	at := -1
	for k, p := range l.Parts {
		if p.Widget != nil && p.Widget.ID == widgetID {
			at = k
		}
	}
	if at < 0 {
		return nil
	}
	var best *lessons.Checkpoint
	bestRank := math.MaxInt
	for k, p := range l.Parts {
		cp := p.Checkpoint
		if cp == nil {
			continue
		}
		dist := k - at
		rank := 0
		switch {
		case cp.Widget == widgetID && dist > 0:
			rank = dist
		case cp.Widget == widgetID:
			rank = 1_000 - dist
		default:
			rank = 1_000_000 + max(dist, -dist)*2
			if dist < 0 {
				rank++ // of two as close, the one after the widget
			}
		}
		if rank < bestRank {
			best, bestRank = cp, rank
		}
	}
	return best
}

// roomCheckpoint is the lesson checkpoint a room's state offers, if any.
func (s *Server) roomCheckpoint(st rooms.State) (*lessons.Lesson, *lessons.Checkpoint) {
	if st.Lesson == "" {
		return nil, nil
	}
	l, _, err := s.lessonWidget(st.Lesson, st.Widget)
	if err != nil {
		return nil, nil
	}
	return l, nearestCheckpoint(l, st.Widget)
}

// checkpointPoll poses the room's lesson checkpoint: its question, its
// answer read from its run's trace (or worked out, for the asks that need
// none), and everything the room needs to grade answers as the course
// grades them (package grading).
func (s *Server) checkpointPoll(ctx context.Context, st rooms.State, who string) (*rooms.Poll, error) {
	l, cp := s.roomCheckpoint(st)
	if cp == nil {
		return nil, problem.InvalidField("poll", "this room was not presented from a lesson's widget with a checkpoint: use \"Poll: predict m\"")
	}
	var trace *lessons.Trace
	source := cp.Source()
	if cp.NeedsTrace() {
		var err error
		run, err := cp.Run.Check()
		if err != nil {
			return nil, err
		}
		if trace, err = s.host.Trace(ctx, run, who); err != nil {
			return nil, err
		}
		source = strings.TrimSpace(trace.H.Label)
	}
	sol, err := cp.Solve(trace)
	if err != nil {
		return nil, err
	}
	p := &rooms.Poll{
		Checkpoint: l.Slug + "/" + cp.ID,
		Question:   plainText(cp.Question),
		Unit:       cp.Unit(),
		Format:     cp.Format,
		Number:     sol.Number,
		Lo:         finite(sol.Lo),
		Hi:         finite(sol.Hi),
		Why:        sol.Why,
		Choice:     sol.Choice,
		Tiles:      sol.Tiles,
		Display:    sol.Display,
		Explain:    strings.TrimSpace(sol.Explain),
	}
	if source != "" {
		p.Explain += " Numbers from: " + source + "."
	}
	switch q := cp.Grader(sol).(type) {
	case *grading.Number:
		p.Tolerance, p.NumberUnit = q.Tolerance, q.Unit
	case *grading.Choice:
		p.Choices = q.Options
	case *grading.Tiles:
		p.Rows, p.Cols = q.Rows, q.Cols
	}
	// The reveal takes the room to the step that shows the answer, when it
	// is a step of the run on screen.
	if st.Page == rooms.PageStepper && sol.Step > 0 && cp.NeedsTrace() {
		if q, err := canonicalRun(cp.Run.Values().Encode(), s.roomLimits.MaxQuery); err == nil && q == st.Query {
			p.Step = sol.Step
		}
	}
	return p, nil
}

// finite keeps an unbounded range's ends encodable as JSON (the poll
// crosses the broker).
func finite(x float64) float64 {
	switch {
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	}
	return x
}

// plainText is a checkpoint's question HTML as text: the room shows
// questions with textContent, never as markup.
func plainText(h string) string {
	z := html.NewTokenizer(strings.NewReader(h))
	var b strings.Builder
	for range 100_000 {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "p" || string(name) == "br" || string(name) == "li" {
				b.WriteByte(' ')
			}
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// lessonHref is the lesson page at the widget a room was presented from.
func lessonHref(slug, widget string) string {
	return "/lessons/" + url.PathEscape(slug) + "#" + url.PathEscape(widget)
}
