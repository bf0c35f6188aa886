package sweep

import (
	"context"
	"runtime"
	"strconv"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/traffic"
)

// CPU times the kernels' Go mirrors on this server's CPU: what a sweep can
// show without a GPU, labelled as such. The mirrors build every record of
// the trace as they go, so these times include that.
type CPU struct{}

func (CPU) Source() string {
	return "CPU mirror: the kernels' Go twins, float32, on this server's " + cpuCount() + " CPU cores"
}

func cpuCount() string { return strconv.Itoa(runtime.NumCPU()) }

// ModelledMemoryHow says where a CPU sweep's memory figure comes from.
const ModelledMemoryHow = "model (no device memory on the CPU mirror): what this run would hold on a GPU, " +
	"Q, K, V, O and the LSE in float32, plus naive's N×N S and P per batch-head"

func (CPU) Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error) {
	r := Result{Point: p, VariantName: p.Variant.String(), Kernel: kernelLabel(p) + " (Go mirror)", DType: kernels.Info(p.Variant).DType.String(),
		PeakHow: ModelledMemoryHow}
	run, err := p.Config(seed).Check() // a point is numbers: check them once, here
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	// The mirror has no device memory: the column shows what this run
	// would hold on a GPU, by the memory model.
	plan, err := traffic.PlanMemory(p.B, p.H, p.N, p.D, kernels.Info(p.Variant).DType, 1<<62)
	if err != nil {
		return r, err
	}
	r.PeakBytes = plan.FlashBytes
	if kernels.Info(p.Variant).Materialised {
		r.PeakBytes = plan.NaiveBytes
	}
	discard := func(*instrument.Record) error { return nil }
	if err := kernels.RunMirror(ctx, run, discard); err != nil { // warm-up
		return r, err
	}
	for range repeats {
		start := time.Now()
		if err := kernels.RunMirror(ctx, run, discard); err != nil {
			return r, err
		}
		r.Repeats = append(r.Repeats, float64(time.Since(start).Microseconds())/1e3)
	}
	r.finish()
	return r, nil
}
