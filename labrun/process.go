package labrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"flashstep/lab"
	"flashstep/sandbox"
)

// ErrTimeout: a student's kernel (or its compilation) ran past its time
// limit, and its process was killed.
var ErrTimeout = errors.New("time limit")

// Process says how a student's kernel's process starts.
type Process struct {
	// Command is the GPU worker; "-lab" is added.
	Command []string
	// Sandbox confines the process (package sandbox): its user, the
	// variables a test adds.
	Sandbox sandbox.Options
	// Sanitizer, with Tool ("memcheck", "racecheck"), runs the process
	// under compute-sanitizer, whose report comes back in ProcessResult.Report.
	Sanitizer, Tool string
}

// ProcessResult is what a student's kernel's process gave back.
type ProcessResult struct {
	Reply lab.KernelReply
	// Output is what the kernel's threads printed (printf), its first
	// lab.MaxOutputBytes; OutputCut counts the bytes past them.
	Output    string
	OutputCut int
	// Crash, when the process died without a reply while compiling, says
	// so in the student's words; Reply.Stage is then "compile".
	Crash string
	// Report is compute-sanitizer's report, when it ran.
	Report string
	// Stderr is the process's own messages (its first 16 KiB), for the
	// server's log: never shown to the student, since a crash report of
	// the worker's says nothing about their kernel.
	Stderr string
	Took   time.Duration
}

// RunProcess runs one student's kernel in a process of its own, confined
// (package sandbox): the worker reads req on its standard input, answers
// on descriptor lab.ReplyFD, and leaves its standard output to the
// kernel's printf. A kernel that faults takes down only that process and
// its CUDA context; past limit, or when ctx ends (the student left), the
// process and any it started are killed and the GPU is free for the next.
func RunProcess(ctx context.Context, p Process, req lab.KernelRequest, limit time.Duration) (ProcessResult, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return ProcessResult{}, err
	}
	argv := append(p.Command[:len(p.Command):len(p.Command)], "-lab")
	opts := p.Sandbox
	reportName := ""
	if p.Sanitizer != "" {
		// The report is the one file the process may write, in its own
		// directory.
		opts.Writable = true
		reportName = p.Tool + ".log"
		opts.Wrapper = []string{p.Sanitizer, "--tool", p.Tool, "--log-file", reportName, "--print-limit", "20"}
	}
	proc, err := sandbox.Command(ctx, argv, opts)
	if err != nil {
		return ProcessResult{}, err
	}
	defer proc.Cleanup()
	replyR, replyW, err := os.Pipe()
	if err != nil {
		return ProcessResult{}, err
	}
	defer replyR.Close()
	cmd := proc.Cmd
	cmd.Stdin = bytes.NewReader(body)
	output := &limitedBuffer{max: lab.MaxOutputBytes}
	stderr := &limitedBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = output, stderr
	cmd.ExtraFiles = []*os.File{replyW} // lab.ReplyFD
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := proc.Start(); err != nil {
		replyW.Close()
		return ProcessResult{}, fmt.Errorf("starting the kernel's process: %w", err)
	}
	replyW.Close() // the child's copy is the only writer now
	answered := make(chan labAnswer, 1)
	go func() { answered <- readReply(replyR) }()
	runErr := cmd.Wait()
	res := ProcessResult{Took: time.Since(start), Output: output.String(), OutputCut: output.cut, Stderr: stderr.String()}
	var a labAnswer
	select {
	case a = <-answered:
	case <-time.After(time.Second):
		// A grandchild kept the channel open: what came is what there is.
		replyR.Close()
		a = <-answered
	}
	if reportName != "" {
		res.Report = readReport(filepath.Join(proc.Dir, reportName))
	}
	if ctx.Err() == context.DeadlineExceeded {
		return res, ErrTimeout
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if a.reply != nil {
		res.Reply, res.Crash = *a.reply, a.reply.Crash
		return res, nil
	}
	if a.nonsense != nil {
		return res, fmt.Errorf("the kernel's process answered nonsense on its reply channel: %v", a.nonsense)
	}
	why := exitWhy(runErr, stderr.String())
	if a.stage == "compile" {
		res.Reply = lab.KernelReply{Stage: "compile"}
		res.Crash = "The compiler stopped on your source: it " + why + " before it could say what is wrong. " +
			"A compiler runs out of stack on recursion it cannot see the end of: a template or constexpr function that instantiates itself without a base case, or a very deep chain of them."
		return res, nil
	}
	where := map[string]string{"load": " while loading your compiled kernel", "run": " while running your kernel"}[a.stage]
	return res, fmt.Errorf("the kernel's process ended without an answer%s: it %s", where, why)
}

// labAnswer is what the reply channel carried: the reply, or the last
// stage the process said it entered, or something that was no answer.
type labAnswer struct {
	reply    *lab.KernelReply
	stage    string
	nonsense error
}

// maxReplyBytes bounds what the server reads of a reply: a few runs'
// records and outputs are far less; a process that writes more is no
// worker of ours.
const maxReplyBytes = 64 << 20

// readReport reads the sanitizer's report from the process's directory,
// which the confined user owns: only a regular file (not a FIFO that
// would block, nor a link to something endless), at most
// sandbox.WritableBytes of it.
func readReport(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, sandbox.WritableBytes))
	return string(b)
}

// readReply reads the channel: progress lines, then the reply.
func readReply(r *os.File) (out labAnswer) {
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(r, maxReplyBytes)))
	for {
		var m struct {
			lab.Progress
			lab.KernelReply
		}
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				out.nonsense = err
			}
			return out
		}
		if m.Progress.Progress != "" {
			out.stage = m.Progress.Progress
			continue
		}
		reply := m.KernelReply
		out.reply = &reply
		return out
	}
}

// exitWhy says how a process ended, in words: the signal that killed it
// (a Go program's crash report names the one that arrived in C code), or
// its exit status.
func exitWhy(err error, stderr string) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "crashed (" + unix.SignalName(ws.Signal()) + ")"
		}
	}
	for _, sig := range []string{"SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"} {
		if strings.Contains(stderr, sig) {
			return "crashed (" + sig + ")"
		}
	}
	if err != nil {
		line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
		if line != "" {
			return fmt.Sprintf("ended (%v): %s", err, line)
		}
		return fmt.Sprintf("ended (%v)", err)
	}
	return "ended"
}

// limitedBuffer keeps the first max bytes written to it and counts the
// rest.
type limitedBuffer struct {
	max int
	buf bytes.Buffer
	cut int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := max(l.max-l.buf.Len(), 0)
	l.buf.Write(p[:min(len(p), room)])
	l.cut += len(p) - min(len(p), room)
	return len(p), nil
}

func (l *limitedBuffer) String() string { return l.buf.String() }
