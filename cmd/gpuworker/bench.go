//go:build gpu

package main

import (
	"errors"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/worker"

	"gorgonia.org/cu"
)

// bench times a run of the untraced kernels: a warm-up, then the repeats,
// each between CUDA events, on inputs drawn from the request's seed. Device
// memory is read with cuMemGetInfo before the run's buffers are allocated,
// while they are, and after they are freed: the first two differ by what the
// run holds, the first and last should not differ at all.
func (d *device) bench(req worker.Bench) (out worker.Timed, err error) {
	out.ID = req.ID
	variant, ok := instrument.ParseVariant(req.Variant)
	if !ok {
		out.Error = "unknown variant " + req.Variant
		return out, nil
	}
	c := kernels.Config{Variant: variant, N: req.N, D: req.D, Br: req.Br, Bc: req.Bc, Batch: req.Batch, Heads: req.Heads,
		Causal: req.Causal, Pattern: instrument.PatternNormal, Seed: req.Seed}
	if c.N < 1 || c.D < 1 || c.Br < 1 || c.Bc < 1 || c.Batch < 1 || c.Heads < 1 || req.Repeats < 1 || req.Repeats > 100 {
		out.Error = "a bench request needs positive sizes and 1 to 100 repeats"
		return out, nil
	}
	if err := launch.Validate(&c); err != nil {
		out.Error = err.Error()
		return out, nil
	}
	free, _, err := cu.MemInfo()
	if err != nil {
		return out, fatalError{err}
	}
	// The named result: the deferred free below must update what returns.
	out.FreeBefore = free
	pr, err := d.newProblem(c)
	if err != nil {
		if isFatal(err) {
			return out, err
		}
		out.OutOfMem = strings.Contains(err.Error(), "out of device memory") || errors.Is(err, cu.OutOfMemory)
		out.Error = err.Error()
		out.FreeAfter, _, _ = cu.MemInfo()
		return out, nil
	}
	if out.FreeInUse, _, err = cu.MemInfo(); err != nil {
		pr.mem.free()
		return out, fatalError{err}
	}
	defer func() {
		pr.mem.free()
		if free, _, ferr := cu.MemInfo(); ferr == nil {
			out.FreeAfter = free
		} else if err == nil {
			err = fatalError{ferr}
		}
	}()
	if _, err := d.timed(pr, nil); err != nil { // warm-up
		return out, err
	}
	for range req.Repeats {
		ms, err := d.timed(pr, nil)
		if err != nil {
			return out, err
		}
		out.Ms = append(out.Ms, ms)
	}
	return out, nil
}
