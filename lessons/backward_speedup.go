package lessons

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/sweep"
)

// backwardSpeedup asks how many times faster one backward rung is than
// another on a shape of the backward bench, each at its fastest tile, as
// the ladder page's backward ladder shows them. Both rows do the same
// FLOPs, so the ratio of their TFLOP/s is the ratio of their times. Its
// tolerance is relative (tol, 2%).
type backwardSpeedup struct{ onTheLadder }

// backwardRows are the backward kernels of the registry, by name.
func backwardRows() []string {
	var names []string
	for _, v := range instrument.Variants {
		if kernels.Info(v).Backward {
			names = append(names, v.String())
		}
	}
	return names
}

func backwardRow(d *directive, key string) string {
	rows := backwardRows()
	v := d.text(key)
	if !slices.Contains(rows, v) {
		d.failf("%s= must name a backward kernel (%s), got %q", key, strings.Join(rows, ", "), v)
	}
	return v
}

func (backwardSpeedup) parse(c *Checkpoint, d *directive) {
	if c.Preset != "" {
		d.failf("ask=%s reads the backward bench's recorded figures, not a preset's run", c.Ask)
	}
	q := &c.Ladder
	q.Rung, q.Against = backwardRow(d, "rung"), backwardRow(d, "against")
	if q.Against == q.Rung && q.Rung != "" {
		d.failf("rung= and against= name the same kernel")
	}
	parseShape(c, d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.02)
}

func (backwardSpeedup) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	return solveLadder(c)
}

// backwardCell is a backward rung's fastest tile on a shape.
func backwardCell(tab *ladder.Table, name string, sh ladder.Shape) (ladder.Cell, error) {
	k := slices.Index(ladder.Shapes, sh)
	for _, r := range tab.Backward.Ladder() {
		if r.Variant.String() == name && k >= 0 && !r.Cells[k].Missing {
			return r.Cells[k], nil
		}
	}
	return ladder.Cell{}, fmt.Errorf("the backward bench recorded no %s at %s", name, shapeWords(sh))
}

func (backwardSpeedup) solveFrom(c *Checkpoint, tab *ladder.Table) (grading.Solution, error) {
	q := c.Ladder
	cell, err := backwardCell(tab, q.Rung, q.Shape)
	if err != nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	other, err := backwardCell(tab, q.Against, q.Shape)
	if err != nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	f := FloorsOf(q.Shape)
	const bwdFLOPs = sweep.BackwardFLOPs // the backward's FLOPs over the forward's
	x := cell.TFLOPs / other.TFLOPs
	hi := other.Ms / (bwdFLOPs * f.ComputeMs)
	shown := strconv.FormatFloat(x, 'f', 2, 64)
	if x < 1 {
		shown = c.shown(x)
	}
	rec := tab.Backward
	return grading.Solution{Number: x, Display: shown + "×", Lo: 0, Hi: hi,
		Why: fmt.Sprintf("a ratio of two speeds is positive, and %s cannot finish the backward at %s in less than its compute floor, %g times the forward's, %.0f µs, so it is at most %.0f / %.0f = %.1f times faster than %s",
			q.Rung, shapeWords(q.Shape), bwdFLOPs, 1000*bwdFLOPs*f.ComputeMs, 1000*other.Ms, 1000*bwdFLOPs*f.ComputeMs, hi, q.Against),
		Explain: fmt.Sprintf("At %s, the backward bench on %s (%s) timed %s's fastest tile, %s, at %.1f TFLOP/s and %s's, %s, at %.1f: %.1f / %.1f = %s, the same as the ratio of their times (%s ms against %s ms), since both do the same FLOPs.",
			shapeWords(q.Shape), rec.GPU, rec.Date, q.Rung, cell.Kernel, cell.TFLOPs, q.Against, other.Kernel, other.TFLOPs,
			cell.TFLOPs, other.TFLOPs, shown, ms(other.Ms), ms(cell.Ms))}, nil
}

// pose's hint says which figures of the ladder page to take and what to
// do with them, never the result.
func (backwardSpeedup) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Times, func(float64) string {
		q := c.Ladder
		return fmt.Sprintf("Not quite. A speed-up is a ratio of speeds doing the same work: in the ladder page's backward ladder at %s, divide %s's TFLOP/s by %s's.", c.ladderAt(), q.Rung, q.Against)
	})
}

// source names the backward bench's recording.
func (backwardSpeedup) source(*Checkpoint) string {
	tab, err := LadderTable()
	if err != nil || tab.Backward == nil {
		return "the backward bench's recorded figures"
	}
	r := tab.Backward
	return fmt.Sprintf("the backward bench's recorded figures (%s, %s, by %s)", r.GPU, r.Date, r.Command)
}
