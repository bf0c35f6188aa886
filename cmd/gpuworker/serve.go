//go:build gpu

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"

	"flashstep/kernels"
	"flashstep/worker"
)

func init() {
	// The main goroutine owns the CUDA context: keep it on one OS thread
	// from the start.
	runtime.LockOSThread()
}

func serve() int {
	if len(os.Args) > 1 && os.Args[1] == "record" {
		return record(os.Args[2:])
	}
	reqFile, repFile := os.NewFile(worker.RequestFD, "requests"), os.NewFile(worker.ReplyFD, "replies")
	if reqFile == nil || repFile == nil {
		fmt.Fprintln(os.Stderr, "gpuworker: run by the flashstep server, which passes pipes as fds 3 and 4")
		return 2
	}
	d, err := openDevice()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuworker:", err)
		return worker.ExitNoGPU
	}
	w := bufio.NewWriterSize(repFile, 1<<20)
	r := bufio.NewReaderSize(reqFile, 64<<10)
	reply := func(t worker.Type, v any) error {
		if err := worker.WriteJSON(w, t, v); err != nil {
			return err
		}
		return w.Flush()
	}
	if err := reply(worker.TypeHello, d.hello); err != nil {
		return 1
	}
	for {
		t, payload, err := worker.ReadFrame(r)
		if err == io.EOF {
			return 0 // the server is done with us
		}
		if err == nil && t == worker.TypeBench {
			var req worker.Bench
			if err := json.Unmarshal(payload, &req); err != nil {
				fmt.Fprintln(os.Stderr, "gpuworker: bad bench request:", err)
				return 2
			}
			timed, err := d.bench(req)
			if err != nil {
				fatal := isFatal(err)
				if reply(worker.TypeFail, worker.Fail{ID: req.ID, Error: err.Error(), Fatal: fatal}) != nil || fatal {
					return 4
				}
				continue
			}
			if reply(worker.TypeTimed, timed) != nil {
				return 1
			}
			continue
		}
		if err != nil || t != worker.TypeRun {
			fmt.Fprintf(os.Stderr, "gpuworker: bad request (%v, %s)\n", err, t)
			return 2
		}
		var req worker.Run
		if err := json.Unmarshal(payload, &req); err != nil {
			fmt.Fprintln(os.Stderr, "gpuworker: bad run request:", err)
			return 2
		}
		tr, err := d.runRequest(req)
		if err != nil {
			fatal := isFatal(err)
			if reply(worker.TypeFail, worker.Fail{ID: req.ID, Error: err.Error(), Fatal: fatal}) != nil || fatal {
				return 4
			}
			continue
		}
		err = tr.chunks(func(b []byte) error { return worker.WriteFrame(w, worker.TypeChunk, b) })
		if err == nil {
			err = reply(worker.TypeDone, worker.Done{ID: req.ID, KernelMs: tr.kernelMs, Records: tr.header.Records})
		}
		if err != nil {
			return 1 // the server went away
		}
	}
}

func (d *device) runRequest(req worker.Run) (*gpuTrace, error) {
	v, err := url.ParseQuery(req.Query)
	if err != nil {
		return nil, err
	}
	r, err := kernels.ParseRun(v) // the server's request: checked once, here
	if err != nil {
		return nil, err
	}
	return d.traceRun(r)
}
