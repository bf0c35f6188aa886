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
	"flashstep/sandbox"
)

// labChild, set in its environment, makes this test binary gpuworker -lab:
// the tests run each student kernel in a process of its own, as the server
// does.
const labChild = "FS_LAB_CHILD"

// labProcess starts this test binary as the lab's worker, confined as the
// server confines it.
var labProcess = labrun.Process{Command: []string{os.Args[0]}, Sandbox: sandbox.Options{Env: []string{labChild + "=1"}}}

func labKernel(t *testing.T, req lab.KernelRequest, limit time.Duration) (lab.KernelReply, time.Duration, error) {
	t.Helper()
	res, err := labrun.RunProcess(context.Background(), labProcess, req, limit)
	return res.Reply, res.Took, err
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
	if !errors.Is(endErr, labrun.ErrTimeout) || endTook > 7*time.Second {
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
	s := labrun.New(labrun.Options{Command: labProcess.Command, Sandbox: labProcess.Sandbox, Sanitizer: sanitizer, Limit: 20 * time.Second})
	defer s.Close()
	for _, tc := range []struct{ name, source, verdict string }{{"racy", racy, "racecheck"}, {"solution", tiles.Solution, "pass"}} {
		start := time.Now()
		id, err := s.Submit(tiles, tc.source, tc.name, labrun.Racecheck, labrun.Owner{})
		if err != nil {
			t.Fatal(err)
		}
		var st labrun.Status
		for st.State != labrun.StateDone && st.State != labrun.StateCancelled && time.Since(start) < 90*time.Second {
			time.Sleep(50 * time.Millisecond)
			st, _ = s.Status(id)
		}
		if st.Verdict == nil || st.Verdict.Verdict != tc.verdict {
			t.Errorf("%s under racecheck: %s", tc.name, describe(st))
			req, _ := tiles.KernelRequestFor(tc.source, 6)
			p := labProcess
			p.Sanitizer, p.Tool = sanitizer, "racecheck"
			res, err := labrun.RunProcess(context.Background(), p, req, 60*time.Second)
			t.Logf("racecheck's own report (%v):\n%s\nstage %s %s", err, res.Report, res.Reply.Stage, res.Reply.Error)
			continue
		}
		t.Logf("%s under racecheck: %s in %v: %s\n%s", tc.name, st.Verdict.Verdict, time.Since(start), st.Verdict.Message, st.Verdict.Log)
	}
}

func describe(st labrun.Status) string {
	if st.Verdict == nil {
		return string(st.State) + ", no verdict"
	}
	return fmt.Sprintf("%s: %s: %s", st.Verdict.Verdict, st.Verdict.Message, st.Verdict.Log)
}

// TestLabSandbox: a student's kernel whose source names files (the
// server's source check out of the way: labrun.RunProcess takes any
// source) reads nothing of the server's; a kernel that prints passes and
// its output comes back beside the reply; sources that may overflow the
// compiler's stack get a verdict in words, never a crash report.
func TestLabSandbox(t *testing.T) {
	t.Setenv("FLASHSTEP_SERVER_SECRET", "s3cr3t-env")
	dir := t.TempDir()
	rootOnly := filepath.Join(dir, "root-only")
	if err := os.WriteFile(rootOnly, []byte("int s3cr3t_file;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	naive, _ := lab.ByID("naive-kernel")
	for _, name := range []string{"/proc/self/environ", rootOnly, "/etc/passwd", "/proc/self/net/tcp", fmt.Sprintf("/proc/%d/cmdline", os.Getpid())} {
		req, _ := naive.KernelRequestFor("#include \""+name+"\"\n"+naive.Solution, 8)
		res, err := labrun.RunProcess(context.Background(), labProcess, req, 30*time.Second)
		if err != nil {
			t.Fatalf("#include %s: %v", name, err)
		}
		t.Logf("#include %q: stage %s %s, sandbox %q, log:\n%s\nstderr: %s", name, res.Reply.Stage, res.Reply.Error, res.Reply.Sandbox, res.Reply.Log, res.Stderr)
		// 0100007F is 127.0.0.1 in /proc/net/tcp: another process's
		// connection; -test. is this (the parent's) command line.
		for _, leak := range []string{"s3cr3t", "FLASHSTEP_SERVER_SECRET", "root:x:0:0", "HOME=/root", "0100007F:", "-test."} {
			if strings.Contains(res.Reply.Log, leak) {
				t.Errorf("#include %s: the compiler's log quotes %q", name, leak)
			}
		}
		if res.Reply.Stage == "done" && !strings.HasPrefix(name, "/proc/self/") {
			t.Errorf("#include %s compiled: the file was read", name)
		}
	}

	// printf: the kernel passes, its lines come back as its output.
	src := strings.Replace(naive.Solution, "  if (!live) return;", "  if (threadIdx.x == 0) printf(\"hello from q-tile %d, batch-head %d\\n\", blockIdx.x, blockIdx.y);\n  if (!live) return;", 1)
	if src == naive.Solution {
		// The naive solution has no such line: print at the kernel's start.
		src = strings.Replace(naive.Solution, "{\n", "{\n  if (threadIdx.x == 0) printf(\"hello from q-tile %d, batch-head %d\\n\", blockIdx.x, blockIdx.y);\n", 1)
	}
	req, runs := naive.KernelRequestFor(src, 9)
	res, err := labrun.RunProcess(context.Background(), labProcess, req, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply.Stage != "done" {
		t.Fatalf("the printing kernel stopped at %s: %s %s\nstderr: %s", res.Reply.Stage, res.Reply.Error, res.Reply.Log, res.Stderr)
	}
	if m := gradeReply(t, naive, res.Reply, runs); m != nil {
		t.Errorf("the printing kernel fails: %+v", *m)
	}
	if !strings.Contains(res.Output, "hello from q-tile 0, batch-head 0\n") {
		t.Errorf("the printing kernel's output: %q (%d bytes cut)", res.Output, res.OutputCut)
	}
	t.Logf("printf: %d bytes shown, %d cut; first lines:\n%.300s", len(res.Output), res.OutputCut, res.Output)
	if os.Geteuid() == 0 && (!strings.Contains(res.Reply.Sandbox, "uid=65534") || !strings.Contains(res.Reply.Sandbox, "netns=true")) || !strings.Contains(res.Reply.Sandbox, "landlock=") {
		t.Errorf("the sandbox reports %q", res.Reply.Sandbox)
	}

	// Sources that may overflow the compiler's stack.
	// Each within the source's 64 KiB.
	deepParens := "__device__ int deep = " + strings.Repeat("(", 30000) + "1" + strings.Repeat(")", 30000) + ";\n"
	deepTemplate := "template <int N> struct Deep { static constexpr int v = Deep<N + 1>::v + 1; };\n__device__ int deep = Deep<0>::v;\n"
	deepConstexpr := "constexpr int f(int n) { return n == 0 ? 0 : 1 + f(n - 1); }\n__device__ int deep = f(1 << 30);\n"
	deepNest := "__device__ int deep() { " + strings.Repeat("{", 30000) + strings.Repeat("}", 30000) + "return 1; }\n"
	deepMacro := "#define A0 1\n" + func() string {
		var b strings.Builder
		for k := 1; k < 2000; k++ {
			fmt.Fprintf(&b, "#define A%d (A%d+1)\n", k, k-1)
		}
		return b.String()
	}() + "__device__ int deep = A1999;\n"
	deepArgs := "template <class T> struct X {};\n__device__ X<" + strings.Repeat("X<", 15000) + "int" + strings.Repeat(">", 15001) + " *deep;\n"
	deepBraces := "__device__ int deep[1] = " + strings.Repeat("{", 20000) + "1" + strings.Repeat("}", 20000) + ";\n"
	for name, src := range map[string]string{"parentheses": deepParens, "template": deepTemplate, "constexpr": deepConstexpr, "blocks": deepNest,
		"macros": deepMacro, "template arguments": deepArgs, "braces": deepBraces} {
		req, _ := naive.KernelRequestFor(src+naive.Solution, 10)
		res, err := labrun.RunProcess(context.Background(), labProcess, req, 60*time.Second)
		switch {
		case err != nil:
			t.Errorf("%s: no verdict: %v\nstderr: %.600s", name, err, res.Stderr)
		case res.Reply.Error != "":
			t.Errorf("%s: %s", name, res.Reply.Error)
		case res.Crash != "":
			t.Logf("%s: the compiler crashed, and the student reads: %s", name, res.Crash)
		case res.Reply.Stage == "compile":
			t.Logf("%s: the compiler refused it: %.300s", name, res.Reply.Log)
		default:
			t.Logf("%s: compiled (stage %s)", name, res.Reply.Stage)
		}
	}
}

// TestLabSandboxDiagnosis (FS_SANDBOX_DIAG=1) starts the lab's worker under
// variants of the sandbox and says which lets CUDA start: for a machine
// whose driver needs a path the sandbox does not grant.
func TestLabSandboxDiagnosis(t *testing.T) {
	if os.Getenv("FS_SANDBOX_DIAG") != "1" {
		t.Skip("FS_SANDBOX_DIAG=1 runs it")
	}
	naive, _ := lab.ByID("naive-kernel")
	req, _ := naive.KernelRequestFor(naive.Solution, 1)
	for _, v := range []struct {
		name string
		o    sandbox.Options
	}{
		{"default", sandbox.Options{}},
		{"host network", sandbox.Options{HostNetwork: true}},
		{"no landlock", sandbox.Options{NoLandlock: true}},
		{"network and scope kept", sandbox.Options{KeepNetwork: true, KeepScope: true}},
		{"rw /", sandbox.Options{ReadWrite: []string{"/"}}},
	} {
		p := labProcess
		v.o.Env = p.Sandbox.Env
		p.Sandbox = v.o
		res, err := labrun.RunProcess(context.Background(), p, req, 30*time.Second)
		t.Logf("%-32s err=%v stage=%s error=%q sandbox=%q stdout=%.200q stderr=%.300q", v.name, err, res.Reply.Stage, res.Reply.Error, res.Reply.Sandbox, res.Output, res.Stderr)
		if sanitizer, err := exec.LookPath("compute-sanitizer"); err == nil || fileExists("/usr/local/cuda/bin/compute-sanitizer") {
			if err != nil {
				sanitizer = "/usr/local/cuda/bin/compute-sanitizer"
			}
			p.Sanitizer, p.Tool = sanitizer, "memcheck"
			res, err := labrun.RunProcess(context.Background(), p, req, 60*time.Second)
			t.Logf("%-32s under memcheck: err=%v stage=%s error=%q sandbox=%q report=%.300q stderr=%.500q", v.name, err, res.Reply.Stage, res.Reply.Error, res.Reply.Sandbox, res.Report, res.Stderr)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestLabFMA times every kernel exercise's solution at the ladder's size
// as NVRTC compiles it by default (multiplies and adds fused into FMAs)
// and with --fmad=false (each rounded on its own, as the ladder's float32
// rungs do): how much of the lab's placement above rung 4 the fusion is.
func TestLabFMA(t *testing.T) {
	for _, e := range lab.All() {
		if e.Track != lab.TrackKernel {
			continue
		}
		req, flops := e.TimingFor(e.Solution)
		var ms [2]float64
		for k, nofma := range []bool{false, true} {
			req.NoFMA = nofma
			res, err := labrun.RunProcess(context.Background(), labProcess, req, 60*time.Second)
			if err != nil || res.Reply.Stage != "done" {
				t.Fatalf("%s (no FMA %v): %v %s %s", e.ID, nofma, err, res.Reply.Error, res.Reply.Log)
			}
			ms[k] = res.Reply.TimedMs
		}
		t.Logf("%s: %.2f ms (%.2f TFLOP/s) with FMAs, %.2f ms (%.2f TFLOP/s) without: %.2fx", e.ID, ms[0], flops/(ms[0]*1e9), ms[1], flops/(ms[1]*1e9), ms[1]/ms[0])
	}
}
