package lessons_test

import (
	"io/fs"
	"math"
	"regexp"
	"testing"

	"flashstep/lessons"
	"flashstep/lessons/loop"
)

// The lessons' claims about their runs, each held to the run: a lesson
// whose run changes (a new seed, a new preset) fails here rather than
// tell a student something its widget contradicts.

// Lesson 12, "A bug that hides": on the large-logits run, row 4's max
// jumps from about −35 to about 50 at kv-tile 1, where the correct α is
// about 1e-37 and the stale-max loop's 0, and the two loops agree to the
// bit; at kv-tile 2 the max stays put, the correct α is 1, the slipped one
// 0, and the slipped l falls to about 1e-33.
func TestClaimABugThatHides(t *testing.T) {
	t.Parallel()
	c := lessons.Runs["large-logits"]
	run, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	const row = 4
	q, r := row/run.Br, row%run.Br
	good := loop.Run(&run, 0, q, nil)
	bad := loop.Run(&run, 0, q, []loop.Slip{loop.StaleMax})
	g1, b1, g2, b2 := good.Steps[1], bad.Steps[1], good.Steps[2], bad.Steps[2]
	near := func(x float32, want, within float64) bool { return math.Abs(float64(x)-want) <= within }
	if !near(g1.MPrev[r], -35, 1) || !near(g1.M[r], 50, 1) {
		t.Errorf("kv-tile 1: row %d's max goes %g → %g, not about −35 → 50", row, g1.MPrev[r], g1.M[r])
	}
	if a := float64(g1.Alpha[r]); a <= 0 || math.Abs(math.Log10(a)+37) > 0.5 || b1.Alpha[r] != 0 {
		t.Errorf("kv-tile 1: α %g correct, %g slipped; the lesson says about 1e-37 and 0", g1.Alpha[r], b1.Alpha[r])
	}
	if g1.L[r] != b1.L[r] || g1.M[r] != b1.M[r] {
		t.Errorf("kv-tile 1: the loops differ (l %g against %g)", g1.L[r], b1.L[r])
	}
	if g2.M[r] != g1.M[r] || g2.Alpha[r] != 1 || b2.Alpha[r] != 0 {
		t.Errorf("kv-tile 2: max %g → %g, α %g correct, %g slipped; the lesson says it stays put, 1 and 0", g1.M[r], g2.M[r], g2.Alpha[r], b2.Alpha[r])
	}
	if l := float64(b2.L[r]); l <= 0 || math.Abs(math.Log10(l)+33) > 0.5 || g2.L[r] != 1 {
		t.Errorf("kv-tile 2: slipped l %g, correct %g; the lesson says about 1e-33 against 1", b2.L[r], g2.L[r])
	}
	if p := loop.Part(good, bad, r, run.D); p.KV != 2 {
		t.Errorf("the loops part at kv-tile %d; the lesson says 2", p.KV)
	}
}

// A measured speed is quoted through a figure token, never typed: only the
// datasheet's rates may stand as numbers in a lesson's text.
func TestNoSpeedIsTypedByHand(t *testing.T) {
	t.Parallel()
	datasheet := map[string]bool{"989": true, "989.4": true, "67": true}
	re := regexp.MustCompile(`(\d[\d.,]*)\s*(TFLOP/s|GFLOP/s)`)
	files, err := fs.Glob(lessons.CourseFiles, "course/*.md")
	if err != nil || len(files) == 0 {
		t.Fatal(err)
	}
	for _, name := range files {
		src, _ := fs.ReadFile(lessons.CourseFiles, name)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			if !datasheet[m[1]] {
				t.Errorf("%s: %q is typed; quote it as {{ladder …}}, {{sweep …}} or {{bench …}} (lessons/figures.go)", name, m[0])
			}
		}
	}
}
