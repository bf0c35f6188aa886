package lessons_test

import (
	"bufio"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/ladder"
	"flashstep/lessons"
)

// Sentences of lessons 11 and 13 that a review corrected, held to the
// measurement or the recording they come from.

// lessonSource is a lesson's Markdown as written.
func lessonSource(t *testing.T, file string) string {
	t.Helper()
	src, err := fs.ReadFile(lessons.CourseFiles, "course/"+file)
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// prose is Markdown with its line breaks made spaces, as a sentence reads.
func prose(s string) string { return strings.Join(strings.Fields(s), " ") }

// ncuTensorPipe reads Nsight Compute's output of the run that the
// lessons' tensor-pipe figures come from (docs/LADDER.md, run l): each
// kernel's sm__pipe_tensor_op_hmma_cycles_active in percent, and its grid.
func ncuTensorPipe(t *testing.T) (busy map[string]float64, grid map[string][2]int) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "ladder-runs", "2026-11-24-l-ncu-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	busy, grid = map[string]float64{}, map[string][2]int{}
	head := regexp.MustCompile(`^  (\w+) \((\d+), (\d+), 1\)x`)
	var kernel string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := head.FindStringSubmatch(line); m != nil {
			kernel = m[1]
			x, _ := strconv.Atoi(m[2])
			y, _ := strconv.Atoi(m[3])
			grid[kernel] = [2]int{x, y}
			continue
		}
		if f := strings.Fields(line); len(f) == 3 && f[0] == "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" {
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			busy[kernel] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return busy, grid
}

// Lesson 11, "flash2_fast: compute-bound, far from the peak": the tensor
// pipe's busy share of rung 6, with the shape it was measured at. Each
// figure is Nsight Compute's for the kernel of the ladder's table at that
// head dim (the tiles the lesson names), launched on the ladder's shape
// (N = 4096 in q-tiles of 128 rows, B·H blocks down), rounded as written.
func TestClaimTensorPipeBusy(t *testing.T) {
	t.Parallel()
	text := prose(lessonSource(t, "11-roofline.md"))
	m := regexp.MustCompile(`tensor pipe busy (\d+)% of the time at \$d = (\d+)\$ in (\d+)×(\d+) tiles, and (\d+)% at \$d = (\d+)\$ in (\d+)×(\d+) tiles \(one launch each at \$N = 4096\$, the ladder's shapes`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("lesson 11 no longer gives the tensor pipe's busy share with its head dim and tiles; update this test with it")
	}
	busy, grid := ncuTensorPipe(t)
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 5} {
		pct, _ := strconv.Atoi(m[k])
		d, _ := strconv.Atoi(m[k+1])
		br, _ := strconv.Atoi(m[k+2])
		bc, _ := strconv.Atoi(m[k+3])
		name := "flash2_fast_br" + m[k+2] + "_bc" + m[k+3] + "_d" + m[k+1]
		got, ok := busy[name]
		if !ok {
			t.Errorf("lesson 11 gives %d%% for %s, which the Nsight Compute run did not measure (it has %v)", pct, name, busy)
			continue
		}
		if int(math.Round(got)) != pct {
			t.Errorf("lesson 11 gives %s's tensor pipe %d%% busy; Nsight Compute measured %.2f%%", name, pct, got)
		}
		sh := ladder.Shape{D: d}
		f := lessons.FloorsOf(sh)
		if g := grid[name]; g[0]*br != ladder.N || g[1] != f.B*f.H {
			t.Errorf("%s ran on a grid of %v: not N = %d in q-tiles of %d and B·H = %d, the ladder's shape at d = %d", name, g, ladder.N, br, f.B*f.H, d)
		}
		for _, r := range tab.Rows {
			if r.Rung.Name != "flash2_fast" {
				continue
			}
			for s, shape := range tab.Shapes {
				// The bench names its build flash2_fast_d64_br128_bc128_w4.
				tiles := "_d" + m[k+1] + "_br" + m[k+2] + "_bc" + m[k+3] + "_"
				if shape == sh && !strings.Contains(r.Cells[s].Kernel, tiles) {
					t.Errorf("the ladder's flash2_fast at d = %d ran %q, not the %d×%d tiles the lesson gives the pipe of (%s)", d, r.Cells[s].Kernel, br, bc, name)
				}
			}
		}
	}
}

// Lesson 11, the reveal after f32-speedup: with the mask flash2's time
// halves with its work (within 10%), while naive's falls by less than a
// quarter: it skips only its masked dot products.
func TestClaimCausalFloat32Rungs(t *testing.T) {
	t.Parallel()
	fig := func(tok string) float64 {
		t.Helper()
		v, err := lessons.FigureNumber(tok)
		if err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		return v
	}
	text := prose(lessonSource(t, "11-roofline.md"))
	for _, want := range []string{"its time halves with its work", "its time falls only to"} {
		if !strings.Contains(text, want) {
			t.Fatalf("lesson 11 no longer says %q; update this test", want)
		}
	}
	if r := fig("ladder flash2 d=128 causal ms") / fig("ladder flash2 d=128 ms"); r < 0.45 || r > 0.55 {
		t.Errorf("flash2 takes %.3g of its time with the mask; the lesson says it halves", r)
	}
	if r := fig("ladder naive d=128 causal ms") / fig("ladder naive d=128 ms"); r < 0.75 || r >= 1 {
		t.Errorf("naive takes %.3g of its time with the mask; the lesson says it falls, but only a little", r)
	}
}

// Lesson 13, "P from L needs no running max": the row it names has, in
// the backward's recording, the L that lesson 5's run (the same inputs,
// forward) wrote for it in its epilogue, to the six significant digits the
// rows table shows; and it is the row the checkpoint that follows asks
// about.
func TestClaimBackwardLIsTheForwards(t *testing.T) {
	t.Parallel()
	text := prose(lessonSource(t, "13-backward.md"))
	m := regexp.MustCompile(`Row (\d+)'s \$L\$ here is the log-sum-exp that lesson 5's run wrote for it in its epilogue, to the six digits the table shows`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("lesson 13 no longer compares a row's L with lesson 5's; update this test")
	}
	row, _ := strconv.Atoi(m[1])
	if sc := gradeCourse(t, "bwd-p-left"); sc.c.Row != row {
		t.Errorf("the text names row %d's L, the checkpoint after it asks about row %d", row, sc.c.Row)
	}
	r := engines(t)
	lse := func(preset string, kind instrument.Kind) float32 {
		t.Helper()
		c, err := lessons.Runs[preset].Config()
		if err != nil {
			t.Fatal(err)
		}
		tr := traceOf(t, r, c)
		if tr.H.Source != instrument.SourceRecording {
			t.Fatalf("%s: the trace is not its recording", preset)
		}
		for _, st := range tr.Steps {
			if st.Kind == kind && st.BH == 0 && st.I == row/tr.H.Br {
				return st.LSE[row%tr.H.Br]
			}
		}
		t.Fatalf("%s: no %v record of row %d", preset, kind, row)
		return 0
	}
	fwd, bwd := lse("loop-order", instrument.KindEpilogue), lse("bwd-16", instrument.KindBwdPre)
	six := func(x float32) string { return strconv.FormatFloat(float64(x), 'g', 6, 32) }
	if six(fwd) != six(bwd) {
		t.Errorf("row %d: the backward's L is %s, the forward's log-sum-exp %s (six digits %s against %s)", row, num(float64(bwd)), num(float64(fwd)), six(bwd), six(fwd))
	}
	f, _ := lessons.Runs["loop-order"].Config()
	b, _ := lessons.Runs["bwd-16"].Config()
	if f.N != b.N || f.D != b.D || f.Seed != b.Seed || f.Pattern != b.Pattern {
		t.Errorf("loop-order (%s) and bwd-16 (%s) do not run the same inputs", f.Key(), b.Key())
	}
}
