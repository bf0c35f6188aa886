package roles

import (
	"fmt"
	"sort"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// timerStepNs is the step of %globaltimer one thread sees under load on
// the H100 (docs/LADDER.md, run r).
const timerStepNs = 256

// Check holds one roles trace to the schedule and to the order its
// barriers impose, and returns what it measured, in words for a log. Stamps of one
// block share one SM clock placed by one line, so orders within a thread
// or through a barrier hold exactly; two threads woken by one barrier
// phase (the watcher and a consumer, by a copy's landing) are ordered only
// within slack.
func Check(c kernels.Config, h *instrument.Header, recs []*instrument.Record) (string, error) {
	const slack = 50 // ns
	sched := kernels.Schedule(&c)
	if len(recs) != len(sched) || len(recs) != h.Records {
		return "", fmt.Errorf("%d records, the schedule has %d, the header %d", len(recs), len(sched), h.Records)
	}
	for k, s := range sched {
		r := recs[k]
		if r.Kind != s.Kind || r.BH != s.BH || r.I != s.I || r.J != s.J || r.Role != s.Role || r.Event != s.Event {
			return "", fmt.Errorf("record %d: %s %s %s (%d,%d,%d), the schedule has %+v", k, r.Kind, r.Role, r.Event, r.BH, r.I, r.J, s)
		}
		if r.TEnd < r.TStart || r.TStart == 0 {
			return "", fmt.Errorf("record %d (%s %s j=%d): [%d, %d]", k, r.Role, r.Event, r.J, r.TStart, r.TEnd)
		}
	}
	table := kernels.Info(c.Variant).Roles
	consumers := []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1}
	blocks := ByBlock(recs)
	var worstLand int64
	var cover []float64
	timingByBlock := map[Key][]*instrument.Record{}
	for _, r := range recs {
		if r.Kind == instrument.KindTiming {
			timingByBlock[Key{BH: r.BH, I: r.I}] = append(timingByBlock[Key{BH: r.BH, I: r.I}], r)
		}
	}
	// %globaltimer's step as one thread reads it under load on the H100
	// (docs/GPU.md), coarser than the probe's tick in the header.
	quantum := max(timerStepNs, int64(h.TimerTickNs))
	worstTick := int64(0)
	var worstGap struct {
		ns    uint64
		where string
	}
	// Every broken invariant is counted, its first case kept: one GPU
	// call then says all that is wrong.
	failed, firstFail := map[string]int{}, map[string]string{}
	fail := func(what, msg string) {
		if failed[what]++; failed[what] == 1 {
			firstFail[what] = msg
		}
	}
	for key, b := range blocks {
		get := func(role instrument.Role, e instrument.Event, j int) Span {
			s, _ := b.Find(role, e, j)
			return s
		}
		timing := timingByBlock[key]
		jEnd := len(timing) - 1
		for j := range jEnd {
			for _, cp := range []struct{ copy, product instrument.Event }{{instrument.EventCopyK, instrument.EventProductS}, {instrument.EventCopyV, instrument.EventProductPV}} {
				cs := get(instrument.RoleProducer, cp.copy, j)
				if cs.Start >= cs.End {
					fail("copy issued after landing", fmt.Sprintf("block %v: %s of kv-tile %d landed at %d, issued at %d", key, cp.copy, j, cs.End, cs.Start))
				}
				for _, c := range consumers {
					p := get(c, cp.product, j)
					worstLand = max(worstLand, int64(cs.End)-int64(p.Start))
					if cs.End > p.Start+slack {
						fail("copy landed after a read", fmt.Sprintf("block %v: %s of kv-tile %d landed at %d, after %s's product read it at %d", key, cp.copy, j, cs.End, c, p.Start))
					}
					// A stage is refilled only after both consumers waited
					// for the products that read its last fill.
					if j >= 2 {
						free := map[instrument.Event]instrument.Event{instrument.EventCopyK: instrument.EventFreeK, instrument.EventCopyV: instrument.EventFreeV}[cp.copy]
						if f, last := get(instrument.RoleProducer, free, j), get(c, cp.product, j-2); f.End < last.End {
							fail("stage refilled early", fmt.Sprintf("block %v: kv-tile %d's stage freed at %d, before %s's product of kv-tile %d ended at %d", key, j, f.End, c, j-2, last.End))
						}
					}
				}
			}
			// Each consumer's spans follow its program order.
			for _, c := range consumers {
				prev := uint64(0)
				for _, slot := range table.PerTile {
					if slot.Role != c {
						continue
					}
					s := get(c, slot.Event, j)
					if s.Start < prev {
						fail("program order", fmt.Sprintf("block %v %s kv-tile %d: %s starts at %d, before the span before it ended (%d)", key, c, j, slot.Event, s.Start, prev))
					}
					prev = s.End
				}
				if j+1 < jEnd && get(c, instrument.EventWaitK, j+1).Start < prev {
					fail("kv-tile order", fmt.Sprintf("block %v %s: kv-tile %d starts before %d ended", key, c, j+1, j))
				}
			}
			// Ping-pong: the products are issued in turns.
			if table.Turns {
				order := []uint64{
					get(instrument.RoleConsumer0, instrument.EventProductS, j).Start, get(instrument.RoleConsumer1, instrument.EventProductS, j).Start,
					get(instrument.RoleConsumer0, instrument.EventProductPV, j).Start, get(instrument.RoleConsumer1, instrument.EventProductPV, j).Start,
				}
				if j+1 < jEnd {
					order = append(order, get(instrument.RoleConsumer0, instrument.EventProductS, j+1).Start)
				}
				inTurn := true
				for k := 1; k < len(order); k++ {
					inTurn = inTurn && order[k] > order[k-1] // strictly: a turn passes after an issue began
				}
				if !inTurn {
					fail("turns", fmt.Sprintf("block %v kv-tile %d: products issued at %v, not in turns", key, j, order))
				}
			}
			// The step's timing record (consumer 0's) holds its spans, to
			// within two of %globaltimer's steps: one thread's readings of
			// it advance 256 ns at a time on the H100 (docs/LADDER.md, run
			// r), and the placement averages such readings.
			w, p := get(instrument.RoleConsumer0, instrument.EventWaitK, j), get(instrument.RoleConsumer0, instrument.EventProductPV, j)
			off := max(int64(timing[j].TStart)-int64(w.Start), int64(p.End)-int64(timing[j].TEnd))
			worstTick = max(worstTick, off)
			if off > 2*quantum {
				fail("timing record", fmt.Sprintf("block %v kv-tile %d: consumer 0's spans [%d, %d] outside its timing record [%d, %d]", key, j, w.Start, p.End, timing[j].TStart, timing[j].TEnd))
			}
		}
		// Every consumer's spans cover its time, nearly.
		for _, c := range consumers {
			mine := b.Select(func(s Span) bool { return s.Role == c && s.Event != instrument.EventClock })
			u := Union(mine)
			if len(u) > 0 {
				cover = append(cover, float64(Total(u))/float64(u[len(u)-1].End-u[0].Start))
				for k := 1; k < len(u); k++ {
					if gap := u[k].Start - u[k-1].End; gap > worstGap.ns {
						worstGap.ns, worstGap.where = gap, fmt.Sprintf("block %v %s: %d ns idle after %v", key, c, gap, spanEnding(mine, u[k-1].End))
					}
				}
			}
		}
	}
	if len(failed) > 0 {
		var msg []string
		for what, n := range failed {
			msg = append(msg, fmt.Sprintf("%s: %d times, first %s", what, n, firstFail[what]))
		}
		sort.Strings(msg)
		return "", fmt.Errorf("worst timing-record offset %d ns; %s", worstTick, strings.Join(msg, "; "))
	}
	sort.Float64s(cover)
	// The gaps: the end of each step (the barrier arrival, the step's
	// timing record) and the clock anchor's reading.
	if len(cover) == 0 || cover[0] < 0.8 {
		return "", fmt.Errorf("a consumer's spans cover only %.3f of its time; the longest gap: %s", cover[0], worstGap.where)
	}
	sh := Summarise(blocks)
	return fmt.Sprintf("%d blocks; products in flight %.3f of block time; softmax under the other consumer's products %.3f; turns %.3f of consumer time; consumer coverage min %.3f; worst copy landing after a read %d ns; worst timing-record offset %d ns (timer step %d ns)",
		len(blocks), sh.ProductsInFlight, sh.SoftmaxHidden, sh.Turns, cover[0], worstLand, worstTick, quantum), nil
}

// spanEnding names the span of spans that ends at t.
func spanEnding(spans []Span, t uint64) string {
	for _, s := range spans {
		if s.End == t {
			return fmt.Sprintf("%s of kv-tile %d", s.Event, s.J)
		}
	}
	return "?"
}
