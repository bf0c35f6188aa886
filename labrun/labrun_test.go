package labrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/labrun/labruntest"
	"flashstep/ladder"
	"flashstep/problem"
	"flashstep/recordings"
)

func TestMain(m *testing.M) {
	if labruntest.IsFake() {
		os.Exit(labruntest.Fake())
	}
	os.Exit(m.Run())
}

func fake(o Options) *Service {
	o.Command = labruntest.Command()
	s := New(o)
	return s
}

// wait polls submission id (as a page does) until it is done.
func wait(t *testing.T, s *Service, id string, within time.Duration) Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, ok := s.Status(id)
		if !ok {
			t.Fatalf("submission %s is unknown", id)
		}
		if st.State == "done" || st.State == "cancelled" {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("submission %s not done within %v", id, within)
	return Status{}
}

func TestVerdicts(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("causal-kernel")
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	s := fake(Options{Limit: 3 * time.Second, Concurrent: 4, Ladder: tab})
	defer s.Close()
	for _, tc := range []struct {
		source, verdict string
		check           func(v *Verdict) bool
	}{
		{"PASS", "pass", func(v *Verdict) bool {
			// Timed at the ladder's size (the fake takes 250 ms: 4·4·32·4096²·64 / 2 FLOPs
			// under the mask, 1.1 TFLOP/s) and set among the rungs, slowest first.
			p := v.Placed
			if v.Miss != nil || len(v.Steps) == 0 || p == nil || p.Ms != 250 || math.Abs(p.TFLOPs-4*4*32*4096*4096*64/2/0.25e12) > 1e-9 || len(p.Rungs) < 4 {
				return false
			}
			yours := 0
			for k, r := range p.Rungs {
				if r.Yours {
					yours++
				}
				if k > 0 && p.Rungs[k-1].TFLOPs > r.TFLOPs {
					return false
				}
			}
			return yours == 1 && strings.Contains(p.Shape, "causal")
		}},
		{"LSE", "fail", func(v *Verdict) bool {
			return v.Miss != nil && v.Miss.Quantity == "LSE" && v.Miss.Row == 2 && v.Miss.Run == 0 && strings.Contains(v.Message, "your LSE")
		}},
		{"NEGINF", "fail", func(v *Verdict) bool {
			b, err := json.Marshal(v) // the page reads it: −∞ must cross
			return err == nil && v.Miss != nil && v.Miss.Quantity == "LSE" && strings.Contains(string(b), `"-Infinity"`) && strings.Contains(v.Message, "-Inf")
		}},
		{"COMPILE", "compile", func(v *Verdict) bool { return v.Line == 7 && strings.Contains(v.Log, "expected") }},
		{"CRASH", "error", func(v *Verdict) bool { return strings.Contains(v.Message, "without an answer") }},
		{"SLEEP", "timeout", func(v *Verdict) bool { return v.Took < 5 }},
		{"COMPILECRASH", "compile", func(v *Verdict) bool {
			return strings.HasPrefix(v.Message, "The compiler stopped on your source: it crashed (SIGSEGV)") && !strings.Contains(v.Message, "goroutine")
		}},
		{"PRINTF", "pass", func(v *Verdict) bool {
			// 1000 lines of printf: the first 8 KiB are shown, the rest counted.
			total := 0
			for row := range 1000 {
				total += len(fmt.Sprintf("row %d: m = %g\n", row, float64(row)/8))
			}
			return strings.HasPrefix(v.Output, "row 0: m = 0\nrow 1: m = 0.125\n") && len(v.Output) == lab.MaxOutputBytes && v.OutputCut == total-lab.MaxOutputBytes
		}},
	} {
		id, err := s.Submit(e, "// "+tc.source, "10.0.0."+tc.source, NoCheck, Owner{})
		if err != nil {
			t.Fatal(err)
		}
		st := wait(t, s, id, 20*time.Second)
		if st.Verdict == nil || st.Verdict.Verdict != tc.verdict || !tc.check(st.Verdict) {
			t.Errorf("%s: %+v", tc.source, st.Verdict)
		}
	}
}

// TestSubmissionReadsNothingOfTheServer: with the source check out of the
// way (the service takes any source; the pages check it first), a kernel
// whose compiler quotes what it includes, as NVRTC does, gets the server's
// environment and a file only root may read as errors, never as text.
func TestSubmissionReadsNothingOfTheServer(t *testing.T) {
	t.Setenv("FLASHSTEP_SERVER_SECRET", "s3cr3t-env")
	dir := t.TempDir()
	secret := dir + "/root-only"
	if err := os.WriteFile(secret, []byte("s3cr3t-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	e, _ := lab.ByID("causal-kernel")
	s := fake(Options{Limit: 5 * time.Second})
	defer s.Close()
	id, err := s.Submit(e, "// INCLUDE:/proc/self/environ INCLUDE:"+secret+" INCLUDE:/etc/passwd", "10.0.0.1", NoCheck, Owner{})
	if err != nil {
		t.Fatal(err)
	}
	v := wait(t, s, id, 20*time.Second).Verdict
	if v == nil || v.Verdict != "compile" {
		t.Fatalf("verdict %+v, want compile", v)
	}
	t.Logf("the compiler's log:\n%s", v.Log)
	for _, leak := range []string{"s3cr3t", "FLASHSTEP_SERVER_SECRET", "root:x:0:0"} {
		if strings.Contains(v.Log, leak) {
			t.Errorf("the compiler's log quotes %q: %s", leak, v.Log)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(v.Log, "cannot open source file \""+secret) {
		t.Errorf("the root-only file was not refused: %s", v.Log)
	}
}

// TestChecks: a submission may ask for a compute-sanitizer check where it
// is installed; what the check finds is its verdict, with the report, and
// a clean kernel passes (untimed: the sanitizer slows it). Each check's
// report is read for its own findings only.
func TestChecks(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("online-kernel")
	s := fake(Options{Limit: 5 * time.Second})
	s.o.Sanitizer = os.Args[0]
	defer s.Close()
	for k, tc := range []struct {
		source  string
		check   Check
		verdict string
		report  string
	}{
		{"// OOBREAD PASS", Memcheck, "memcheck", "Invalid __global__ read"},
		{"// PASS", Memcheck, "pass", ""},
		{"// RACE PASS", Racecheck, "racecheck", "Warning: Race reported between Write access"},
		{"// RACEERR PASS", Racecheck, "racecheck", "Error: Race reported between Write access"},
		{"// PASS", Racecheck, "pass", ""},
		{"// RACE PASS", Memcheck, "pass", ""}, // memcheck does not look for races
		{"// OOBREAD PASS", Racecheck, "pass", ""},
	} {
		id, err := s.Submit(e, tc.source, fmt.Sprint("m", k), tc.check, Owner{})
		if err != nil {
			t.Fatal(err)
		}
		v := wait(t, s, id, 20*time.Second).Verdict
		if v == nil {
			t.Fatalf("%s under %s: no verdict", tc.source, tc.check)
		}
		reported := v.Log != "" && (tc.report == "" || strings.Contains(v.Log, tc.report))
		if v.Verdict != tc.verdict || reported != (tc.report != "") || v.Placed != nil {
			t.Errorf("%s under %s: verdict %q, log %q, placed %v", tc.source, tc.check, v.Verdict, v.Log, v.Placed)
		}
		if tc.verdict == "pass" && !strings.Contains(v.Message, string(tc.check)+" found no") {
			t.Errorf("%s under %s: the message does not say what was checked: %q", tc.source, tc.check, v.Message)
		}
	}
	plain := fake(Options{})
	defer plain.Close()
	if _, err := plain.Submit(e, "// PASS", "m", Racecheck, Owner{}); err == nil || !strings.Contains(err.Error(), "compute-sanitizer") {
		t.Errorf("racecheck where none is installed: %v", err)
	}
	for _, bad := range []string{"1", "synccheck", "MEMCHECK"} {
		if _, err := ParseCheck(bad); err == nil || !strings.Contains(err.Error(), "check must be") {
			t.Errorf("ParseCheck(%q): %v", bad, err)
		}
	}
}

// TestQueueIsFair: one kernel at a time, each address one live submission,
// the queue's place reported, a full queue refused as busy, nothing taken
// while the track is off.
func TestQueueIsFair(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("online-kernel")
	s := fake(Options{Concurrent: 1, QueueMax: 2, Limit: 10 * time.Second})
	defer s.Close()
	var ids []string
	for _, addr := range []string{"a", "b", "c"} {
		id, err := s.Submit(e, "// SLOW", addr, NoCheck, Owner{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for k, id := range ids {
		st, _ := s.Status(id)
		if k == 0 && st.State != "running" || k > 0 && (st.State != "queued" || st.Ahead != k) {
			t.Errorf("submission %d: %+v", k, st)
		}
	}
	var busy *problem.Error
	if _, err := s.Submit(e, "// SLOW", "a", NoCheck, Owner{}); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Errorf("a second submission from one address: %v", err)
	}
	if _, err := s.Submit(e, "// SLOW", "d", NoCheck, Owner{}); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Errorf("past the queue's bound: %v", err)
	}

	// Students of a room behind one address (a school's NAT) each have
	// their own live submission; the same student twice is told to wait.
	nat := fake(Options{Concurrent: 1, QueueMax: 8, Limit: 10 * time.Second})
	defer nat.Close()
	for _, student := range []string{"s1", "s2", "s3"} {
		if _, err := nat.Submit(e, "// SLOW", "10.0.0.1", NoCheck, Owner{Room: "ABCDEFGH", Student: student}); err != nil {
			t.Errorf("student %s behind the class's one address: %v", student, err)
		}
	}
	if _, err := nat.Submit(e, "// SLOW", "10.0.0.1", NoCheck, Owner{Room: "ABCDEFGH", Student: "s2"}); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Errorf("a second submission of one student: %v", err)
	}
	for _, id := range ids {
		if st := wait(t, s, id, 20*time.Second); st.Verdict == nil || st.Verdict.Verdict != "pass" {
			t.Errorf("%+v", st)
		}
	}
	if _, err := s.Submit(e, "// PASS", "a", NoCheck, Owner{}); err != nil {
		t.Errorf("after its verdict, an address may submit again: %v", err)
	}
	off := New(Options{})
	if _, err := off.Submit(e, "// PASS", "a", NoCheck, Owner{}); !errors.Is(err, ErrOff) {
		t.Errorf("the track off: %v", err)
	}
	loop, _ := lab.ByID("online-step")
	var fe kernels.FieldErrors
	if _, err := s.Submit(loop, "// PASS", "z", NoCheck, Owner{}); !errors.As(err, &fe) || fe[0].Field != "exercise" || !strings.Contains(fe[0].Message, "runs in the browser") {
		t.Errorf("a loop exercise for the GPU: %v, want a field error saying it runs in the browser", err)
	}
	if _, err := s.Submit(e, "#include \"/proc/self/environ\"\n// PASS", "y", NoCheck, Owner{}); !errors.As(err, &fe) || fe[0].Field != "source" || !strings.Contains(fe[0].Message, "line 1: #include") {
		t.Errorf("a source naming a file, handed to the service itself: %v", err)
	}
	if _, err := off.Submit(loop, "// PASS", "z", NoCheck, Owner{}); !errors.As(err, &fe) {
		t.Errorf("a loop exercise, the track off: %v, want the same field error", err)
	}
	// A submission from a room's page is its student's: the status says
	// so to the server, and never to whoever holds the ticket.
	id, err := s.Submit(e, "// PASS", "owned", NoCheck, Owner{Room: "ABCDEFGH", Student: "the-student"})
	if err != nil {
		t.Fatal(err)
	}
	st := wait(t, s, id, 20*time.Second)
	b, _ := json.Marshal(st)
	if st.Room != "ABCDEFGH" || st.Student != "the-student" || strings.Contains(string(b), "the-student") || !strings.Contains(string(b), `"room":"ABCDEFGH"`) {
		t.Errorf("an owned submission's status: %+v, as JSON %s", st, b)
	}
	if _, err := s.Submit(e, strings.Repeat("x", lab.MaxSourceBytes+1), "y", NoCheck, Owner{}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an oversized source: %v", err)
	}
}

// TestOneAddressCannotFillTheQueue: a room's identity costs one GET of
// its page, so one address fetching a new one before each submission is
// still held to Options.PerAddress live submissions (8 by default), and
// told how many it has; other addresses are not.
func TestOneAddressCannotFillTheQueue(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("online-kernel")
	s := fake(Options{Concurrent: 1, Limit: time.Minute})
	defer s.Close()
	for k := range 8 {
		if _, err := s.Submit(e, "// SLEEP", "198.51.100.7", NoCheck, Owner{Room: "ABCDEFGH", Student: fmt.Sprint("s", k)}); err != nil {
			t.Fatalf("submission %d from one address, each a new student: %v", k, err)
		}
	}
	var busy *problem.Error
	_, err := s.Submit(e, "// SLEEP", "198.51.100.7", NoCheck, Owner{Room: "ABCDEFGH", Student: "s8"})
	if !errors.As(err, &busy) || busy.Code != problem.Busy || !strings.Contains(busy.Message, "8 kernels from your address") {
		t.Errorf("a ninth from one address, a new student: %v, want busy saying 8 kernels from the address", err)
	}
	if _, err := s.Submit(e, "// SLEEP", "198.51.100.7", NoCheck, Owner{}); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Errorf("a ninth from one address, no student: %v, want busy", err)
	}
	if _, err := s.Submit(e, "// SLEEP", "198.51.100.8", NoCheck, Owner{Room: "ABCDEFGH", Student: "other"}); err != nil {
		t.Errorf("another address: %v", err)
	}
}

// TestAddressCountsOnlyLiveSubmissions: a submission leaves its address's
// count when it is cancelled, queued (the janitor) or running (its
// process killed, run), so the address may submit again.
func TestAddressCountsOnlyLiveSubmissions(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("online-kernel")
	s := fake(Options{Concurrent: 1, PerAddress: 2, Limit: time.Minute, Abandoned: 2 * time.Second})
	defer s.Close()
	const addr = "198.51.100.9"
	var ids []string
	for _, student := range []string{"s1", "s2"} {
		id, err := s.Submit(e, "// SLEEP", addr, NoCheck, Owner{Room: "ABCDEFGH", Student: student})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var busy *problem.Error
	if _, err := s.Submit(e, "// SLEEP", addr, NoCheck, Owner{Room: "ABCDEFGH", Student: "s3"}); !errors.As(err, &busy) || busy.Code != problem.Busy || !strings.Contains(busy.Message, "2 kernels from your address") {
		t.Fatalf("a third past PerAddress 2: %v", err)
	}
	// Nobody asks about them: the running one is killed, the queued one
	// cancelled (asking would keep them; the state is read directly).
	state := func(id string) State {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.byID[id].state
	}
	deadline := time.Now().Add(20 * time.Second)
	for state(ids[0]) != "cancelled" || state(ids[1]) != "cancelled" {
		if time.Now().After(deadline) {
			t.Fatalf("not cancelled: %s, %s", state(ids[0]), state(ids[1]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, student := range []string{"s3", "s4"} {
		if _, err := s.Submit(e, "// SLEEP", addr, NoCheck, Owner{Room: "ABCDEFGH", Student: student}); err != nil {
			t.Errorf("after both were cancelled, %s from the address: %v", student, err)
		}
	}
	if _, err := s.Submit(e, "// SLEEP", addr, NoCheck, Owner{Room: "ABCDEFGH", Student: "s5"}); !errors.As(err, &busy) || busy.Code != problem.Busy {
		t.Errorf("a third again: %v, want busy", err)
	}
}

// TestAbandonedSubmissionIsKilled: a student who stops asking loses the
// GPU: the running kernel's process is killed and the next one runs.
func TestAbandonedSubmissionIsKilled(t *testing.T) {
	t.Parallel()
	e, _ := lab.ByID("online-kernel")
	// A second to be abandoned: the poll below asks every 20 ms, but on a
	// loaded machine (make test's packages side by side on two cores) 300 ms
	// once passed between two asks, and the live submission was cancelled.
	s := fake(Options{Concurrent: 1, Limit: time.Minute, Abandoned: time.Second})
	defer s.Close()
	gone, err := s.Submit(e, "// SLEEP", "gone", NoCheck, Owner{})
	if err != nil {
		t.Fatal(err)
	}
	next, err := s.Submit(e, "// PASS", "next", NoCheck, Owner{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st := wait(t, s, next, 20*time.Second)
	if st.Verdict == nil || st.Verdict.Verdict != "pass" || time.Since(start) > 10*time.Second {
		t.Errorf("the next submission: %+v after %v", st, time.Since(start))
	}
	if st, _ := s.Status(gone); st.State != "cancelled" {
		t.Errorf("the abandoned one: %+v", st)
	}
}

// TestRecordedSolutions: every kernel exercise ships its solution's
// verdict from a GPU, a pass whose every record matches the reference
// kernel's (the mirror's trace of the exercise's run), timed and placed.
// The same records with one value moved past the grader's tolerance fail.
func TestRecordedSolutions(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, e := range lab.All() {
		if e.Track != lab.TrackKernel {
			continue
		}
		if e.Recorded == nil {
			t.Errorf("%s: no recorded.json", e.ID)
			continue
		}
		var rec Recording
		if err := json.Unmarshal(e.Recorded, &rec); err != nil {
			t.Fatalf("%s: recorded.json: %v", e.ID, err)
		}
		v := rec.Verdict
		if rec.GPU == "" || rec.Date == "" || v.Verdict != "pass" || v.Placed == nil || !(v.Placed.TFLOPs > 0) || len(v.Steps) == 0 {
			t.Errorf("%s: recorded %q on %q (%s), placed %+v, %d steps", e.ID, v.Verdict, rec.GPU, rec.Date, v.Placed, len(v.Steps))
			continue
		}
		run, err := e.Run.Check()
		if err != nil {
			t.Fatal(err)
		}
		var recs []*instrument.Record
		kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error { recs = append(recs, r); return nil })
		if m := lab.GradeSteps(e.Run, v.Steps, recs); m != nil {
			t.Errorf("%s: the recorded solution's records differ from the reference kernel's: %+v", e.ID, *m)
		}
		// Poisoned: one record's m, l or an element of O moved by 1% of the
		// largest |value| of its kind (the grader's tolerance is at most
		// 2e-4 of it), or a NaN.
		var maxM, maxL, maxO float32 = 1, 0, 0
		for _, st := range v.Steps {
			maxM, maxL = max(maxM, abs32(float32(st.M))), max(maxL, abs32(float32(st.L)))
			for _, o := range st.O {
				maxO = max(maxO, abs32(o))
			}
		}
		poisoned := append([]lab.StepSeen(nil), v.Steps...)
		k := rng.IntN(len(poisoned))
		s := poisoned[k]
		s.O = append(lab.Floats(nil), s.O...)
		switch rng.IntN(4) {
		case 0:
			s.M += lab.Float(0.01 * maxM)
		case 1:
			s.L += lab.Float(0.01 * maxL)
		case 2:
			s.O[rng.IntN(len(s.O))] += 0.01 * maxO
		case 3:
			s.O[rng.IntN(len(s.O))] = float32(math.NaN())
		}
		poisoned[k] = s
		if m := lab.GradeSteps(e.Run, poisoned, recs); m == nil {
			t.Errorf("%s: record %d poisoned still passes", e.ID, k)
		}
	}
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }
