package classroom

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/problem"
	"flashstep/rooms"
)

// newPoll poses "predict m for row r after the next tile" on the room's
// current step. The next FlashAttention tile step after the one on screen
// is asked about, since the screen already shows the current step's m.
// The answer is read from the run's trace, obtained through the server's
// engines as the students' pages obtain it, and graded as the course's
// checkpoints are: the poll is a lessons.Checkpoint of ask m, and carries
// its tolerance.
func (s *Server) newPoll(ctx context.Context, st rooms.State, who string) (*rooms.Poll, error) {
	if st.Page != rooms.PageStepper {
		return nil, problem.InvalidField("type", "polls ask about the stepper's tile steps; this room shows the side by side")
	}
	q, err := url.ParseQuery(st.Query)
	if err != nil {
		return nil, err
	}
	run, err := kernels.ParseRun(q)
	if err != nil {
		return nil, err
	}
	c := run.Config()
	if c.Variant != instrument.VariantFlash2 || c.Timing {
		return nil, problem.InvalidField("type", "polls ask about FlashAttention's online softmax: run flash2 with a full trace")
	}
	trace, err := s.host.Trace(ctx, run, who)
	if err != nil {
		return nil, err
	}
	h := trace.H
	at := max(st.Step, 1) // the step on screen, from 1; the next step's index is the same number from 0
	k := -1
	for n := at; n < len(trace.Steps); n++ {
		if trace.Steps[n].Kind == instrument.KindFlashStep {
			k = n
			break
		}
	}
	if k < 0 {
		return nil, problem.InvalidField("step", "no tile step comes after step %d: step back to pose a poll", at)
	}
	r := trace.Steps[k]
	row := interestingRow(r)
	cp := lessons.Checkpoint{ID: "room", Ask: lessons.AskM, Format: grading.FormatNumber, Run: c,
		BH: r.BH, Row: r.I*h.Br + row, KV: r.J, Tol: 0.01}
	sol, err := cp.Solve(trace)
	if err != nil {
		return nil, err
	}
	runningMax := cp.Grader(sol).(*grading.Number) // m is a number
	head := ""
	if h.Batch*h.Heads > 1 {
		head = fmt.Sprintf(" of batch-head %d", r.BH)
	}
	return &rooms.Poll{
		Question: fmt.Sprintf("Predict m for row %d%s after kv-tile %d (step %d): the running max once this tile's scores are in.", cp.Row, head, r.J, k+1),
		Unit:     cp.Unit(), Step: sol.Step, Number: sol.Number, Tolerance: runningMax.Tolerance, NumberUnit: runningMax.Unit, Lo: sol.Lo, Hi: sol.Hi, Why: sol.Why,
		Display: sol.Display, Explain: strings.TrimSpace(sol.Explain),
	}, nil
}

// interestingRow is the row of a tile step whose m rises the most, a
// finite rise if any: a row whose m stays put is a dull question.
func interestingRow(r *instrument.Record) int {
	best, rise := 0, math.Inf(-1)
	for row := 0; row < r.RowsValid; row++ {
		d := float64(r.MNew[row] - r.MOld[row])
		if math.IsInf(d, 0) || math.IsNaN(d) {
			d = -1 // the first tile: every m rises from −∞
		}
		if d > rise {
			best, rise = row, d
		}
	}
	return best
}
