package lessons_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/grading"
	"flashstep/internal/testrand"
	"flashstep/ladder"
	"flashstep/lessons"
	"flashstep/recordings"
)

// ladderRowOf names the ladder row a recorded timing belongs to: the
// sweep's rows by their variant, the bench's by their kernel's family.
func ladderRowOf(m map[string]any) string {
	if v, ok := m["variant"].(string); ok {
		return v
	}
	k, _ := m["kernel"].(string)
	for _, family := range []string{"flash2_fast", "flash2_mma", "naive_mma", "flash3_wgmma", "flash3_tma", "flash3_ws", "flash3_pingpong"} {
		if strings.HasPrefix(k, family) {
			return family
		}
	}
	return ""
}

// scaleTimes makes every timing of a row in v slower by the row's factor.
func scaleTimes(v any, factor map[string]float64) {
	switch x := v.(type) {
	case map[string]any:
		if ms, ok := x["ms"].(float64); ok {
			if f, ok := factor[ladderRowOf(x)]; ok {
				x["ms"] = ms * f
				if tf, ok := x["tflops"].(float64); ok {
					x["tflops"] = tf / f
				}
			}
		}
		for _, e := range x {
			scaleTimes(e, factor)
		}
	case []any:
		for _, e := range x {
			scaleTimes(e, factor)
		}
	}
}

// doctoredLadder builds the ladder's table, as the ladder page does, from
// copies of the recordings in which each row's timings are slower by its
// own random factor (1.05 and up: slower only, so no floor is beaten).
func doctoredLadder(t *testing.T, rng *rand.Rand) (*ladder.Table, map[string]float64) {
	t.Helper()
	factor := map[string]float64{}
	// Each row's factor in a band of its own, so no two are near enough to
	// leave a speed-up's shown value unchanged.
	for k, row := range []string{"naive", "flash2", "flash2_mma", "flash2_fast", "naive_mma", "flash3_wgmma", "flash3_tma", "flash3_ws", "flash3_pingpong"} {
		factor[row] = 1.05 + 0.5*float64(k) + 0.3*rng.Float64()
	}
	files := fstest.MapFS{}
	for _, name := range []string{"ladder-h100.json", "sweep-h100.json", "sdpa-h100.json"} {
		raw, err := recordings.Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if name != "sdpa-h100.json" {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			scaleTimes(v, factor)
			raw, _ = json.Marshal(v)
		}
		files[name] = &fstest.MapFile{Data: raw}
	}
	tab, err := ladder.Build(files)
	if err != nil {
		t.Fatal(err)
	}
	return tab, factor
}

// ladderAnswerMoves: a ladder checkpoint's answer follows the recording.
// With every row's times scaled by its own factor, a speed-up moves by the
// ratio of the two rows' factors and a percentage of a floor by one over
// the row's factor, exactly.
func ladderAnswerMoves(t *testing.T, rng *rand.Rand, name string, c *lessons.Checkpoint, want grading.Solution) {
	t.Helper()
	tab, factor := doctoredLadder(t, rng)
	got, err := c.SolveLadder(tab)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	expect := want.Number / factor[c.Ladder.Rung]
	if c.Ask == lessons.AskLadderSpeedup {
		expect = want.Number * factor[c.Ladder.Against] / factor[c.Ladder.Rung]
	}
	if math.Abs(got.Number-expect) > 1e-9*expect || got.Display == want.Display {
		t.Errorf("%s: from the doctored recording %s (%g), want %g (the recorded answer %s, factors %v)", name, got.Display, got.Number, expect, want.Display, factor)
	}
}

// The floors' arithmetic agrees with docs/LADDER.md's table and with the
// recordings: every recorded TFLOP/s is the shape's FLOPs over its time.
func TestFloors(t *testing.T) {
	t.Parallel()
	for _, sh := range ladder.Shapes {
		f := lessons.FloorsOf(sh)
		gflop, computeMs := 549.8, 0.556
		if sh.Causal {
			gflop, computeMs = 274.9, 0.278
		}
		for _, c := range []struct {
			what      string
			got, want float64
			digits    float64
		}{
			{"GFLOP", f.FLOPs / 1e9, gflop, 0.1}, {"compute floor ms", f.ComputeMs, computeMs, 0.001},
			{"MB moved", f.Bytes / 1e6, 268.4, 0.1}, {"memory floor ms", f.MemoryMs, 0.080, 0.001},
		} {
			if math.Abs(c.got-c.want) > c.digits/2 {
				t.Errorf("%+v: %s %g, docs/LADDER.md says %g", sh, c.what, c.got, c.want)
			}
		}
		if f.B*ladder.N != 16384 || f.H*sh.D != 2048 {
			t.Errorf("%+v: B=%d H=%d is not the benchmark shape", sh, f.B, f.H)
		}
	}
	// naive_mma's S and P at d = 128: docs/LADDER.md's 21.5 GB, 6.4 ms.
	f := lessons.FloorsOf(ladder.Shape{D: 128})
	if sp := f.SPBytes / 1e9; math.Abs(sp-21.5) > 0.05 || math.Abs(f.SPBytes/lessons.HBMBytesPerSec*1e3-6.4) > 0.05 {
		t.Errorf("naive_mma's S and P at d=128: %.2f GB", sp)
	}
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range append(tab.Rows, tab.Partner) {
		for s, c := range row.Cells {
			if c.Missing {
				continue
			}
			tf := lessons.FloorsOf(tab.Shapes[s]).FLOPs / (c.Ms / 1e3) / 1e12
			if math.Abs(tf-c.TFLOPs) > 0.005*c.TFLOPs {
				t.Errorf("%s on %+v: FLOPs over %g ms is %.2f TFLOP/s, the recording says %.2f", row.Rung.Name, tab.Shapes[s], c.Ms, tf, c.TFLOPs)
			}
		}
	}
}

// The ladder's checkpoints, asked on every row and shape: the answer is the
// recorded figures' arithmetic; a right answer (in percent, with or
// without the sign) is right, a wrong one wrong, and an answer past the
// bound gets a hint that names it.
func TestLadderCheckpoints(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	tab, err := lessons.LadderTable()
	if err != nil {
		t.Fatal(err)
	}
	cell := func(name string, sh ladder.Shape) ladder.Cell {
		for _, r := range append(tab.Rows, tab.Partner) {
			if r.Rung.Name == name {
				return r.Cells[func() int {
					for k, s := range tab.Shapes {
						if s == sh {
							return k
						}
					}
					return -1
				}()]
			}
		}
		t.Fatalf("no row %s", name)
		return ladder.Cell{}
	}
	load := func(attrs string) *lessons.Checkpoint {
		t.Helper()
		c, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + "::: checkpoint id=c " + attrs + "\nq?\n:::\n")}})
		if err != nil {
			t.Fatalf("%s: %v", attrs, err)
		}
		return c.Lessons[0].Checkpoints[0]
	}
	for _, sh := range ladder.Shapes {
		causal := map[bool]string{false: "0", true: "1"}[sh.Causal]
		f := lessons.FloorsOf(sh)
		for _, q := range []struct {
			attrs string
			want  float64
		}{
			{"ask=ladder-speedup rung=flash2_fast against=naive_mma", cell("naive_mma", sh).Ms / cell("flash2_fast", sh).Ms},
			{"ask=ladder-speedup rung=flash2 against=naive", cell("naive", sh).Ms / cell("flash2", sh).Ms},
			{"ask=ladder-floor rung=flash2_fast floor=compute", 100 * f.ComputeMs / cell("flash2_fast", sh).Ms},
			{"ask=ladder-floor rung=flash2_fast floor=memory", 100 * f.MemoryMs / cell("flash2_fast", sh).Ms},
			{"ask=ladder-floor rung=naive_mma floor=memory", 100 * f.SPMemoryMs / cell("naive_mma", sh).Ms},
			{"ask=ladder-floor rung=naive_mma floor=compute", 100 * f.ComputeMs / cell("naive_mma", sh).Ms},
		} {
			attrs := fmt.Sprintf("%s d=%d causal=%s", q.attrs, sh.D, causal)
			c := load(attrs)
			if c.NeedsTrace() || !strings.Contains(c.Source(), "H100") {
				t.Errorf("%s: needs a trace %v, source %q", attrs, c.NeedsTrace(), c.Source())
			}
			s, err := c.Solve(nil)
			if err != nil {
				t.Fatalf("%s: %v", attrs, err)
			}
			if math.Abs(s.Number-q.want) > 1e-12*q.want || !(s.Number > 0) || s.Number > s.Hi {
				t.Errorf("%s: %g (bounds %g..%g), want %g", attrs, s.Number, s.Lo, s.Hi, q.want)
			}
			right := fmt.Sprintf("%.3g", q.want*1.01)
			answers := []string{right}
			if c.Ask == lessons.AskLadderFloor {
				answers = append(answers, right+"%", right+" %")
			} else {
				answers = append(answers, right+"×", right+"x", right+" X")
			}
			for _, a := range answers {
				if v := c.Grade(a, false, s); !v.Correct {
					t.Errorf("%s: %q graded %+v", attrs, a, v)
				}
			}
			// 5% off either way is wrong, with the same hint: the rule, not
			// the side the answer lies on.
			hi, lo := c.Grade(fmt.Sprintf("%.3g", q.want*1.05), false, s), c.Grade(fmt.Sprintf("%.3g", q.want*0.95), false, s)
			rule := map[string]string{lessons.AskLadderSpeedup: "ratio of times", lessons.AskLadderFloor: "floor is the"}[c.Ask]
			if hi.Status != "wrong" || lo.Status != "wrong" || hi.Hint != lo.Hint || !strings.Contains(hi.Hint, rule) {
				t.Errorf("%s: 5%% off graded %+v and %+v, want wrong with the rule (%q)", attrs, hi, lo, rule)
			}
			for _, dir := range []string{"higher", "lower", "larger", "smaller", "too "} {
				if strings.Contains(hi.Hint, dir) {
					t.Errorf("%s: the hint says which way: %s", attrs, hi.Hint)
				}
			}
			if v := c.Grade("-1", false, s); v.Status != "invalid" || !strings.Contains(v.Hint, "cannot be right") {
				t.Errorf("%s: -1 graded %+v", attrs, v)
			}
			past := fmt.Sprintf("%g", s.Hi*1.01)
			v := c.Grade(past, false, s)
			limit := "100%"
			if c.Ask == lessons.AskLadderSpeedup {
				limit = "compute floor"
			}
			if v.Status != "invalid" || !strings.Contains(v.Hint, limit) {
				t.Errorf("%s: %s graded %+v, want a hint naming the %s", attrs, past, v, limit)
			}
		}
	}
	// A ratio across two recordings is refused, not computed.
	c := load("ask=ladder-speedup rung=flash2_fast against=naive d=128")
	if _, err := c.Solve(nil); err == nil || !strings.Contains(err.Error(), "two recordings") {
		t.Errorf("flash2_fast against the sweep's naive: %v", err)
	}
	// A row missing from the recording is an error, not a zero.
	tab2, _ := doctoredLadder(t, testrand.New(t))
	tab2.Partner.Cells[0].Missing = true
	if _, err := load("ask=ladder-floor rung=naive_mma floor=memory d=64").SolveLadder(tab2); err == nil || !strings.Contains(err.Error(), "no recorded figure") {
		t.Errorf("a missing figure: %v", err)
	}
}

// The trace's p: what the tensor-core kernel computed, and the bf16 value
// its P·V multiplies by.
func TestPCheckpointReadsTheTrace(t *testing.T) {
	t.Parallel()
	r := engines(t)
	c, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	l, _ := c.Lesson("tensor-cores")
	cp, ok := l.Checkpoint("fast-p")
	if !ok {
		t.Fatal("no checkpoint fast-p")
	}
	tr := traceOf(t, r, cp.Run)
	s, err := cp.Solve(tr)
	if err != nil {
		t.Fatal(err)
	}
	st := tr.Steps[s.Step-1]
	row, col := cp.Row%cp.Run.Br, cp.Key%cp.Run.Bc
	if st.J != cp.Key/cp.Run.Bc || float32(s.Number) != st.P[row*cp.Run.Bc+col] {
		t.Errorf("p %g from step %d (kv-tile %d), the trace holds %g", s.Number, s.Step, st.J, st.P[row*cp.Run.Bc+col])
	}
	if e := math.Exp(float64(st.S[row*cp.Run.Bc+col] - st.MNew[row])); math.Abs(e-s.Number) > 1e-3 {
		t.Errorf("p %g is not exp(S − m_new) = %g", s.Number, e)
	}
	if !strings.Contains(s.Explain, "bf16") {
		t.Errorf("the tensor-core run's explanation says nothing of bf16: %s", s.Explain)
	}
}
