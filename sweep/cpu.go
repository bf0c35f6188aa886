package sweep

import (
	"context"
	"runtime"
	"strconv"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
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
const ModelledMemoryHow = "model (no device memory on the CPU mirror): the device buffers a GPU run of this point allocates, by its launch plan: " +
	"Q, K, V, O and the LSE, naive's N×N S and P per batch-head; for a backward run dO, D, dQ, dK and dV too, and naive_bwd's N×N P, dP and dS (float32) per batch-head"

func (CPU) Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error) {
	r := Result{Point: p, VariantName: p.Variant.String(), Pass: p.Pass(), Kernel: kernelLabel(p) + " (Go mirror)", DType: kernels.Info(p.Variant).DType.String(),
		PeakHow: ModelledMemoryHow}
	run, err := p.Config(seed).Check() // a point is numbers: check them once, here
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	// The mirror has no device memory: the column shows what this run
	// would hold on a GPU, by its launch plan.
	r.PeakBytes = DeviceBytes(p)
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

// DeviceBytes is the device memory a GPU run of point p allocates: its
// launch plan's buffers (launch.For), which the worker allocates and holds
// to the free memory before it uploads anything. That is Q, K, V and O in
// the kernel's element type and the LSE, and what its registry entry's
// launches add: naive's S and P, flash1's m and l, a backward's dO, D, dQ,
// dK and dV, naive_bwd's P (the forward's, read back), dP and dS. For a
// point no compiled kernel runs (a CPU sweep's small head dims) it is the
// same sum, from the entry's launches at the point's tiles.
func DeviceBytes(p Point) int64 {
	c := p.Config(0)
	if plan, err := launch.For(&c); err == nil {
		return plan.DeviceBytes()
	}
	return planBytes(p)
}

// planBytes is the sum launch.For's plan makes of p's buffers, without its
// checks of what the compiled kernels run.
func planBytes(p Point) int64 {
	c := p.Config(0)
	info := kernels.Info(p.Variant)
	bh, n, d := int64(p.B)*int64(p.H), int64(p.N), int64(p.D)
	elem := int64(info.ElementBytes())
	bufs := map[kernels.Buffer]int64{kernels.BufQ: bh * n * d * elem, kernels.BufK: bh * n * d * elem, kernels.BufV: bh * n * d * elem,
		kernels.BufO: bh * n * d * elem, kernels.BufLSE: bh * n * 4}
	t, _ := info.TileFor(&c)
	for b, size := range info.Launches(&c, t).Extra {
		bufs[b] = size
	}
	var sum int64
	for _, size := range bufs {
		sum += size
	}
	return sum
}
