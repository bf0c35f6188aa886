package runner

import (
	"context"
	"fmt"

	"flashstep/sweep"
	"flashstep/worker"
)

// GPUSweeps times sweep points on the GPU through the worker.
type GPUSweeps struct{ GPU *GPU }

func (s GPUSweeps) Source() string {
	h := s.GPU.Hello()
	return fmt.Sprintf("%s, driver %s", h.GPU, h.Driver)
}

func (s GPUSweeps) Time(ctx context.Context, p sweep.Point, repeats int, seed uint64) (sweep.Result, error) {
	c := p.Config(seed)
	t, err := s.GPU.Bench(ctx, worker.Bench{Variant: c.Variant.String(), N: c.N, D: c.D, Br: c.Br, Bc: c.Bc,
		Batch: c.Batch, Heads: c.Heads, Causal: c.Causal, Seed: seed, Repeats: repeats})
	if err != nil {
		return sweep.Result{}, err
	}
	return sweep.GPUResult(p, sweep.GPUTiming{Ms: t.Ms, FreeBefore: t.FreeBefore, FreeInUse: t.FreeInUse, FreeAfter: t.FreeAfter,
		OutOfMem: t.OutOfMem, Error: t.Error}), nil
}
