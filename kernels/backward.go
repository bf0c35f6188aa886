package kernels

import (
	"math"

	"flashstep/instrument"
)

// What every backward kernel shares: the buffers a backward run adds, the
// walk of a kv-tile's block over the q-tiles, and reading the gradients
// back from a trace.

// backwardBuffers are the buffers every backward run adds to Q, K, V, O and
// L: dO, dQ, dK and dV (N×d per batch-head, elem bytes each) and D (N
// float32 per batch-head).
func backwardBuffers(c *Config, elem int) map[Buffer]int64 {
	bh, n, d := int64(c.Batch*c.Heads), int64(c.N), int64(c.D)
	m := map[Buffer]int64{BufDelta: bh * n * 4}
	for _, b := range []Buffer{BufDO, BufDQ, BufDK, BufDV} {
		m[b] = bh * n * d * int64(elem)
	}
	return m
}

// bwdFirstQTile is the first q-tile kv-tile j's block visits: 0, or under a
// causal mask the one holding row j·Bc, the first that sees the tile's
// first column.
func bwdFirstQTile(c *Config, j int) int {
	if !c.Causal {
		return 0
	}
	return j * c.Bc / c.Br
}

// TraceGradients reads a backward trace's gradients of batch-head bh (a
// trace of every q-tile): dQ from
// the bwd_dq records, dK (× scale, as the kernel writes it) and dV from each
// kv-tile's last step (bwd_step, or the naive backward's bwd_kv), at the last q-tile, which every block visits. Every
// element starts as NaN, so one the trace does not give fails any
// comparison.
func TraceGradients(c *Config, recs []*instrument.Record, bh int) (dq, dk, dv []float32) {
	n, d := c.N, c.D
	dq, dk, dv = fill(n*d, float32(math.NaN())), fill(n*d, float32(math.NaN())), fill(n*d, float32(math.NaN()))
	scale := c.Scale()
	for _, r := range recs {
		if r.BH != bh {
			continue
		}
		switch {
		case r.Kind == instrument.KindBwdDQ:
			copy(dq[r.I*c.Br*d:], r.DQ[:r.RowsValid*d])
		case (r.Kind == instrument.KindBwdStep || r.Kind == instrument.KindBwdKV) && r.I == c.Tr()-1:
			for e := range r.ColsValid * d {
				dk[r.J*c.Bc*d+e] = float32(r.DK[e] * scale)
				dv[r.J*c.Bc*d+e] = r.DV[e]
			}
		}
	}
	return dq, dk, dv
}

// bwdHead is a backward mirror's records of one batch-head, made once by
// walking every kv-tile's block in order: the mirror's unit of work is a
// q-tile (RunMirror), but a step's dK_j and dV_j hold every earlier q-tile's
// part, and dQ_i every kv-tile's. Records of the traced q-tiles only, by
// (kind, i) and by (kind, i, j).
type bwdHead struct {
	q     map[[2]int]*instrument.Record
	tiles map[[3]int]*instrument.Record
}

func newBwdHead() *bwdHead {
	return &bwdHead{q: map[[2]int]*instrument.Record{}, tiles: map[[3]int]*instrument.Record{}}
}

// stopped says whether the run the inputs belong to has stopped (its
// client gone): a backward's walk checks it between blocks and gives up.
func (in *Inputs) stopped() bool {
	select {
	case <-in.bwd.stop:
		return true
	default:
		return false
	}
}

// backwardBlock emits q-tile i's records of batch-head bh, each in its
// phase, in the order records lists them, from the batch-head's walk (head,
// run once per batch-head).
func backwardBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record),
	records func(c *Config, i int) []kindCount, head func() *bwdHead) {
	in.bwd.once.Do(func() { in.bwd.head = head() })
	h := in.bwd.head
	if h == nil { // the run stopped: RunMirror says so
		return
	}
	for _, kc := range records(c, i) {
		spec, _ := instrument.Spec(kc.kind)
		for k := range kc.n {
			if spec.HasJ {
				emit(kc.phase, h.tiles[[3]int{int(kc.kind), i, kc.j0 + k}])
			} else {
				emit(kc.phase, h.q[[2]int{int(kc.kind), i}])
			}
		}
	}
}
