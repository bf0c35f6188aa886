// Package labruntest is, for tests, a stand-in for the GPU worker's -lab
// mode: a test binary that calls Fake from its TestMain answers as a
// student's kernel would, by what its source asks for, through the same
// pipes, process and watchdog as the real one. No GPU, no compiler: the
// numbers are the mirror's and the float64 reference's.
package labruntest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lab"
)

// IsFake says whether this test binary was started as the GPU worker's
// -lab mode (no test run has -lab for its only argument), or as
// compute-sanitizer around it.
func IsFake() bool {
	return len(os.Args) == 2 && os.Args[1] == "-lab" || len(os.Args) > 2 && os.Args[1] == "--tool"
}

// Command is the command that starts this test binary as the fake (its
// TestMain must call Fake when IsFake), confined as the real worker is.
func Command() []string { return []string{os.Args[0]} }

// Fake is a kernel that is right ("PASS"), sleeps forever ("SLEEP"),
// does not compile ("COMPILE"), crashes its compiler ("COMPILECRASH": the
// process dies of SIGSEGV after saying it is compiling), kills its
// process ("CRASH"), prints ("PRINTF": a line per row of its run, on its
// standard output, as a kernel's printf does), or is right but one LSE,
// off by 0.5 ("LSE") or −∞ ("NEGINF").
func Fake() int {
	if os.Args[1] == "--tool" {
		return fakeSanitizer()
	}
	var req lab.KernelRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		return 2
	}
	src := req.Source
	if req.Timing != nil { // the ladder's size: 250 ms, as a slow first kernel
		return reply(lab.KernelReply{Stage: "done", TimedMs: 250})
	}
	switch {
	case strings.Contains(src, "SLEEP"):
		time.Sleep(time.Hour)
	case strings.Contains(src, "INCLUDE:"):
		// As NVRTC does with #include "path": it reads the file and
		// quotes it in its errors.
		log := ""
		for _, f := range strings.Fields(src) {
			if path, ok := strings.CutPrefix(f, "INCLUDE:"); ok {
				if b, err := os.ReadFile(path); err != nil {
					log += fmt.Sprintf("student.cu(1): catastrophic error: cannot open source file %q: %v\n", path, err)
				} else {
					log += fmt.Sprintf("%s(1): error: this declaration has no storage class or type specifier: %q\n", path, b)
				}
			}
		}
		return reply(lab.KernelReply{Stage: "compile", Log: log})
	case strings.Contains(src, "COMPILECRASH"):
		progress("compile")
		syscall.Kill(os.Getpid(), syscall.SIGSEGV)
		time.Sleep(time.Second)
		return 2
	case strings.Contains(src, "CRASH"):
		return 3
	case strings.Contains(src, "COMPILE"):
		return reply(lab.KernelReply{Stage: "compile", Log: "student.cu(7): error: expected a \";\"\n1 error detected"})
	}
	if strings.Contains(src, "SLOW") {
		time.Sleep(300 * time.Millisecond)
	}
	progress("run")
	if strings.Contains(src, "PRINTF") {
		for row := range 1000 {
			fmt.Printf("row %d: m = %g\n", row, float64(row)/8)
		}
	}
	out := lab.KernelReply{Stage: "done"}
	for k, q := range req.Runs {
		v, _ := url.ParseQuery(q)
		run, err := kernels.ParseRun(v)
		if err != nil {
			return reply(lab.KernelReply{Stage: "run", Error: err.Error()})
		}
		c := run.Config()
		var got lab.KernelRun
		if k == 0 {
			kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error {
				if r.Kind == instrument.KindFlashStep {
					for row := range r.RowsValid {
						got.Steps = append(got.Steps, lab.StepSeen{BH: r.BH, I: r.I, J: r.J, R: row, M: lab.Float(r.MNew[row]), L: lab.Float(r.L[row]),
							O: append([]float32(nil), r.O[row*c.D:(row+1)*c.D]...)})
					}
				}
				return nil
			})
		}
		for bh := range c.Batch * c.Heads {
			o, lse := kernels.Reference(kernels.GenerateInputs(&c, bh), c.N, c.D, c.Causal)
			for _, x := range o {
				got.O = append(got.O, float32(x))
			}
			for _, x := range lse {
				got.LSE = append(got.LSE, float32(x))
			}
		}
		if k == 0 && strings.Contains(src, "LSE") {
			got.LSE[2] += 0.5
		}
		if k == 0 && strings.Contains(src, "NEGINF") { // what a row that saw no key writes
			got.LSE[2] = float32(math.Inf(-1))
		}
		out.Runs = append(out.Runs, got)
	}
	return reply(out)
}

// replyChannel is where the fake answers, as the worker does.
var replyChannel = os.NewFile(lab.ReplyFD, "reply")

func reply(r lab.KernelReply) int {
	json.NewEncoder(replyChannel).Encode(r)
	return 0
}

func progress(stage string) { json.NewEncoder(replyChannel).Encode(lab.Progress{Progress: stage}) }

// fakeSanitizer is compute-sanitizer around the command after its
// options: it runs the command and, as the tool it was given would, writes
// a report of an invalid read (memcheck, when the source says "OOBREAD"),
// of a race (racecheck, "RACE", as racecheck wrote a missing barrier's
// race on the H100, a warning; "RACEERR", the same as an error) to the log
// file, and a clean summary otherwise.
func fakeSanitizer() int {
	args := os.Args[1:]
	var logFile, tool string
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		switch args[0] {
		case "--log-file":
			logFile = args[1]
		case "--tool":
			tool = args[1]
		}
		args = args[2:]
	}
	in, _ := io.ReadAll(os.Stdin)
	src := string(in)
	report := "========= COMPUTE-SANITIZER\n"
	switch {
	case tool == "memcheck" && strings.Contains(src, "OOBREAD"):
		report += "========= Invalid __global__ read of size 4 bytes\n=========     at attention+0x1c0\n"
	case tool == "racecheck" && strings.Contains(src, "RACEERR"):
		report += "========= Error: Race reported between Write access at attention+0x2a0 in student.cu:31\n" +
			"=========     and Read access at attention+0x330 in student.cu:38 [16 hazards]\n" +
			"========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
	case tool == "racecheck" && strings.Contains(src, "RACE"):
		report += "========= Warning: Race reported between Write access at attention+0x560 in student.cu:16\n" +
			"=========     and Read access at attention+0x6d0 in student.cu:19 [256 hazards]\n" +
			"========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n"
	case tool == "racecheck":
		report += "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
	default:
		report += "========= ERROR SUMMARY: 0 errors\n"
	}
	os.WriteFile(logFile, []byte(report), 0o644)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 1
	}
	return 0
}
