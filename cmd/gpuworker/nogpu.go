//go:build !gpu

package main

import (
	"fmt"
	"os"

	"flashstep/worker"
)

func serve() int {
	fmt.Fprintln(os.Stderr, "gpuworker: built without GPU support (make gpu builds the worker with -tags gpu)")
	return worker.ExitNoGPU
}

func labMain() int {
	fmt.Fprintln(os.Stderr, "gpuworker: built without GPU support: the lab's kernel track needs make gpu")
	return worker.ExitNoGPU
}
