package lab

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"flashstep/lessons"
)

// TestExercisesLoad holds every exercise to what its page needs: a
// statement, hints, a starter that is not the solution, a run to compare
// with, and, for the loop track, the slips its browser test runs.
func TestExercisesLoad(t *testing.T) {
	t.Parallel()
	all := All()
	if len(all) != 7 {
		t.Fatalf("%d exercises, want 7 (a)–(g)", len(all))
	}
	for _, e := range all {
		if e.Statement == "" || len(e.Hints) < 3 || e.Starter == "" || e.Solution == "" {
			t.Errorf("%s: statement %d bytes, %d hints, starter %d bytes, solution %d bytes", e.ID, len(e.Statement), len(e.Hints), len(e.Starter), len(e.Solution))
		}
		if e.Starter == e.Solution {
			t.Errorf("%s: the starter is the solution", e.ID)
		}
		if !strings.Contains(e.Starter, e.Entry) || !strings.Contains(e.Solution, e.Entry) {
			t.Errorf("%s: the starter or the solution does not define %s", e.ID, e.Entry)
		}
		if e.Run.N == 0 {
			t.Errorf("%s: no run to compare with", e.ID)
		}
		if e.Track == TrackLoop && len(e.Slips) < 3 {
			t.Errorf("%s: %d slips, want three classic ones for its test", e.ID, len(e.Slips))
		}
		if got, ok := ByID(e.ID); !ok || got != e {
			t.Errorf("ByID(%q) does not find it", e.ID)
		}
	}
	if all[0].Next() != all[1] || all[len(all)-1].Next() != nil {
		t.Errorf("Next does not walk the sequence")
	}
}

// TestExercisesPractiseLessons: every exercise names a lesson of the course
// it practises, so that the lesson can link to it.
func TestExercisesPractiseLessons(t *testing.T) {
	t.Parallel()
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range All() {
		if _, ok := course.Lesson(e.Practises); !ok {
			t.Errorf("%s practises %q, which is no lesson", e.ID, e.Practises)
		}
	}
}

// TestKernelReplyCarriesEveryFloat: −∞, NaN and subnormals cross the pipe
// bit for bit (JSON's numbers hold none of the first two).
func TestKernelReplyCarriesEveryFloat(t *testing.T) {
	t.Parallel()
	odd := []float32{float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32, -0, 1.5}
	in := KernelReply{Stage: "done", Runs: []KernelRun{{O: odd, LSE: odd[:2], Steps: []StepSeen{{BH: 1, M: Float(math.Inf(-1)), L: Float(math.NaN()), O: odd}}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out KernelReply
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	got := out.Runs[0]
	same := func(a, b []float32) bool {
		if len(a) != len(b) {
			return false
		}
		for k := range a {
			if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
				return false
			}
		}
		return true
	}
	if !same(got.O, odd) || !same(got.LSE, odd[:2]) || !same(got.Steps[0].O, odd) ||
		!math.IsInf(float64(got.Steps[0].M), -1) || !math.IsNaN(float64(got.Steps[0].L)) || got.Steps[0].BH != 1 {
		t.Errorf("round trip: %+v", got)
	}
}

// TestHarnessDocNamesTheHarness: what the students read of the harness
// names what the harness defines, and each kernel exercise's starter has
// the signature it describes.
func TestHarnessDocNamesTheHarness(t *testing.T) {
	t.Parallel()
	code := Harness(4, 4, 8)
	for _, name := range []string{"FS_BR", "FS_BC", "FS_D", "INFINITY", "fs_record_step", "fs_record_out"} {
		if !strings.Contains(code, name) || !strings.Contains(HarnessDoc, name) {
			t.Errorf("%s: in the harness %v, in its doc %v", name, strings.Contains(code, name), strings.Contains(HarnessDoc, name))
		}
	}
	if !strings.Contains(HarnessDoc, fmt.Sprint(MaxSourceBytes>>10)+" KiB") {
		t.Errorf("the doc does not give the source limit, %d KiB", MaxSourceBytes>>10)
	}
	for _, e := range All() {
		if e.Track != TrackKernel {
			continue
		}
		sig := "float *LSE, int N, float scale)"
		if e.CausalFlag {
			sig = "float *LSE, int N, float scale, int causal)"
		}
		if !strings.Contains(e.Starter, `extern "C" __global__ void attention(`) || !strings.Contains(e.Starter, sig) {
			t.Errorf("%s: the starter's signature is not the harness's", e.ID)
		}
	}
}
