//go:build gpu

package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"flashstep/instrument"
	"flashstep/kernels"

	"gorgonia.org/cu"
)

// fatalError is a CUDA error that may have poisoned the context: after a
// launch, any error is one. The worker exits after reporting it.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }
func (f fatalError) Unwrap() error { return f.err }

func isFatal(err error) bool {
	var f fatalError
	return errors.As(err, &f)
}

// allocs frees every device buffer of a run at its end.
type allocs []cu.DevicePtr

func (a *allocs) alloc(bytes int64) (cu.DevicePtr, error) {
	p, err := cu.MemAlloc(max(bytes, 8))
	if err != nil {
		return 0, fmt.Errorf("allocating %s of device memory: %w", kernels.FormatBytes(bytes), err)
	}
	*a = append(*a, p)
	return p, nil
}

func (a *allocs) upload(host []float32) (cu.DevicePtr, error) {
	p, err := a.alloc(int64(len(host)) * 4)
	if err != nil || len(host) == 0 {
		return p, err
	}
	return p, cu.MemcpyHtoD(p, unsafe.Pointer(&host[0]), int64(len(host))*4)
}

// uploadBF16 uploads a bf16 kernel's inputs (kernels.InputsFor rounds them,
// where the mirror's come from) as 16-bit patterns.
func (a *allocs) uploadBF16(host []float32) (cu.DevicePtr, error) {
	p, err := a.alloc(int64(len(host)) * 2)
	if err != nil || len(host) == 0 {
		return p, err
	}
	bits := kernels.BF16Bits(host)
	return p, cu.MemcpyHtoD(p, unsafe.Pointer(&bits[0]), int64(len(bits))*2)
}

func (a *allocs) free() {
	for _, p := range *a {
		cu.MemFree(p)
	}
	*a = nil
}

// problem is one configuration's inputs and outputs in device memory.
type problem struct {
	c              kernels.Config
	inputs         []*kernels.Inputs // per batch-head, on the host
	q, k, v, o, ls cu.DevicePtr
	s, p           cu.DevicePtr // naive only: the N×N buffers
	mem            allocs
}

// deviceBytes is what a run of c holds in device memory, trace aside.
func deviceBytes(c *kernels.Config) int64 {
	bh, n, d := int64(c.Batch*c.Heads), int64(c.N), int64(c.D)
	b := 4*bh*n*d*int64(c.GPUElementBytes()) + bh*n*4
	switch c.Variant {
	case instrument.VariantNaive:
		b += 2 * bh * n * n * 4
	case instrument.VariantNaiveMMA: // S in float32, P in bf16, rows of whole kv-tiles
		b += bh * n * int64(kernels.NaiveMMARowStride(c)) * (4 + 2)
	}
	return b
}

// newProblem generates the inputs on the host (in parallel) and uploads them.
func (d *device) newProblem(c kernels.Config) (*problem, error) {
	free, _, err := cu.MemInfo()
	if err != nil {
		return nil, fatalError{err}
	}
	if need := deviceBytes(&c); need > free {
		what := ""
		if c.Variant == instrument.VariantNaive {
			what = fmt.Sprintf(" (S and P alone take %s)", kernels.FormatBytes(2*int64(c.Batch*c.Heads)*int64(c.N)*int64(c.N)*4))
		}
		return nil, fmt.Errorf("out of device memory: the run needs %s%s, the GPU has %s free", kernels.FormatBytes(need), what, kernels.FormatBytes(free))
	}
	pr := &problem{c: c, inputs: make([]*kernels.Inputs, c.Batch*c.Heads)}
	var wg sync.WaitGroup
	for bh := range pr.inputs {
		wg.Go(func() { pr.inputs[bh] = kernels.InputsFor(&c, bh) })
	}
	wg.Wait()
	join := func(pick func(*kernels.Inputs) []float32) []float32 {
		all := make([]float32, 0, len(pr.inputs)*c.N*c.D)
		for _, in := range pr.inputs {
			all = append(all, pick(in)...)
		}
		return all
	}
	ok := false
	defer func() {
		if !ok {
			pr.mem.free()
		}
	}()
	upload := pr.mem.upload
	if c.GPUElementBytes() == 2 {
		upload = pr.mem.uploadBF16
	}
	if pr.q, err = upload(join(func(in *kernels.Inputs) []float32 { return in.Q })); err != nil {
		return nil, err
	}
	if pr.k, err = upload(join(func(in *kernels.Inputs) []float32 { return in.K })); err != nil {
		return nil, err
	}
	if pr.v, err = upload(join(func(in *kernels.Inputs) []float32 { return in.V })); err != nil {
		return nil, err
	}
	bh := int64(c.Batch * c.Heads)
	if pr.o, err = pr.mem.alloc(bh * int64(c.N) * int64(c.D) * int64(c.GPUElementBytes())); err != nil {
		return nil, err
	}
	if pr.ls, err = pr.mem.alloc(bh * int64(c.N) * 4); err != nil {
		return nil, err
	}
	switch c.Variant {
	case instrument.VariantNaive:
		if pr.s, err = pr.mem.alloc(bh * int64(c.N) * int64(c.N) * 4); err != nil {
			return nil, err
		}
		if pr.p, err = pr.mem.alloc(bh * int64(c.N) * int64(c.N) * 4); err != nil {
			return nil, err
		}
	case instrument.VariantNaiveMMA:
		ld := int64(kernels.NaiveMMARowStride(&c))
		if pr.s, err = pr.mem.alloc(bh * int64(c.N) * ld * 4); err != nil {
			return nil, err
		}
		if pr.p, err = pr.mem.alloc(bh * int64(c.N) * ld * 2); err != nil {
			return nil, err
		}
	}
	ok = true
	return pr, nil
}

// traceArgs are a traced launch's extra arguments.
type traceArgs struct {
	buf     cu.DevicePtr
	offsets []cu.DevicePtr // per launch
	timing  bool
}

// launch runs c's kernels once, from the traced module when tr is not nil.
// Every argument takes its own 8-byte slot: cu copies 8 bytes per argument.
func (d *device) launch(pr *problem, tr *traceArgs) error {
	c := &pr.c
	module := map[instrument.Variant]string{instrument.VariantFlash2: kernels.ModuleFlash2, instrument.VariantNaive: kernels.ModuleNaive,
		instrument.VariantFlash2Fast: kernels.ModuleFlash2Fast, instrument.VariantNaiveMMA: kernels.ModuleNaiveMMA}[c.Variant]
	if tr != nil {
		module += "_traced"
	}
	causal := int64(0)
	if c.Causal {
		causal = 1
	}
	scaleBits := uint64(math.Float32bits(c.Scale()))
	n, dd, br, bc, nbh := int64(c.N), int64(c.D), int64(c.Br), int64(c.Bc), c.Batch*c.Heads
	nq, tc := c.Tr(), c.Tc()
	run := func(kernel string, launchIdx int, grid [3]int, threads, shared int, args ...uint64) error {
		fn, err := d.fn(module, kernel)
		if err != nil {
			return err
		}
		if tr != nil {
			mode := uint64(0)
			if tr.timing {
				mode = 1
			}
			args = append(args, uint64(tr.buf), uint64(tr.offsets[launchIdx]), mode)
		}
		ptrs := make([]unsafe.Pointer, len(args))
		for i := range args {
			ptrs[i] = unsafe.Pointer(&args[i])
		}
		if err := fn.Launch(grid[0], grid[1], grid[2], threads, 1, 1, shared, cu.NoStream, ptrs); err != nil {
			return fatalError{fmt.Errorf("launching %s: %w", kernel, err)}
		}
		return nil
	}
	u := func(p cu.DevicePtr) uint64 { return uint64(p) }
	switch c.Variant {
	case instrument.VariantFlash2:
		f, ok := kernels.Flash2InstanceFor(c)
		if !ok {
			return fmt.Errorf("no compiled flash2 kernel for Br=%d, Bc=%d, d=%d", c.Br, c.Bc, c.D)
		}
		return run(f.Name(), 0, [3]int{nq, nbh, 1}, f.Threads, f.SharedBytes(),
			u(pr.q), u(pr.k), u(pr.v), u(pr.o), u(pr.ls), uint64(n), scaleBits, uint64(causal))
	case instrument.VariantFlash2Fast:
		f, ok := kernels.Flash2FastInstanceFor(c)
		if !ok {
			return fmt.Errorf("no compiled flash2_fast kernel for Br=%d, Bc=%d, d=%d", c.Br, c.Bc, c.D)
		}
		return run(f.Name(c.Causal), 0, [3]int{nq, nbh, 1}, f.Threads(), f.SharedBytes(),
			u(pr.q), u(pr.k), u(pr.v), u(pr.o), u(pr.ls), uint64(n), scaleBits)
	case instrument.VariantNaiveMMA:
		f, ok := kernels.NaiveMMAInstanceFor(c)
		if !ok {
			return fmt.Errorf("no compiled naive_mma kernels for Br=%d, Bc=%d, d=%d", c.Br, c.Bc, c.D)
		}
		scoresSmem, pvSmem := f.SharedBytes()
		if err := run(f.Kernel("scores"), 0, [3]int{tc, nq, nbh}, 128, scoresSmem,
			u(pr.q), u(pr.k), u(pr.s), uint64(n), scaleBits, uint64(causal)); err != nil {
			return err
		}
		if err := run(f.Kernel("softmax"), 1, [3]int{nq, nbh, 1}, 256, 0,
			u(pr.s), u(pr.p), u(pr.ls), uint64(n), uint64(tc)); err != nil {
			return err
		}
		return run(f.Kernel("pv"), 2, [3]int{nq, nbh, 1}, 128, pvSmem,
			u(pr.p), u(pr.v), u(pr.ls), u(pr.o), uint64(n))
	case instrument.VariantNaive:
		scoresSmem, pvSmem := kernels.NaiveSharedBytes(c.Br, c.Bc, c.D)
		if err := run("naive_scores", 0, [3]int{tc, nq, nbh}, kernels.NaiveThreads, scoresSmem,
			u(pr.q), u(pr.k), u(pr.s), uint64(n), uint64(dd), uint64(br), uint64(bc), scaleBits, uint64(causal)); err != nil {
			return err
		}
		if err := run("naive_softmax", 1, [3]int{nq, nbh, 1}, kernels.NaiveThreads, 0,
			u(pr.s), u(pr.p), u(pr.ls), uint64(n), uint64(dd), uint64(br), uint64(bc)); err != nil {
			return err
		}
		return run("naive_pv", 2, [3]int{nq, nbh, 1}, kernels.NaiveThreads, pvSmem,
			u(pr.p), u(pr.v), u(pr.ls), u(pr.o), uint64(n), uint64(dd), uint64(br), uint64(bc))
	}
	return fmt.Errorf("unknown variant %v", c.Variant)
}

// timed runs launch between two CUDA events and returns the milliseconds.
func (d *device) timed(pr *problem, tr *traceArgs) (float64, error) {
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, fatalError{err}
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, fatalError{err}
	}
	defer cu.DestroyEvent(&stop)
	if err := start.Record(cu.NoStream); err != nil {
		return 0, fatalError{err}
	}
	if err := d.launch(pr, tr); err != nil {
		return 0, err
	}
	if err := stop.Record(cu.NoStream); err != nil {
		return 0, fatalError{err}
	}
	if err := cu.Synchronize(); err != nil {
		return 0, fatalError{fmt.Errorf("running %s: %w", pr.c.Variant, err)}
	}
	ms, err := start.Elapsed(stop)
	if err != nil {
		return 0, fatalError{err}
	}
	return ms, nil
}

// gpuTrace is a finished traced run: the whole trace, encoded and checked.
type gpuTrace struct {
	header   instrument.Header
	bytes    []byte // header, inputs records, then the kernels' records
	kernelMs float64
}

// traceRun runs c traced and assembles its trace: the header and the inputs
// records from the host, then the records the kernels wrote in place. The
// assembled trace is decoded once before it leaves, so a kernel that wrote
// garbage fails its run instead of confusing a browser.
func (d *device) traceRun(c kernels.Config) (*gpuTrace, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.ValidateGPU(); err != nil {
		return nil, err
	}
	timing := c.Timing
	pr, err := d.newProblem(c)
	if err != nil {
		return nil, err
	}
	defer pr.mem.free()

	lay := kernels.GPUTraceLayout(&c)
	tr := &traceArgs{timing: timing}
	if tr.buf, err = pr.mem.alloc(int64(lay.Bytes)); err != nil {
		return nil, err
	}
	if err := cu.MemsetD8(tr.buf, 0, int64(max(lay.Bytes, 8))); err != nil {
		return nil, fatalError{err}
	}
	for _, l := range lay.Launches {
		p, err := pr.mem.alloc(int64(len(l.Offsets)) * 8)
		if err != nil {
			return nil, err
		}
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&l.Offsets[0]), int64(len(l.Offsets))*8); err != nil {
			return nil, fatalError{err}
		}
		tr.offsets = append(tr.offsets, p)
	}
	ms, err := d.timed(pr, tr)
	if err != nil {
		return nil, err
	}
	recs := make([]byte, lay.Bytes)
	if len(recs) > 0 {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&recs[0]), tr.buf, int64(lay.Bytes)); err != nil {
			return nil, fatalError{err}
		}
	}

	h := c.Header(instrument.SourceGPU, fmt.Sprintf("%s, driver %s", d.hello.GPU, d.hello.Driver))
	h.NumSMs = d.hello.SMIDs
	h.TimerTickNs = float32(d.hello.TimerTickNs)
	out, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		return nil, err
	}
	if !timing {
		for bh := h.TracedBH.Lo; bh < h.TracedBH.Hi; bh++ {
			in := pr.inputs[bh]
			rec := &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: in.Q, K: in.K, V: in.V}
			if out, err = instrument.AppendRecord(out, &h, rec); err != nil {
				return nil, err
			}
		}
	}
	out = append(out, recs...)
	if _, got, err := instrument.ReadAll(bytes.NewReader(out)); err != nil {
		return nil, fmt.Errorf("the kernels wrote a malformed trace: %w", err)
	} else if len(got) != h.Records {
		return nil, fmt.Errorf("the kernels wrote %d records, the layout has %d", len(got), h.Records)
	}
	return &gpuTrace{header: h, bytes: out, kernelMs: ms}, nil
}

// chunks splits an assembled trace for sending: the header alone, then runs
// of whole records of about 1 MiB.
func (t *gpuTrace) chunks(emit func([]byte) error) error {
	return instrument.Chunks(&t.header, t.bytes, 1<<20, emit)
}
