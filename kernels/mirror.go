package kernels

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"flashstep/instrument"
)

// MirrorLabel is the source label of traces made by the CPU mirror, on a
// server or in a browser (the static site's WebAssembly): the same words,
// so that the two make the same bytes.
const MirrorLabel = "CPU mirror: the kernel's Go twin, in the kernel's own arithmetic"

// MirrorTrace is the encoded trace of r as the CPU mirror computes it: emit
// gets the header alone, then each record, in trace order, each chunk
// fresh. The server's CPU engine and the static site's WebAssembly both
// call it, so a configuration's trace is the same bytes in either.
func MirrorTrace(ctx context.Context, r Run, emit func(chunk []byte) error) error {
	c := r.Config()
	h := c.Header(instrument.SourceCPUMirror, MirrorLabel)
	head, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		return err
	}
	if err := emit(head); err != nil {
		return err
	}
	return RunMirror(ctx, r, func(rec *instrument.Record) error {
		chunk, err := instrument.AppendRecord(make([]byte, 0, h.RecordBytes(rec.Kind)), &h, rec)
		if err != nil {
			return err
		}
		return emit(chunk)
	})
}

// RunMirror computes the trace of r on the CPU and hands each record to sink
// in trace order, as soon as it is ready: the first step leaves long before
// the last is computed. Blocks (batch-head, q-tile) run in parallel on every
// core, as blocks run on SMs, but their records leave in the kernel's order.
// It stops at the first error from sink or when ctx is done.
func RunMirror(ctx context.Context, r Run, sink func(*instrument.Record) error) error {
	c := r.c
	if c.Roles {
		return FieldErrors{{Field: FieldMode, Message: "roles mode needs the GPU: the CPU mirror has no warps, copies or clocks to record"}}
	}
	if c.Timing {
		return FieldErrors{{Field: FieldMode, Message: "timing mode needs the GPU: the CPU mirror has no SMs or clocks to record"}}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	info := variantInfo[c.Variant]
	bhs, qs := c.TracedBH(), c.TracedQ()
	phases := info.phases(&c)

	inputs := make([]func() *Inputs, bhs.Len())
	for k := range inputs {
		bh := bhs.Lo + k
		inputs[k] = sync.OnceValue(func() *Inputs {
			// A backward's exact forward is needed up to the last traced
			// q-tile's rows (its walk goes no further), and its walk of
			// the batch-head stops with the run.
			return inputsFor(&c, bh, min(c.N, qs.Hi*c.Br), ctx.Done())
		})
	}

	type block struct {
		bh, i int
		out   []chan *instrument.Record // one per phase, sized to hold it all
	}
	var blocks []*block
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			b := &block{bh: bh, i: i, out: make([]chan *instrument.Record, phases)}
			perPhase := make([]int, phases)
			for _, kc := range info.records(&c, i) {
				perPhase[kc.phase] += kc.n
			}
			for p := range b.out {
				b.out[p] = make(chan *instrument.Record, perPhase[p])
			}
			blocks = append(blocks, b)
		}
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(blocks)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(blocks) || ctx.Err() != nil {
					return
				}
				b := blocks[k]
				info.block(&c, inputs[b.bh-bhs.Lo](), b.bh, b.i, func(phase int, r *instrument.Record) {
					b.out[phase] <- r // never blocks: the channel holds the phase
				})
				for _, ch := range b.out {
					close(ch)
				}
			}
		})
	}
	defer wg.Wait()

	for k := range inputs {
		in := inputs[k]()
		rec := &instrument.Record{Kind: instrument.KindInputs, BH: bhs.Lo + k, I: -1, J: -1, Q: in.Q, K: in.K, V: in.V}
		if err := sink(rec); err != nil {
			return err
		}
	}
	for p := range phases {
		for _, b := range blocks {
			for {
				var rec *instrument.Record
				var ok bool
				select {
				case rec, ok = <-b.out[p]:
				case <-ctx.Done():
					return ctx.Err()
				}
				if !ok {
					break
				}
				if err := sink(rec); err != nil {
					return err
				}
			}
		}
	}
	// A block stopped with the run leaves its phases empty: the trace was
	// cut short, not finished.
	return ctx.Err()
}
