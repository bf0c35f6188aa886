package launch

import (
	"flashstep/instrument"
	"flashstep/kernels"
)

// The launch spec's types are the registry's (kernels/launchspec.go): each
// rung states its launches there.
type (
	Buffer = kernels.Buffer
	Arg    = kernels.Arg
)

// The device buffers of a run.
const (
	BufQ       = kernels.BufQ
	BufK       = kernels.BufK
	BufV       = kernels.BufV
	BufO       = kernels.BufO
	BufLSE     = kernels.BufLSE
	BufS       = kernels.BufS
	BufP       = kernels.BufP
	BufML      = kernels.BufML
	numBuffers = kernels.NumBuffers
)

// Kernel is one launch of a run, with its trace offsets.
type Kernel struct {
	kernels.Launch
	// Offsets holds, for a traced run, each trace slot's offset into the
	// trace buffer (NotTraced where the slot writes nothing): a block's
	// (blockIdx.x + gridDim.x·(blockIdx.y + gridDim.y·blockIdx.z)), or for
	// a rung with its own slots (kernels.TraceSlots) a record's.
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

// For plans an untraced run of c, after Validate.
func For(c *kernels.Config) (Plan, error) {
	if err := Validate(c); err != nil {
		return Plan{}, err
	}
	info := kernels.Info(c.Variant)
	p := Plan{Module: info.Module()}
	bh, bkv, n, nq, d := int64(c.Batch*c.Heads), int64(c.Batch*c.KVHeadCount()), int64(c.N), int64(c.Queries()), int64(c.D)
	elem := int64(c.GPUElementBytes())
	// Q, O and the LSE have the queries' rows, per query head; K and V the
	// keys', per head of K and V.
	p.Buffers[BufQ], p.Buffers[BufO] = bh*nq*d*elem, bh*nq*d*elem
	p.Buffers[BufK], p.Buffers[BufV] = bkv*n*d*elem, bkv*n*d*elem
	p.Buffers[BufLSE] = bh * nq * 4
	t, _ := info.TileFor(c)
	l := info.Launches(c, t)
	for b, size := range l.Extra {
		p.Buffers[b] = size
	}
	for _, k := range l.Kernels {
		p.Kernels = append(p.Kernels, Kernel{Launch: k})
	}
	return p, nil
}

// ForTrace plans a traced run of r: For, with each launch's offsets and the
// trace buffer's size laid out from the schedule, after ValidateTraced.
func ForTrace(r kernels.Run) (Plan, error) {
	c := r.Config()
	p, err := For(&c)
	if err != nil {
		return Plan{}, err
	}
	if err := validateOffsets(&c); err != nil {
		return Plan{}, err
	}
	p.layTrace(&c)
	return p, nil
}

// DeviceBytes is the device memory the plan's buffers take.
func (p *Plan) DeviceBytes() int64 {
	var b int64
	for _, n := range p.Buffers {
		b += n
	}
	return b
}

// slot is the launch and the trace slot of step s's record.
func slot(c *kernels.Config, s kernels.StepRef) (launch, index int) {
	if ts := kernels.Info(c.Variant).TraceSlots; ts != nil {
		return ts.Slot(c, s)
	}
	return 0, s.BH*c.Tr() + s.I // block (i, bh) of the one kernel
}

// slots is how many trace slots launch l of c has: its blocks, or its
// rung's count.
func slots(c *kernels.Config, l int, k *kernels.Launch) int {
	if ts := kernels.Info(c.Variant).TraceSlots; ts != nil && ts.Count != nil {
		return ts.Count(c, l)
	}
	return k.Grid[0] * k.Grid[1] * k.Grid[2]
}

// offsetBytes is the size of the offset tables a trace of c uploads,
// from its launches, without building the plan's buffers.
func offsetBytes(c *kernels.Config) int64 {
	info := kernels.Info(c.Variant)
	t, _ := info.TileFor(c)
	var n int64
	for l, k := range info.Launches(c, t).Kernels {
		n += int64(slots(c, l, &k))
	}
	return 8 * n
}

// layTrace gives each slot that writes records the offset of its first
// record: the trace buffer holds the records in the mirror's order
// (kernels.Schedule), each slot's contiguous.
func (p *Plan) layTrace(c *kernels.Config) {
	for k := range p.Kernels {
		kn := &p.Kernels[k]
		kn.Offsets = make([]uint64, slots(c, k, &kn.Launch))
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
		l, x := slot(c, s)
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

// everyLaunch calls f with every launch the compiled kernels can make: each
// rung at each of its tiles, causal and not; a rung without tiles at two
// sizes its limits allow (tile says which).
func everyLaunch(f func(info *kernels.VariantInfo, tile int, k kernels.Launch)) {
	for _, info := range kernels.Variants() {
		tiles := info.Tiles
		if tiles == nil {
			tiles = []kernels.Tile{{Br: 16, Bc: 16, D: 16}, {Br: 32, Bc: 8, D: 64}}
		}
		for x, t := range tiles {
			for _, causal := range []bool{false, true} {
				c := kernels.Config{Variant: info.Variant, N: 4 * max(t.Br, t.Bc), D: t.D, Br: t.Br, Bc: t.Bc, Batch: 1, Heads: 1, Causal: causal}
				for _, k := range info.Launches(&c, t).Kernels {
					f(info, x, k)
				}
			}
		}
	}
}

// Kernels lists, by PTX module, every kernel the plans launch (and fs_probe,
// in each traced module), for the worker to load and the tests to hold
// against the PTX.
func Kernels() map[string][]string {
	untraced := map[string][]string{}
	seen := map[string]bool{}
	everyLaunch(func(info *kernels.VariantInfo, _ int, k kernels.Launch) {
		if !seen[k.Name] {
			seen[k.Name] = true
			untraced[info.Module()] = append(untraced[info.Module()], k.Name)
		}
	})
	all := map[string][]string{}
	for m, names := range untraced {
		all[m] = names
		all[m+"_traced"] = append(append([]string(nil), names...), "fs_probe")
	}
	return all
}

// DynamicShared is the dynamic shared memory each compiled kernel is
// launched with, by name; a kernel whose shared memory is set by the run's
// tiles (naive's scores and P·V) is absent.
func DynamicShared() map[string]int {
	out := map[string]int{}
	varies := map[string]bool{}
	everyLaunch(func(_ *kernels.VariantInfo, _ int, k kernels.Launch) {
		if s, ok := out[k.Name]; ok && s != k.Shared {
			varies[k.Name] = true
		}
		out[k.Name] = k.Shared
	})
	for name := range varies {
		delete(out, name)
	}
	return out
}
