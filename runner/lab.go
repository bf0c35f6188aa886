package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"flashstep/lab"
)

// ErrLabTimeout: a student's kernel (or its compilation) ran past its time
// limit, and its process was killed.
var ErrLabTimeout = errors.New("time limit")

// LabKernel runs one student's kernel in a process of its own: command
// (the GPU worker with -lab) reads req on its standard input and writes
// its reply on its standard output. A kernel that faults takes down only
// that process and its CUDA context; past limit, or when ctx ends (the
// student left), the process is killed and the GPU is free for the next.
func LabKernel(ctx context.Context, command []string, env []string, req lab.KernelRequest, limit time.Duration) (lab.KernelReply, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return lab.KernelReply{}, 0, err
	}
	args := append(command[1:len(command):len(command)], "-lab")
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(body)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &limitedBuffer{max: 16 << 10, buf: &errOut}
	cmd.WaitDelay = time.Second
	start := time.Now()
	runErr := cmd.Run()
	took := time.Since(start)
	if ctx.Err() == context.DeadlineExceeded {
		return lab.KernelReply{}, took, ErrLabTimeout
	}
	if ctx.Err() != nil {
		return lab.KernelReply{}, took, ctx.Err()
	}
	var reply lab.KernelReply
	if err := json.Unmarshal(out.Bytes(), &reply); err != nil {
		tail := strings.TrimSpace(errOut.String())
		if runErr != nil {
			return lab.KernelReply{}, took, fmt.Errorf("the kernel's process ended without an answer (%v): %s", runErr, tail)
		}
		return lab.KernelReply{}, took, fmt.Errorf("the kernel's process answered nonsense: %v", err)
	}
	return reply, took, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	max int
	buf *bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Sanitize wraps a lab command in compute-sanitizer (at sanitizer) running
// tool, its report written to logFile. memcheck names every access of a
// student's kernel outside the buffers it was given, read or write, even
// one that happens not to fault; racecheck names every pair of accesses
// to shared memory that no barrier orders, even when the race's luck gave
// the right numbers.
func Sanitize(sanitizer, tool, logFile string, command []string) []string {
	return append([]string{sanitizer, "--tool", tool, "--log-file", logFile, "--print-limit", "20"}, command...)
}
