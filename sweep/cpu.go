package sweep

import (
	"context"
	"runtime"
	"strconv"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
)

// CPU times the kernels' Go mirrors on this server's CPU: what a sweep can
// show without a GPU, labelled as such. The mirrors build every record of
// the trace as they go, so these times include that.
type CPU struct{}

func (CPU) Source() string {
	return "CPU mirror: the kernels' Go twins, float32, on this server's " + cpuCount() + " CPU cores"
}

func cpuCount() string { return strconv.Itoa(runtime.NumCPU()) }

func (CPU) Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error) {
	c := p.Config(seed)
	r := Result{Point: p, VariantName: p.Variant.String(), Kernel: kernelLabel(p) + " (Go mirror)", DType: "f32",
		PeakHow: "Go heap the mirror allocated (runtime.MemStats.TotalAlloc), not device memory"}
	if err := c.Validate(); err != nil {
		r.Error = err.Error()
		return r, nil
	}
	discard := func(*instrument.Record) error { return nil }
	if err := kernels.RunMirror(ctx, c, discard); err != nil { // warm-up
		return r, err
	}
	var before, after runtime.MemStats
	for k := range repeats {
		if k == 0 {
			runtime.ReadMemStats(&before)
		}
		start := time.Now()
		if err := kernels.RunMirror(ctx, c, discard); err != nil {
			return r, err
		}
		r.Repeats = append(r.Repeats, float64(time.Since(start).Microseconds())/1e3)
		if k == 0 {
			runtime.ReadMemStats(&after)
			r.PeakBytes = int64(after.TotalAlloc - before.TotalAlloc)
		}
	}
	r.finish()
	return r, nil
}
