//go:build gpu

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/labrun"
	"flashstep/runner"
)

// labChild, set in its environment, makes this test binary gpuworker -lab:
// the tests run each student kernel in a process of its own, as the server
// does.
const labChild = "FS_LAB_CHILD"

func labKernel(t *testing.T, req lab.KernelRequest, limit time.Duration) (lab.KernelReply, time.Duration, error) {
	t.Helper()
	return runner.LabKernel(context.Background(), []string{os.Args[0]}, append(os.Environ(), labChild+"=1"), req, limit)
}

// gradeReply holds every run of a reply as the server would.
func gradeReply(t *testing.T, e *lab.Exercise, reply lab.KernelReply, runs []kernels.Config) *lab.Miss {
	t.Helper()
	if reply.Stage != "done" {
		t.Fatalf("%s: stopped at %s: %s %s", e.ID, reply.Stage, reply.Error, reply.Log)
	}
	for k, c := range runs {
		var recs []*instrument.Record
		if k == 0 {
			run, err := c.Check()
			if err != nil {
				t.Fatal(err)
			}
			if err := kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error { recs = append(recs, r); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if m := lab.GradeKernelRun(c, reply.Runs[k], recs, k == 0); m != nil {
			m.Run = k
			return m
		}
	}
	return nil
}

// TestLabReferenceSolutionsPass compiles every kernel exercise's solution
// with NVRTC in a process of its own and holds it to the reference
// kernel's trace and, on hidden runs, to the float64 reference; it reports
// the time from submission to the answer.
func TestLabReferenceSolutionsPass(t *testing.T) {
	for _, e := range lab.All() {
		if e.Track != lab.TrackKernel {
			continue
		}
		req, runs := e.KernelRequestFor(e.Solution, 7)
		reply, took, err := labKernel(t, req, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", e.ID, err)
		}
		if m := gradeReply(t, e, reply, runs); m != nil {
			t.Errorf("%s: the solution fails: %+v", e.ID, *m)
		}
		t.Logf("%s: compiled, ran %d runs and answered in %v (kernel %.3f ms on its own run)", e.ID, len(runs), took, reply.Runs[0].Ms)
	}
}

// TestLabBadKernels: each kind of broken kernel gets its verdict within the
// time limit, and a correct run started beside an endless one finishes.
func TestLabBadKernels(t *testing.T) {
	online, _ := lab.ByID("online-kernel")
	causal, _ := lab.ByID("causal-kernel")
	endless := strings.Replace(online.Solution, "  if (!live) return;", "  while (true) { }\n  if (!live) return;", 1)
	oob := strings.Replace(online.Solution, "  if (!live) return;", "  O[base + (size_t)1 << 40] = 1.f;\n  if (!live) return;", 1)
	trap := strings.Replace(online.Solution, "  if (!live) return;", "  asm(\"trap;\");\n  if (!live) return;", 1)
	offByOne := strings.Replace(causal.Solution, "!(causal && c0 + c > row)", "!(causal && c0 + c >= row)", 1)
	syntax := strings.Replace(online.Solution, "float mNew = m;", "float mNew = m", 1)
	for _, src := range []string{endless, oob, trap, offByOne, syntax} {
		if src == online.Solution || src == causal.Solution {
			t.Fatal("a bad kernel's edit no longer applies to the solution")
		}
	}

	// The endless kernel and a correct one side by side.
	var wg sync.WaitGroup
	var endErr error
	var endTook time.Duration
	wg.Go(func() {
		req, _ := online.KernelRequestFor(endless, 1)
		_, endTook, endErr = labKernel(t, req, 5*time.Second)
	})
	time.Sleep(500 * time.Millisecond) // the endless kernel is running
	req, runs := online.KernelRequestFor(online.Solution, 2)
	reply, took, err := labKernel(t, req, 30*time.Second)
	if err != nil || gradeReply(t, online, reply, runs) != nil {
		t.Errorf("a correct kernel beside an endless one: %v", err)
	}
	wg.Wait()
	if !errors.Is(endErr, runner.ErrLabTimeout) || endTook > 7*time.Second {
		t.Errorf("the endless kernel: %v after %v", endErr, endTook)
	}
	t.Logf("endless kernel stopped after %v; the correct one beside it answered in %v", endTook, took)

	for name, src := range map[string]string{"out of bounds": oob, "trap": trap} {
		req, _ := online.KernelRequestFor(src, 3)
		reply, took, err := labKernel(t, req, 30*time.Second)
		switch {
		case err != nil:
			t.Logf("%s: the process died: %v (%v)", name, err, took)
		case reply.Stage == "run" && reply.Error != "":
			t.Logf("%s: %s (%v)", name, reply.Error, took)
		default:
			t.Errorf("%s: no error: %+v", name, reply.Stage)
		}
	}
	{
		req, runs := causal.KernelRequestFor(offByOne, 4)
		reply, _, err := labKernel(t, req, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		m := gradeReply(t, causal, reply, runs)
		if m == nil || m.Run != 0 || m.I != 0 || m.J != 0 || m.Row != 0 {
			t.Errorf("the causal mask off by one: %+v, want a miss at row 0, q-tile 0, kv-tile 0", m)
		} else {
			t.Logf("causal off by one: %+v", *m)
		}
	}
	{
		req, _ := online.KernelRequestFor(syntax, 5)
		reply, _, err := labKernel(t, req, 30*time.Second)
		if err != nil || reply.Stage != "compile" || !strings.Contains(reply.Log, "student.cu") {
			t.Errorf("a syntax error: %v %+v", err, reply)
		}
		t.Logf("syntax error log: %s", reply.Log)
	}
}

// TestLabRaceOnSharedMemory: a tiled kernel that reads its K tile before
// every thread has loaded it. Without a sanitizer its verdict is the
// race's luck (logged); under compute-sanitizer's racecheck, through the
// server's own queue (labrun), it is "racecheck" with the report, while
// the solution passes racecheck clean.
func TestLabRaceOnSharedMemory(t *testing.T) {
	tiles, _ := lab.ByID("shared-tiles")
	racy := strings.Replace(tiles.Solution, "    __syncthreads();\n", "", 1)
	if racy == tiles.Solution {
		t.Fatal("the race's edit no longer applies to the solution")
	}
	req, runs := tiles.KernelRequestFor(racy, 6)
	reply, took, err := labKernel(t, req, 30*time.Second)
	switch {
	case err != nil:
		t.Logf("racy kernel without a sanitizer: the process died: %v", err)
	case reply.Stage != "done":
		t.Logf("racy kernel without a sanitizer: %s: %s", reply.Stage, reply.Error)
	default:
		t.Logf("racy kernel without a sanitizer, by the race's luck: miss %+v (%v)", gradeReply(t, tiles, reply, runs), took)
	}

	sanitizer := ""
	for _, p := range []string{"/usr/local/cuda/bin/compute-sanitizer"} {
		if _, err := os.Stat(p); err == nil {
			sanitizer = p
		}
	}
	if p, err := exec.LookPath("compute-sanitizer"); err == nil {
		sanitizer = p
	}
	if sanitizer == "" {
		t.Skip("compute-sanitizer is not installed here")
	}
	s := labrun.New(labrun.Options{Command: []string{os.Args[0]}, Env: append(os.Environ(), labChild+"=1"), Sanitizer: sanitizer, Limit: 20 * time.Second})
	defer s.Close()
	for _, tc := range []struct{ name, source, verdict string }{{"racy", racy, "racecheck"}, {"solution", tiles.Solution, "pass"}} {
		start := time.Now()
		id, err := s.Submit(tiles, tc.source, tc.name, labrun.Racecheck, labrun.Owner{})
		if err != nil {
			t.Fatal(err)
		}
		var st labrun.Status
		for st.State != "done" && st.State != "cancelled" && time.Since(start) < 90*time.Second {
			time.Sleep(50 * time.Millisecond)
			st, _ = s.Status(id)
		}
		if st.Verdict == nil || st.Verdict.Verdict != tc.verdict {
			t.Errorf("%s under racecheck: %s", tc.name, describe(st))
			raw := filepath.Join(t.TempDir(), "racecheck.log")
			req, _ := tiles.KernelRequestFor(tc.source, 6)
			_, _, err := runner.LabKernel(context.Background(), runner.Sanitize(sanitizer, "racecheck", raw, []string{os.Args[0]}), append(os.Environ(), labChild+"=1"), req, 60*time.Second)
			report, _ := os.ReadFile(raw)
			t.Logf("racecheck's own report (%v):\n%s", err, report)
			continue
		}
		t.Logf("%s under racecheck: %s in %v: %s\n%s", tc.name, st.Verdict.Verdict, time.Since(start), st.Verdict.Message, st.Verdict.Log)
	}
}

func describe(st labrun.Status) string {
	if st.Verdict == nil {
		return st.State + ", no verdict"
	}
	return fmt.Sprintf("%s: %s: %s", st.Verdict.Verdict, st.Verdict.Message, st.Verdict.Log)
}
