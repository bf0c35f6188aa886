package lessons_test

import (
	"math"
	"testing"
	"testing/fstest"

	"flashstep/ladder"
	"flashstep/lessons"
)

// TestTriedWorthNamesItsIdea: run= and idea= pick the ladder's entry they
// name (a run that tried two ideas, by its place among them), and the
// answer is that entry's figure with the idea over its figure without,
// shown as the ladder page shows it.
func TestTriedWorthNamesItsIdea(t *testing.T) {
	t.Parallel()
	const front = "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	course, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front +
		"::: checkpoint id=one ask=tried-worth run=am\nq\n:::\n\n" +
		"::: checkpoint id=two ask=tried-worth run=an idea=2\nq\n:::\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var second, am = -1, -1
	seen := 0
	for k, e := range ladder.BackwardTried {
		if e.Run == "an" {
			if seen++; seen == 2 {
				second = k
			}
		}
		if e.Run == "am" {
			am = k
		}
	}
	for _, c := range []struct {
		id   string
		want int
	}{{"one", am}, {"two", second}} {
		var cp *lessons.Checkpoint
		for _, k := range course.Lessons[0].Checkpoints {
			if k.ID == c.id {
				cp = k
			}
		}
		if cp == nil || cp.Tried != c.want {
			t.Fatalf("%s: checkpoint %+v, want the ladder's entry %d", c.id, cp, c.want)
		}
		got, err := cp.Solve(nil)
		if err != nil {
			t.Fatal(err)
		}
		e := ladder.BackwardTried[c.want]
		if math.Abs(got.Number-e.After/e.Before) > 1e-12 || !(got.Hi > 1) {
			t.Errorf("%s: answer %g (bounded by %g), want %g", c.id, got.Number, got.Hi, e.After/e.Before)
		}
	}
}
