// Command gpuworker runs flashstep's CUDA kernels for the server. It is the
// only binary that imports gorgonia.org/cu, whose package init exits the
// process on a machine without a GPU; so the server runs it as a child
// process and reads an exit before its hello as "no GPU here".
//
// The server starts it with two pipes as file descriptors 3 (requests) and 4
// (replies), speaking the frames of package worker. One OS-locked goroutine
// owns the CUDA context and makes every CUDA call. A CUDA error after a
// launch poisons the context: the worker reports it and exits, and the
// server starts a fresh one.
//
// `gpuworker -lab` is the lab's kernel track instead: one student's kernel,
// compiled with NVRTC and run in this process alone (lab.go).
//
// Build it with `make gpu` (go build -tags gpu); without the tag it is a stub
// that reports no GPU.
package main

import "os"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-lab" {
		os.Exit(labMain())
	}
	os.Exit(serve())
}
