//go:build gpu

package main

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"

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

// allocs frees every device buffer of a run at its end, and the host
// memory of its tensor maps.
type allocs struct {
	dev  []cu.DevicePtr
	host []unsafe.Pointer
}

func (a *allocs) alloc(bytes int64) (cu.DevicePtr, error) {
	p, err := cu.MemAlloc(max(bytes, 8))
	if err != nil {
		return 0, fmt.Errorf("allocating %s of device memory: %w", kernels.FormatBytes(bytes), err)
	}
	a.dev = append(a.dev, p)
	return p, nil
}

// hostBytes is bytes of zeroed C memory aligned to align, outside Go's heap.
func (a *allocs) hostBytes(bytes, align int) unsafe.Pointer {
	p := hostAlloc(bytes, align)
	a.host = append(a.host, p)
	return p
}

func (a *allocs) upload(host []float32) (cu.DevicePtr, error) {
	p, err := a.alloc(int64(len(host)) * 4)
	if err != nil || len(host) == 0 {
		return p, err
	}
	return p, cu.MemcpyHtoD(p, unsafe.Pointer(&host[0]), int64(len(host))*4)
}

// uploadInt32 uploads a table of int32 (a paged cache's block table).
func (a *allocs) uploadInt32(host []int32) (cu.DevicePtr, error) {
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
	for _, p := range a.dev {
		cu.MemFree(p)
	}
	for _, p := range a.host {
		hostFree(p)
	}
	*a = allocs{}
}

// problem is one configuration's inputs, outputs and scratch buffers in
// device memory, and the launches that run it (package launch's plan).
type problem struct {
	c      kernels.Config
	plan   launch.Plan
	inputs []*kernels.Inputs // per batch-head, on the host
	bufs   [len(launch.Plan{}.Buffers)]cu.DevicePtr
	mem    allocs
	// maps holds the encoded tensor map of each Arg.Map of the plan, in
	// host memory the C allocator aligned (mem frees it).
	maps map[*kernels.TensorMap]unsafe.Pointer
}

// newProblem plans the run, generates the inputs on the host (in parallel)
// and uploads them, and allocates the rest of the plan's buffers.
func (d *device) newProblem(c kernels.Config) (*problem, error) {
	plan, err := launch.For(&c)
	if err != nil {
		return nil, err
	}
	// A rung this GPU or driver cannot run says so before any upload (or
	// tensor map) is made for it.
	if err := d.unavailable[plan.Module]; err != nil {
		return nil, fmt.Errorf("%s %w", plan.Module, err)
	}
	free, _, err := cu.MemInfo()
	if err != nil {
		return nil, fatalError{err}
	}
	if need := plan.DeviceBytes(); need > free {
		what := ""
		if sp := plan.Buffers[launch.BufS] + plan.Buffers[launch.BufP]; sp > 0 && kernels.Info(c.Variant).Backward {
			sp += plan.Buffers[kernels.BufDP] + plan.Buffers[kernels.BufDS]
			what = fmt.Sprintf(" (P, dP and dS, N×N each, alone take %s)", kernels.FormatBytes(sp))
		} else if sp > 0 {
			what = fmt.Sprintf(" (S and P alone take %s)", kernels.FormatBytes(sp))
		}
		return nil, fmt.Errorf("out of device memory: the run needs %s%s, the GPU has %s free", kernels.FormatBytes(need), what, kernels.FormatBytes(free))
	}
	pr := &problem{c: c, plan: plan, inputs: make([]*kernels.Inputs, c.Batch*c.Heads)}
	var wg sync.WaitGroup
	for bh := range pr.inputs {
		wg.Go(func() { pr.inputs[bh] = kernels.InputsFor(&c, bh) })
	}
	wg.Wait()
	// join lays a buffer out batch-head after batch-head. K and V have a
	// batch-head per head of K and V: a grouped run's are its groups'
	// first heads' (kernels.Config.KVSource), each once.
	join := func(b launch.Buffer, pick func(*kernels.Inputs) []float32) []float32 {
		all := make([]float32, 0, len(pr.inputs)*c.N*c.D)
		for bh, in := range pr.inputs {
			if (b == launch.BufK || b == launch.BufV) && c.KVSource(bh) != bh {
				continue
			}
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
	inputs := map[launch.Buffer]func(*kernels.Inputs) []float32{
		launch.BufQ: func(in *kernels.Inputs) []float32 { return in.Q },
		launch.BufK: func(in *kernels.Inputs) []float32 { return in.K },
		launch.BufV: func(in *kernels.Inputs) []float32 { return in.V },
	}
	if kernels.Info(c.Variant).Backward {
		// The backward starts from dO and the forward's O, in the kernel's
		// element type, and L (and a stored P), float32 whatever the kernel.
		inputs[kernels.BufDO] = func(in *kernels.Inputs) []float32 { return in.DO }
		inputs[launch.BufO] = func(in *kernels.Inputs) []float32 { return in.O }
		inputs[launch.BufLSE] = func(in *kernels.Inputs) []float32 { return in.LSE }
		if kernels.Info(c.Variant).Materialised { // naive_bwd reads the forward's P back
			inputs[launch.BufP] = func(in *kernels.Inputs) []float32 { return in.P }
		}
	}
	paged := kernels.Info(c.Variant).Paged
	for b, bytes := range plan.Buffers {
		if bytes == 0 {
			continue
		}
		if paged && (launch.Buffer(b) == launch.BufK || launch.Buffer(b) == launch.BufV) {
			// A paged cache: K and V go up as the pool of pages, each
			// kv-tile where the block table puts it.
			pr.bufs[b], err = upload(kernels.PagedPool(&c, join(launch.Buffer(b), inputs[launch.Buffer(b)])))
		} else if paged && launch.Buffer(b) == kernels.BufPageTable {
			pr.bufs[b], err = pr.mem.uploadInt32(kernels.PageTable(&c))
		} else if pick, ok := inputs[launch.Buffer(b)]; ok && (launch.Buffer(b) == launch.BufLSE || launch.Buffer(b) == launch.BufP) {
			pr.bufs[b], err = pr.mem.upload(join(launch.Buffer(b), pick))
		} else if ok {
			pr.bufs[b], err = upload(join(launch.Buffer(b), pick))
		} else {
			pr.bufs[b], err = pr.mem.alloc(bytes)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := pr.encodeMaps(); err != nil {
		return nil, err
	}
	ok = true
	return pr, nil
}

// encodeMaps encodes the plan's tensor maps once its buffers have their
// addresses: every launch of the problem passes the same 128 bytes.
func (pr *problem) encodeMaps() error {
	for _, k := range pr.plan.Kernels {
		for _, a := range k.Args {
			if a.Map == nil {
				continue
			}
			dst := pr.mem.hostBytes(128, 64)
			if err := encodeTensorMap(dst, a.Map, pr.bufs[a.Map.Buffer]); err != nil {
				return err
			}
			if pr.maps == nil {
				pr.maps = map[*kernels.TensorMap]unsafe.Pointer{}
			}
			pr.maps[a.Map] = dst
		}
	}
	return nil
}

// traceArgs are a traced launch's extra arguments.
type traceArgs struct {
	buf     cu.DevicePtr
	offsets []cu.DevicePtr // per launch
	mode    uint64         // instrument.ModeFull, ModeTiming or ModeRoles
}

// launch runs the plan's kernels once, from the traced module when tr is
// not nil. An address or a value takes its own 8-byte slot, of which the
// driver copies the parameter's size.
func (d *device) launch(pr *problem, tr *traceArgs) error {
	module := pr.plan.Module
	if tr != nil {
		module += "_traced"
	}
	for li, k := range pr.plan.Kernels {
		fn, err := d.fn(module, k.Name)
		if err != nil {
			return err
		}
		params := make([]kernelParam, 0, len(k.Args)+3)
		for _, a := range k.Args {
			switch {
			case a.Map != nil:
				m := pr.maps[a.Map]
				if m == nil {
					return fmt.Errorf("launching %s: its tensor map of buffer %d was not encoded", k.Name, a.Map.Buffer)
				}
				params = append(params, kernelParam{bytes: m})
			case a.IsBuf:
				params = append(params, kernelParam{value: uint64(pr.bufs[a.Buffer])})
			default:
				params = append(params, kernelParam{value: a.Value})
			}
		}
		if tr != nil {
			params = append(params, kernelParam{value: uint64(tr.buf)}, kernelParam{value: uint64(tr.offsets[li])}, kernelParam{value: tr.mode})
		}
		if err := launchKernel(fn, k.Grid, k.Threads, k.Shared, params); err != nil {
			return fatalError{fmt.Errorf("launching %s: %w", k.Name, err)}
		}
	}
	return nil
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
	// gradients are a backward run's dQ, dK and dV (float32 in every
	// backward kernel) as its kernels left them in device memory (every
	// batch-head, N×d each), when the device keeps them
	// (device.keepGradients).
	gradients map[kernels.Buffer][]float32
}

// traceRun runs r traced and assembles its trace: the header and the inputs
// records from the host, then the records the kernels wrote in place. The
// assembled trace is decoded once before it leaves, so a kernel that wrote
// garbage fails its run instead of confusing a browser.
func (d *device) traceRun(r kernels.Run) (*gpuTrace, error) {
	c := r.Config()
	timing := c.Timing
	pr, err := d.newProblem(c)
	if err != nil {
		return nil, err
	}
	defer pr.mem.free()

	lay, err := launch.ForTrace(r)
	if err != nil {
		return nil, err
	}
	traceBytes := lay.TraceBytes
	tr := &traceArgs{mode: instrument.ModeFull}
	switch {
	case c.Roles:
		tr.mode = instrument.ModeRoles
	case timing:
		tr.mode = instrument.ModeTiming
	}
	if tr.buf, err = pr.mem.alloc(int64(traceBytes)); err != nil {
		return nil, err
	}
	if err := cu.MemsetD8(tr.buf, 0, int64(max(traceBytes, 8))); err != nil {
		return nil, fatalError{err}
	}
	for _, l := range lay.Kernels {
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
	recs := make([]byte, traceBytes)
	if len(recs) > 0 {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&recs[0]), tr.buf, int64(traceBytes)); err != nil {
			return nil, fatalError{err}
		}
	}
	if c.Roles {
		if err := launch.PlaceRoles(&c, recs); err != nil {
			return nil, fmt.Errorf("the kernels wrote a malformed roles trace: %w", err)
		}
	}
	var grads map[kernels.Buffer][]float32
	if d.keepGradients && kernels.Info(c.Variant).Backward { // float32 gradients, whatever the kernel's inputs
		grads = map[kernels.Buffer][]float32{}
		for _, b := range []kernels.Buffer{kernels.BufDQ, kernels.BufDK, kernels.BufDV} {
			g := make([]float32, c.Batch*c.Heads*c.N*c.D)
			if err := cu.MemcpyDtoH(unsafe.Pointer(&g[0]), pr.bufs[b], int64(4*len(g))); err != nil {
				return nil, fatalError{err}
			}
			grads[b] = g
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
	return &gpuTrace{header: h, bytes: out, kernelMs: ms, gradients: grads}, nil
}

// chunks splits an assembled trace for sending: the header alone, then runs
// of whole records of about 1 MiB.
func (t *gpuTrace) chunks(emit func([]byte) error) error {
	return instrument.Chunks(&t.header, t.bytes, 1<<20, emit)
}
