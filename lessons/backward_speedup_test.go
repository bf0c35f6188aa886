package lessons_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"flashstep/grading"
	"flashstep/ladder"
	"flashstep/lessons"
	"flashstep/recordings"
)

// backwardAnswerMoves solves a backward-speedup checkpoint from the
// backward recording with each kernel's rows made faster by a factor of
// its own (times divided by it, TFLOP/s times it): the answer must move by
// the two kernels' factors, and its shown value with it.
func backwardAnswerMoves(t *testing.T, rng *rand.Rand, name string, c *lessons.Checkpoint, want grading.Solution) {
	t.Helper()
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	rec := *tab.Backward
	rec.Rows = append([]ladder.BackwardRow(nil), rec.Rows...)
	factor := map[string]float64{c.Ladder.Rung: 1.3 + 0.4*rng.Float64(), c.Ladder.Against: 0.5 + 0.4*rng.Float64()}
	for k := range rec.Rows {
		for kernel, f := range factor {
			if strings.HasPrefix(rec.Rows[k].Kernel, kernel+"_bc") {
				rec.Rows[k].TFLOPs *= f
				rec.Rows[k].Ms /= f
			}
		}
	}
	doctored := *tab
	doctored.Backward = &rec
	got, err := c.SolveLadder(&doctored)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	expect := want.Number * factor[c.Ladder.Rung] / factor[c.Ladder.Against]
	if math.Abs(got.Number-expect) > 1e-9*expect || got.Display == want.Display {
		t.Errorf("%s: from the doctored recording %s (%g), want %g (the recorded answer %s)", name, got.Display, got.Number, expect, want.Display)
	}
}

// The backward speed-up is the recording's: each kernel's fastest tile on
// the shape, TFLOP/s over TFLOP/s, below the bound the compute floor sets;
// a kernel the recording lacks is an error naming it.
func TestBackwardSpeedupFromTheRecording(t *testing.T) {
	t.Parallel()
	c := course(t)
	var cp *lessons.Checkpoint
	for _, l := range c.Lessons {
		for _, k := range l.Checkpoints {
			if k.Ask == lessons.AskBackwardSpeedup {
				cp = k
			}
		}
	}
	if cp == nil {
		t.Fatal("no backward-speedup checkpoint in the course")
	}
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	best := func(kernel string) float64 {
		x := 0.0
		for _, r := range tab.Backward.Rows {
			if strings.HasPrefix(r.Kernel, kernel+"_bc") && r.D == cp.Ladder.Shape.D && r.Causal == cp.Ladder.Shape.Causal {
				x = max(x, r.TFLOPs)
			}
		}
		return x
	}
	got, err := cp.SolveLadder(tab)
	if err != nil {
		t.Fatal(err)
	}
	if want := best(cp.Ladder.Rung) / best(cp.Ladder.Against); math.Abs(got.Number-want) > 1e-12 || !(got.Number < got.Hi) {
		t.Errorf("%s: %v (bound %v), the rows say %v", cp.ID, got.Number, got.Hi, want)
	}
	empty := *tab
	empty.Backward = &ladder.BackwardRecord{}
	if _, err := cp.SolveLadder(&empty); err == nil || !strings.Contains(err.Error(), cp.Ladder.Rung) {
		t.Errorf("a recording without %s: %v", cp.Ladder.Rung, err)
	}
}
