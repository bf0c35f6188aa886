// Package runner owns the engines that turn a run's configuration into a
// trace: the CUDA kernels through the GPU worker (GPU), traces recorded on a
// GPU (Recordings), and each kernel's CPU mirror (Mirror), with the Router
// that picks one per run. Every engine speaks the same contract, encoded
// trace chunks in trace order, so that the server streams whatever computed
// them without knowing which.
package runner

import (
	"context"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Runner produces the trace of a run. Run calls emit with the encoded header
// alone, then with chunks of one or more whole encoded records, in trace
// order, as soon as each is ready. It stops at emit's first error or when
// ctx is done, and never calls emit after it returns. A chunk passed to emit
// is never changed afterwards.
type Runner interface {
	Run(ctx context.Context, r kernels.Run, emit func(chunk []byte) error) error
	// Engine says where this runner's numbers come from, for the page.
	Engine() Engine
}

// Engine describes where a runner's numbers come from.
type Engine struct {
	Source instrument.Source `json:"source"`
	Name   string            `json:"name"`   // "CPU mirror"
	Detail string            `json:"detail"` // the whole story, for a tooltip and the API
	Short  string            `json:"short"`  // one line for the banner, legible at 1024 px
}

// Mirror runs the kernels' Go mirrors on this machine's CPU.
type Mirror struct{}

// The CPU mode's banner (Short) and its tooltip's account of the mirror,
// said once for Mirror and the Router.
const (
	noGPU       = "No GPU on this server"
	mirrorShort = "no GPU here: every run comes from the CPU mirror of its kernel."
	mirrorHow   = "each kernel's Go mirror computes the trace with the kernel's own tile order and arithmetic."
)

func (Mirror) Engine() Engine {
	return Engine{Source: instrument.SourceCPUMirror, Name: "CPU mirror", Detail: noGPU + ": " + mirrorHow, Short: mirrorShort}
}

func (Mirror) Run(ctx context.Context, run kernels.Run, emit func([]byte) error) error {
	return kernels.MirrorTrace(ctx, run, emit)
}
