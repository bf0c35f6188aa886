package launch

import (
	"fmt"
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Buffer names a device buffer of a run.
type Buffer int

const (
	BufQ   Buffer = iota // Q, K, V and O: N×d per batch-head, in the kernel's element type
	BufK                 //
	BufV                 //
	BufO                 //
	BufLSE               // N float32 per batch-head
	BufS                 // naive: S, N×N (rows of whole kv-tiles for naive_mma), float32
	BufP                 // naive: P, float32 (bf16 for naive_mma)
	BufML                // flash1: m then l, N float32 each per batch-head
	numBuffers
)

// Arg is one kernel argument: a buffer's device address, or a value. Every
// argument takes an 8-byte slot.
type Arg struct {
	Buffer Buffer
	IsBuf  bool
	Value  uint64
}

func buf(b Buffer) Arg  { return Arg{Buffer: b, IsBuf: true} }
func val(v int) Arg     { return Arg{Value: uint64(v)} }
func bits(v uint64) Arg { return Arg{Value: v} }

// Kernel is one launch of a run.
type Kernel struct {
	Name    string // the symbol in the PTX
	Grid    [3]int
	Threads int
	Shared  int // dynamic shared memory, bytes
	Args    []Arg
	// Offsets is where a traced launch writes: for each trace slot (a
	// block, or for flash1 a record; the kernel knows which) the byte
	// offset of its first record in the trace buffer, NotTraced for none.
	Offsets []uint64
}

// NotTraced marks a trace slot that writes no records.
const NotTraced = ^uint64(0)

// Plan is everything a GPU run of a configuration needs: the PTX module, the
// buffers to allocate (bytes each, zero for none), the launches in order,
// and the trace buffer's size. A traced run passes each launch its Offsets;
// the buffer's bytes, in order, are the trace's records after its inputs
// records, exactly as the mirror emits them.
type Plan struct {
	Module     string // untraced; a traced run loads Module + "_traced"
	Buffers    [numBuffers]int64
	Kernels    []Kernel
	TraceBytes uint64
}

// modules names each variant's PTX module.
var modules = map[instrument.Variant]string{
	instrument.VariantFlash2: kernels.ModuleFlash2, instrument.VariantNaive: kernels.ModuleNaive,
	instrument.VariantFlash2Fast: kernels.ModuleFlash2Fast, instrument.VariantNaiveMMA: kernels.ModuleNaiveMMA,
	instrument.VariantNaiveRow: kernels.ModuleNaiveRow, instrument.VariantFlash1: kernels.ModuleFlash1,
	instrument.VariantFlash2MMA: kernels.ModuleFlash2MMA,
}

// For plans an untraced GPU run of c: the launches without trace offsets.
// It fails when no compiled kernel runs c. The stepper's limits, which bound
// a trace, are c.Validate's and are not checked here: a benchmark run may
// be far larger.
func For(c *kernels.Config) (Plan, error) {
	if err := Validate(c); err != nil {
		return Plan{}, err
	}
	p := Plan{Module: modules[c.Variant]}
	bh, n, d := int64(c.Batch*c.Heads), int64(c.N), int64(c.D)
	elem := int64(c.GPUElementBytes())
	for _, b := range []Buffer{BufQ, BufK, BufV, BufO} {
		p.Buffers[b] = bh * n * d * elem
	}
	p.Buffers[BufLSE] = bh * n * 4
	scale := bits(uint64(math.Float32bits(c.Scale())))
	causal := 0
	if c.Causal {
		causal = 1
	}
	tr, tc, nbh := c.Tr(), c.Tc(), c.Batch*c.Heads
	qkvo := []Arg{buf(BufQ), buf(BufK), buf(BufV), buf(BufO), buf(BufLSE)}
	add := func(k Kernel) { p.Kernels = append(p.Kernels, k) }
	switch c.Variant {
	case instrument.VariantFlash2:
		f, _ := Flash2InstanceFor(c)
		add(Kernel{Name: f.Name(), Grid: [3]int{tr, nbh, 1}, Threads: f.Threads, Shared: f.SharedBytes(),
			Args: append(qkvo, val(c.N), scale, val(causal))})
	case instrument.VariantNaiveRow:
		f, _ := Flash2InstanceFor(c)
		add(Kernel{Name: fmt.Sprintf("naive_row_br%d_bc%d_d%d", f.Br, f.Bc, f.D), Grid: [3]int{tr, nbh, 1}, Threads: f.Br,
			Args: append(qkvo, val(c.N), scale, val(causal))})
	case instrument.VariantFlash1:
		f, _ := Flash2InstanceFor(c)
		p.Buffers[BufML] = bh * 2 * n * 4
		add(Kernel{Name: fmt.Sprintf("flash1_br%d_bc%d_d%d", f.Br, f.Bc, f.D), Grid: [3]int{nbh, 1, 1}, Threads: f.Threads,
			Shared: Flash1SharedBytes(f), Args: append(qkvo, buf(BufML), val(c.N), scale, val(causal))})
	case instrument.VariantFlash2MMA:
		f, _ := Flash2MMAInstanceFor(c)
		add(Kernel{Name: f.Name(), Grid: [3]int{tr, nbh, 1}, Threads: f.Threads(), Shared: f.SharedBytes(),
			Args: append(qkvo, val(c.N), scale, val(causal))})
	case instrument.VariantFlash2Fast:
		f, _ := Flash2FastInstanceFor(c)
		add(Kernel{Name: f.Name(c.Causal), Grid: [3]int{tr, nbh, 1}, Threads: f.Threads(), Shared: f.SharedBytes(),
			Args: append(qkvo, val(c.N), scale)})
	case instrument.VariantNaive:
		p.Buffers[BufS] = bh * n * n * 4
		p.Buffers[BufP] = bh * n * n * 4
		scores, pv := NaiveSharedBytes(c.Br, c.Bc, c.D)
		shape := []Arg{val(c.N), val(c.D), val(c.Br), val(c.Bc)}
		add(Kernel{Name: "naive_scores", Grid: [3]int{tc, tr, nbh}, Threads: NaiveThreads, Shared: scores,
			Args: append([]Arg{buf(BufQ), buf(BufK), buf(BufS)}, append(shape, scale, val(causal))...)})
		add(Kernel{Name: "naive_softmax", Grid: [3]int{tr, nbh, 1}, Threads: NaiveThreads,
			Args: append([]Arg{buf(BufS), buf(BufP), buf(BufLSE)}, shape...)})
		add(Kernel{Name: "naive_pv", Grid: [3]int{tr, nbh, 1}, Threads: NaiveThreads, Shared: pv,
			Args: append([]Arg{buf(BufP), buf(BufV), buf(BufLSE), buf(BufO)}, shape...)})
	case instrument.VariantNaiveMMA:
		f, _ := NaiveMMAInstanceFor(c)
		ld := int64(NaiveMMARowStride(c))
		p.Buffers[BufS] = bh * n * ld * 4
		p.Buffers[BufP] = bh * n * ld * 2
		scores, pv := f.SharedBytes()
		add(Kernel{Name: f.Kernel("scores"), Grid: [3]int{tc, tr, nbh}, Threads: 128, Shared: scores,
			Args: []Arg{buf(BufQ), buf(BufK), buf(BufS), val(c.N), scale, val(causal)}})
		add(Kernel{Name: f.Kernel("softmax"), Grid: [3]int{tr, nbh, 1}, Threads: 256,
			Args: []Arg{buf(BufS), buf(BufP), buf(BufLSE), val(c.N), val(tc)}})
		add(Kernel{Name: f.Kernel("pv"), Grid: [3]int{tr, nbh, 1}, Threads: 128, Shared: pv,
			Args: []Arg{buf(BufP), buf(BufV), buf(BufLSE), buf(BufO), val(c.N)}})
	default:
		return Plan{}, fmt.Errorf("no GPU kernel for variant %v", c.Variant)
	}
	return p, nil
}

// ForTrace plans a traced GPU run of c: For's launches, each with the trace
// offsets of its slots, and the trace buffer's size. c must be a valid
// traced run (c.Validate).
func ForTrace(c *kernels.Config) (Plan, error) {
	if err := c.Validate(); err != nil {
		return Plan{}, err
	}
	p, err := For(c)
	if err != nil {
		return Plan{}, err
	}
	p.layTrace(c)
	return p, nil
}

// DeviceBytes is what the run holds in device memory, its trace aside.
func (p *Plan) DeviceBytes() int64 {
	var b int64
	for _, n := range p.Buffers {
		b += n
	}
	return b
}

// slot says which launch writes a step of the trace, and at which trace
// slot: the block's index in its grid, or for flash1, whose one block per
// batch-head writes its records in kv-tile order rather than one q-tile
// after another, the record's own slot (Tc+1 per q-tile, the last for the
// epilogue).
func slot(c *kernels.Config, s kernels.StepRef, kind instrument.Kind) (launch, index int) {
	tr, tc := c.Tr(), c.Tc()
	block := s.BH*tr + s.I
	switch c.Variant {
	case instrument.VariantFlash1:
		j := s.J
		if kind == instrument.KindEpilogue {
			j = tc
		}
		return 0, block*(tc+1) + j
	case instrument.VariantNaive, instrument.VariantNaiveMMA:
		switch kind {
		case instrument.KindScores:
			return 0, block*tc + s.J
		case instrument.KindSoftmax:
			return 1, block
		}
		return 2, block // P·V and the epilogue
	}
	return 0, block
}

// offsetBytes is the size of the trace-offset tables of a traced run of c:
// 8 bytes per slot of every launch.
func offsetBytes(c *kernels.Config) int64 {
	bh, tr, tc := int64(c.Batch*c.Heads), int64(c.Tr()), int64(c.Tc())
	switch c.Variant {
	case instrument.VariantFlash1:
		return 8 * bh * tr * (tc + 1)
	case instrument.VariantNaive, instrument.VariantNaiveMMA:
		return 8 * (bh*tr*tc + 2*bh*tr) // scores per tile; softmax and P·V per q-tile
	}
	return 8 * bh * tr
}

// slots is how many trace slots a launch has.
func slots(c *kernels.Config, k *Kernel) int {
	if c.Variant == instrument.VariantFlash1 {
		return c.Batch * c.Heads * c.Tr() * (c.Tc() + 1)
	}
	return k.Grid[0] * k.Grid[1] * k.Grid[2]
}

// layTrace places the records of c's trace, in the mirror's order
// (kernels.Schedule), at the slots that write them. In timing mode every
// block of the whole grid writes a 56-byte timing record per step.
func (p *Plan) layTrace(c *kernels.Config) {
	for k := range p.Kernels {
		kn := &p.Kernels[k]
		kn.Offsets = make([]uint64, slots(c, kn))
		for x := range kn.Offsets {
			kn.Offsets[x] = NotTraced
		}
	}
	h := instrument.Header{N: c.N, D: c.D, Br: c.Br, Bc: c.Bc}
	steps := *c
	if c.Timing {
		steps.TraceBH, steps.TraceQ, steps.Timing = instrument.Range{}, instrument.Range{}, false
	}
	for _, s := range kernels.Schedule(&steps) {
		l, x := slot(c, s, s.Kind)
		if o := &p.Kernels[l].Offsets[x]; *o == NotTraced {
			*o = p.TraceBytes
		}
		size := h.RecordBytes(s.Kind)
		if c.Timing {
			size = h.RecordBytes(instrument.KindTiming)
		}
		p.TraceBytes += uint64(size)
	}
}

// Kernels lists every kernel of every module, by module, as the worker
// loads and checks them: each module's kernels, and the traced modules'
// fs_probe.
func Kernels() map[string][]string {
	out := map[string][]string{}
	var f32 []string
	for _, f := range Flash2Instances {
		f32 = append(f32, f.Name())
	}
	out[kernels.ModuleFlash2] = f32
	var row, fa1 []string
	for _, f := range Flash2Instances {
		row = append(row, fmt.Sprintf("naive_row_br%d_bc%d_d%d", f.Br, f.Bc, f.D))
		fa1 = append(fa1, fmt.Sprintf("flash1_br%d_bc%d_d%d", f.Br, f.Bc, f.D))
	}
	out[kernels.ModuleNaiveRow], out[kernels.ModuleFlash1] = row, fa1
	out[kernels.ModuleNaive] = []string{"naive_scores", "naive_softmax", "naive_pv"}
	for _, f := range Flash2MMAInstances {
		out[kernels.ModuleFlash2MMA] = append(out[kernels.ModuleFlash2MMA], f.Name())
	}
	for _, f := range Flash2FastInstances {
		out[kernels.ModuleFlash2Fast] = append(out[kernels.ModuleFlash2Fast], f.Name(false), f.Name(true))
	}
	for _, f := range NaiveMMAInstances {
		out[kernels.ModuleNaiveMMA] = append(out[kernels.ModuleNaiveMMA], f.Kernel("scores"), f.Kernel("softmax"), f.Kernel("pv"))
	}
	all := map[string][]string{}
	for m, names := range out {
		all[m] = names
		all[m+"_traced"] = append(append([]string(nil), names...), "fs_probe")
	}
	return all
}

// DynamicShared is the dynamic shared memory each compiled kernel is
// launched with, by name; naive's scores and P·V kernels, whose tiles are
// the run's, are absent.
func DynamicShared() map[string]int {
	out := map[string]int{"naive_softmax": 0}
	for _, f := range Flash2Instances {
		out[f.Name()] = f.SharedBytes()
		out[fmt.Sprintf("naive_row_br%d_bc%d_d%d", f.Br, f.Bc, f.D)] = 0
		out[fmt.Sprintf("flash1_br%d_bc%d_d%d", f.Br, f.Bc, f.D)] = Flash1SharedBytes(f)
	}
	for _, f := range Flash2MMAInstances {
		out[f.Name()] = f.SharedBytes()
	}
	for _, f := range Flash2FastInstances {
		out[f.Name(false)], out[f.Name(true)] = f.SharedBytes(), f.SharedBytes()
	}
	for _, f := range NaiveMMAInstances {
		scores, pv := f.SharedBytes()
		out[f.Kernel("scores")], out[f.Kernel("softmax")], out[f.Kernel("pv")] = scores, 0, pv
	}
	return out
}
