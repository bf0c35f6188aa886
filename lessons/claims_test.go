package lessons_test

import (
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/ladder"
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

// Lesson 11, "naive_mma: memory-bound on tensor cores" and "flash2_mma:
// the loop alone is not enough", held to the recordings the lesson's
// figures come from:
//   - at d = 128 naive_mma takes more than ten times its compute floor,
//     and well above (over 1.5 times) its memory floor: the lesson calls
//     it memory-bound without calling it close to that floor;
//   - at d = 64 its memory floor nearly doubles (1.9 to 2 times), and it
//     takes longer than at d = 128 but not twice as long, coming nearer
//     its memory floor there;
//   - at d = 128 flash2_mma is faster than naive_mma, by less than 10%
//     ("a few percent"), in the sweep and in the bench alike.
func TestClaimNaiveMMAAgainstItsFloors(t *testing.T) {
	t.Parallel()
	fig := func(tok string) float64 {
		t.Helper()
		v, err := lessons.FigureNumber(tok)
		if err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		return v
	}
	shape128, shape64 := lessons.FloorsOf(ladder.Shape{D: 128}), lessons.FloorsOf(ladder.Shape{D: 64})
	t128, t64 := fig("ladder naive_mma d=128 ms"), fig("ladder naive_mma d=64 ms")
	if t128 < 10*shape128.ComputeMs {
		t.Errorf("d=128: naive_mma's %.3g ms is under ten times its compute floor (%.3g ms); the lesson says more than ten", t128, shape128.ComputeMs)
	}
	if t128 < 1.5*shape128.SPMemoryMs {
		t.Errorf("d=128: naive_mma's %.3g ms is within 1.5 times its memory floor (%.3g ms); the lesson says it runs well above it", t128, shape128.SPMemoryMs)
	}
	if r := fig("ratio ladder naive_mma d=64 ms / ladder naive_mma d=128 ms"); r <= 1 || r >= 2 || math.Abs(r-t64/t128) > 1e-12 {
		t.Errorf("naive_mma takes %.3g times as long at d=64 as at d=128; the lesson says longer, not twice", r)
	}
	if f := shape64.SPMemoryMs / shape128.SPMemoryMs; f < 1.9 || f >= 2 {
		t.Errorf("naive_mma's memory floor grows %.3g times from d=128 to d=64; the lesson says it nearly doubles", f)
	}
	if near64, near128 := shape64.SPMemoryMs/t64, shape128.SPMemoryMs/t128; near64 <= near128 {
		t.Errorf("naive_mma reaches %.1f%% of its memory floor at d=64, %.1f%% at d=128; the lesson says nearer at d=64", 100*near64, 100*near128)
	}
	for _, src := range []string{"sweep", "ladder"} {
		f, n := fig(src+" flash2_mma d=128 tflops"), fig(src+" naive_mma d=128 tflops")
		if f <= n || f >= 1.1*n {
			t.Errorf("%s at d=128: flash2_mma %.1f TFLOP/s against naive_mma's %.1f; the lesson says a few percent faster", src, f, n)
		}
	}
	// The lesson says what is checked above, and none of what the
	// recordings contradict.
	raw, err := fs.ReadFile(lessons.CourseFiles, "course/11-roofline.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	for _, said := range []string{"more than ten times its compute floor", "well above its memory floor", "memory floor nearly doubles", "not twice as long", "barely faster than naive", "a few percent faster in both"} {
		if !strings.Contains(text, said) {
			t.Errorf("lesson 11 no longer says %q: check the claim it makes instead here", said)
		}
	}
	for _, wrong := range []string{"naive_mma beats it", "close to its memory floor", "about twice as long", "no faster than naive"} {
		if strings.Contains(text, wrong) {
			t.Errorf("lesson 11 says %q, which its recorded figures contradict", wrong)
		}
	}
}

// A ratio figure is its two figures' quotient, to one decimal.
func TestRatioFigure(t *testing.T) {
	t.Parallel()
	got, err := lessons.Figure("ratio ladder naive_mma d=64 ms / ladder naive_mma d=128 ms")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := lessons.FigureNumber("ladder naive_mma d=64 ms")
	b, _ := lessons.FigureNumber("ladder naive_mma d=128 ms")
	if want := strconv.FormatFloat(a/b, 'f', 1, 64); got != want {
		t.Errorf("the ratio reads %s, want %s", got, want)
	}
	for _, bad := range []string{"ratio ladder naive_mma d=64 ms", "ladder naive_mma d=64 ms / ladder naive_mma d=128 ms", "ratio peak flash2_fast d=64 / ladder naive_mma d=128 ms"} {
		if _, err := lessons.Figure(bad); err == nil {
			t.Errorf("%q read as a figure", bad)
		}
	}
}
