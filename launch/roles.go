package launch

import (
	"fmt"
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// PlaceRoles finishes the records of a roles-mode run as its kernel left
// them (docs/ROLES.md). The kernel writes each role record's two times
// only, in its SM's %clock64 cycles, and per block two clock records, each
// a (%globaltimer ns, %clock64 cycles) pair read back to back at the
// block's start and after its epilogue. PlaceRoles writes every role
// record's header from the schedule (kind, role, event, tiles, the block's
// SM from its timing records, a copy's bytes) and places its cycles on the
// %globaltimer axis, so that every time on the wire is nanoseconds on the
// chip's one clock.
//
// %globaltimer advances in coarse steps on the H100 (256 ns in the runs of
// docs/LADDER.md run r), so one block's two anchors alone would give its
// clock rate to a few per cent. Each block's consumer 0 reads more pairs
// back to back: the two anchors, and each timing record's start with the
// start of its first span of that step (wait_k; the epilogue's at the
// close). A long block's rate is the least-squares fit through its pairs;
// a short one's the run's (Σ Δ%globaltimer / Σ Δ%clock64 over every
// block's anchors: the SMs share one clock); each block's offset is the
// mean residual of its pairs. A role record never stamped, or anchors without a positive rate,
// is an error: the kernel skipped a stamp.
func PlaceRoles(c *kernels.Config, recs []byte) error {
	if !c.Roles {
		return fmt.Errorf("launch: PlaceRoles of a run not in roles mode")
	}
	sched := kernels.Schedule(c)
	h := c.Header(instrument.SourceGPU, "")
	size := h.RecordBytes(instrument.KindRole)
	if len(recs) != size*len(sched) {
		return fmt.Errorf("roles trace of %d bytes, the schedule's %d records need %d", len(recs), len(sched), size*len(sched))
	}
	var blocks []*rawBlock
	var dns, dcycles float64
	for start := 0; start < len(sched); {
		end := start + 1
		for end < len(sched) && sched[end].BH == sched[start].BH && sched[end].I == sched[start].I {
			end++
		}
		b, err := readBlock(sched[start:end], recs[start*size:end*size], size)
		if err != nil {
			return fmt.Errorf("block (batch-head %d, q-tile %d): %w", sched[start].BH, sched[start].I, err)
		}
		blocks = append(blocks, b)
		dns += float64(b.pairs[1].ns - b.pairs[0].ns)
		dcycles += float64(b.pairs[1].cycles - b.pairs[0].cycles)
		start = end
	}
	if dns <= 0 || dcycles <= 0 {
		return fmt.Errorf("the clock anchors give no rate: %.0f ns over %.0f cycles", dns, dcycles)
	}
	nsPerCycle := dns / dcycles
	for _, b := range blocks {
		if err := b.place(&h, nsPerCycle); err != nil {
			return fmt.Errorf("block (batch-head %d, q-tile %d): %w", b.sched[0].BH, b.sched[0].I, err)
		}
	}
	return nil
}

// clockPair is a %globaltimer reading and a %clock64 reading one thread
// took back to back.
type clockPair struct{ ns, cycles uint64 }

// rawBlock is one block's records as the kernel left them.
type rawBlock struct {
	sched []kernels.StepRef
	recs  []byte
	size  int
	sm    int
	pairs []clockPair // the two anchors first, then each step's
}

func readBlock(sched []kernels.StepRef, recs []byte, size int) (*rawBlock, error) {
	b := &rawBlock{sched: sched, recs: recs, size: size, sm: -1}
	// Consumer 0's thread 0 reads %globaltimer for a step's timing record
	// and at once %clock64 for its first span of the step: wait_k at a
	// kv-tile, epilogue at the close (kv-tile -1).
	var anchors []clockPair
	timer, first := map[int]uint64{}, map[int]uint64{}
	for k, s := range sched {
		sm, t0, t1, err := instrument.RawStamps(recs[k*size:])
		if err != nil {
			return nil, err
		}
		switch {
		case s.Kind == instrument.KindTiming:
			if b.sm < 0 {
				b.sm = int(sm)
			}
			timer[s.J] = t0
		case s.Event == instrument.EventClock:
			anchors = append(anchors, clockPair{t0, t1})
		case s.Role == instrument.RoleConsumer0 && (s.Event == instrument.EventWaitK || s.Event == instrument.EventEpilogue):
			first[s.J] = t0
		}
	}
	if b.sm < 0 || len(anchors) != 2 {
		return nil, fmt.Errorf("%d clock anchors and no timing record to give the SM", len(anchors))
	}
	if a, z := anchors[0], anchors[1]; z.cycles <= a.cycles || z.ns < a.ns || a.ns == 0 {
		return nil, fmt.Errorf("clock anchors (%d ns, %d cycles) and (%d ns, %d cycles) give no rate", a.ns, a.cycles, z.ns, z.cycles)
	}
	b.pairs = anchors
	for j := -1; j < len(timer)-1; j++ {
		if timer[j] != 0 && first[j] != 0 {
			b.pairs = append(b.pairs, clockPair{timer[j], first[j]})
		}
	}
	return b, nil
}

// fitSpanNs is the span of anchors from which a block's own clock rate is
// trusted over the run's: over 8 µs, pairs quantised to 256 ns give the
// rate to about 1%, and the SM clock can move that much between blocks
// run at different moments (run r: one causal run's blocks drifted 3%).
const fitSpanNs = 8000

// place writes the block's role records: ns = a.ns + δ + rate·(cycles −
// a.cycles), a the first anchor, rate the block's own least-squares fit
// over its pairs when its anchors span fitSpanNs (else the run's), and δ
// the mean residual of the pairs, computed on differences so that float64
// keeps every nanosecond.
func (b *rawBlock) place(h *instrument.Header, nsPerCycle float64) error {
	a := b.pairs[0]
	if float64(b.pairs[1].ns-a.ns) >= fitSpanNs {
		var mx, my float64
		for _, p := range b.pairs {
			mx += float64(int64(p.cycles - a.cycles))
			my += float64(int64(p.ns - a.ns))
		}
		mx /= float64(len(b.pairs))
		my /= float64(len(b.pairs))
		var sxy, sxx float64
		for _, p := range b.pairs {
			x, y := float64(int64(p.cycles-a.cycles))-mx, float64(int64(p.ns-a.ns))-my
			sxy, sxx = sxy+x*y, sxx+x*x
		}
		if sxx > 0 && sxy > 0 {
			nsPerCycle = sxy / sxx
		}
	}
	var delta float64
	for _, p := range b.pairs {
		delta += float64(int64(p.ns-a.ns)) - nsPerCycle*float64(int64(p.cycles-a.cycles))
	}
	delta /= float64(len(b.pairs))
	place := func(cycles uint64) uint64 {
		return uint64(int64(a.ns) + int64(math.Round(delta+nsPerCycle*float64(int64(cycles-a.cycles)))))
	}
	clock := 0
	for k, s := range b.sched {
		if s.Kind != instrument.KindRole {
			continue
		}
		_, t0, t1, _ := instrument.RawStamps(b.recs[k*b.size:])
		r := s.Record()
		r.SM = b.sm
		if s.Event == instrument.EventClock {
			r.TStart, r.TEnd = b.pairs[clock].ns, b.pairs[clock].ns
			clock++
		} else {
			if t0 == 0 || t1 == 0 {
				return fmt.Errorf("the %s record of %s at kv-tile %d was never stamped", s.Event, s.Role, s.J)
			}
			if t1 < t0 { // one SM's clock, read in program order
				return fmt.Errorf("the %s record of %s at kv-tile %d ends at cycle %d, before it starts at %d", s.Event, s.Role, s.J, t1, t0)
			}
			r.TStart, r.TEnd = place(t0), place(t1)
		}
		if err := instrument.PutRecordHeader(b.recs[k*b.size:], h, r); err != nil {
			return err
		}
	}
	return nil
}
