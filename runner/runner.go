// Package runner owns the engines that turn a run's configuration into a
// trace: today the CPU mirror of each kernel. Every engine speaks the same
// contract, encoded trace chunks in trace order, so that the server streams
// whatever computed them without knowing which.
package runner

import (
	"context"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Runner produces the trace of a configuration. Run validates c, then calls
// emit with the encoded header and then with each encoded record, in trace
// order, as soon as each is ready. It stops at emit's first error or when ctx
// is done. A chunk passed to emit is never reused by the runner.
type Runner interface {
	Run(ctx context.Context, c kernels.Config, emit func(chunk []byte) error) error
	// Engine says where this runner's numbers come from, for the page.
	Engine() Engine
}

// Engine describes where a runner's numbers come from.
type Engine struct {
	Source instrument.Source `json:"source"`
	Name   string            `json:"name"`   // "CPU mirror"
	Detail string            `json:"detail"` // what a banner says beside the name
}

// Mirror runs the kernels' Go mirrors on this machine's CPU.
type Mirror struct{}

func (Mirror) Engine() Engine {
	return Engine{Source: instrument.SourceCPUMirror, Name: "CPU mirror",
		Detail: "No GPU on this server: each kernel's Go mirror computes the trace with the kernel's own tile order and float32 arithmetic."}
}

func (Mirror) Run(ctx context.Context, c kernels.Config, emit func([]byte) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	h := c.Header(instrument.SourceCPUMirror, kernels.MirrorLabel)
	head, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		return err
	}
	if err := emit(head); err != nil {
		return err
	}
	return kernels.RunMirror(ctx, c, func(r *instrument.Record) error {
		chunk, err := instrument.AppendRecord(make([]byte, 0, h.RecordBytes(r.Kind)), &h, r)
		if err != nil {
			return err
		}
		return emit(chunk)
	})
}
