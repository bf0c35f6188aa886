package lessons

import (
	"fmt"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/ladder"
)

// triedWorth asks what an idea tried on a backward rung and left out made
// of that rung: the ladder page's table of tries (ladder.BackwardTried,
// held to the calls' raw figures), TFLOP/s with the idea over TFLOP/s
// without, both timed in one call. A question to predict before the
// lesson says: nothing in a trace gives it.
type triedWorth struct{}

func (triedWorth) ownInput() {}

// parse reads run=, the run that tried the idea (docs/LADDER.md names
// it), and idea=, which of the run's ideas (from 1) where it tried more
// than one.
func (triedWorth) parse(c *Checkpoint, d *directive) {
	if c.Preset != "" {
		d.failf("ask=%s reads the ladder's ideas tried and left out, not a preset's run", c.Ask)
	}
	run := d.text("run")
	if run == "" {
		d.failf("needs run= (the run that tried the idea, as docs/LADDER.md names it)")
		return
	}
	var at []int
	var runs []string
	for k, t := range ladder.BackwardTried {
		if t.Run == run {
			at = append(at, k)
		}
		if len(runs) == 0 || runs[len(runs)-1] != t.Run {
			runs = append(runs, t.Run)
		}
	}
	if len(at) == 0 {
		d.failf("run= must name a run of the ideas tried and left out (%s), got %q", strings.Join(runs, ", "), run)
		return
	}
	n := d.whole("idea", 1, 1, len(at))
	if len(at) > 1 && d.attrs["idea"] == "" {
		d.failf("run %s tried %d ideas: idea= says which (from 1)", run, len(at))
	}
	c.Tried = at[min(max(n, 1), len(at))-1] // an idea= out of range has failed above
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.02)
}

func (triedWorth) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	if c.Tried < 0 || c.Tried >= len(ladder.BackwardTried) {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: no tried idea %d", c.ID, c.Tried)
	}
	t := ladder.BackwardTried[c.Tried]
	x := t.Worth()
	shown := strconv.FormatFloat(x, 'f', 2, 64)
	if x < 1 {
		shown = c.shown(x)
	}
	// The rung with the idea cannot run faster than the tensor cores'
	// peak, in the recorded TFLOP/s's units (the bench counts the FLOPs
	// it does, 2.5 times the forward's, over the time it takes).
	peak := TensorPeakFLOPs / 1e12
	return grading.Solution{Number: x, Display: shown + "×", Lo: 0, Hi: peak / t.Before,
		Why: fmt.Sprintf("a ratio of two speeds is positive, and no kernel runs the backward at d = 64 faster than the tensor cores' peak, %.0f TFLOP/s, so the idea can make %s at most %.0f / %.1f = %.1f times as fast",
			peak, t.On, peak, t.Before, peak/t.Before),
		Explain: fmt.Sprintf("Run %s on the %s timed %s at %.1f TFLOP/s without the idea and %.1f with it, in the same call (the means of its rounds): %.1f / %.1f = %s. The ladder page lists it with the other ideas tried at d = 64 and left out.",
			t.Run, t.GPU, t.On, t.Before, t.After, t.After, t.Before, shown)}, nil
}

// pose's hint says what the ratio is, never the result nor its side of
// 1; the lesson's own hint (hint=) can say what to think about.
func (triedWorth) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Times, func(float64) string {
		t := ladder.BackwardTried[c.Tried]
		return fmt.Sprintf("Not quite. The answer is %s's TFLOP/s with the idea divided by its TFLOP/s without it, the two timed in one call.", t.On)
	})
}

// source names the ladder's table of tries.
func (triedWorth) source(c *Checkpoint) string {
	if c.Tried < 0 || c.Tried >= len(ladder.BackwardTried) {
		return "the ladder's ideas tried and left out"
	}
	t := ladder.BackwardTried[c.Tried]
	return fmt.Sprintf("the ladder's ideas tried and left out (run %s on the %s, docs/ladder-runs/%s)", t.Run, t.GPU, t.Raw)
}
