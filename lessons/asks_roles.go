package lessons

import (
	"fmt"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/roles"
)

// The asks about a roles run's role records (docs/ROLES.md): what each warp
// role of a warp-specialised block did, and when. The span arithmetic is
// package roles'; an ask picks the spans and says what they mean.

// HiddenTolNs is how far, in ns, an answer to a hidden checkpoint may lie
// from the recording's value. A student reads the spans off the stepper's
// role lanes, whose tooltips give each span's start and end in whole ns;
// the recording's times are whole ns already, so an endpoint is read
// exactly, or within half a ns should the view round from another origin,
// and an answer added from two clipped products (four endpoints) is off by
// 2 ns at most. The recording itself is good to a few ns inside a block:
// its stamps come from one SM's cycle counter, placed on the chip's clock
// at a rate fitted through each block's own clock readings (docs/ROLES.md,
// docs/LADDER.md run r), and
// an error of 1% in that rate moves an overlap of a few hundred ns by a
// few ns. 10 ns leaves room for both and for a slip of reading, and stays
// far below the shortest product in the recordings (nearly 200 ns) and
// below what a wrong rule gives on the lesson's block (a product left out
// or added, one not cut at the softmax's ends): the lessons' tests hold it
// there.
const HiddenTolNs = 10

// hiddenSoftmax asks for how many ns of one consumer's softmax on a
// kv-tile a product of the other consumer was in flight (issued, not yet
// waited for): roles.Block.HiddenSoftmax of block (bh, q). Absolute, within
// HiddenTolNs.
type hiddenSoftmax struct{}

func (hiddenSoftmax) parse(c *Checkpoint, d *directive) {
	if !c.Run.Roles {
		d.failf("ask=hidden reads role records: it needs a roles run (mode=roles); preset %q is not one", c.Preset)
	}
	c.BH = d.whole("bh", 0, 0, max(c.Run.Batch*c.Run.Heads, 1)-1)
	c.Q = d.whole("q", -1, 0, max(c.Run.Tr(), 1)-1)
	c.KV = d.whole("kv", -1, 0, max(c.Run.Tc(), 1)-1)
	c.Consumer = d.whole("consumer", -1, 0, 1)
	c.Format = grading.FormatNumber
	if len(d.errs) == 0 && c.Run.Causal && !visits(&c.Run, c.BH, c.Q, c.KV) {
		d.failf("block (batch-head %d, q-tile %d) never visits kv-tile %d under the causal mask", c.BH, c.Q, c.KV)
	}
}

// visits says whether run c's block (bh, q) computes kv-tile kv.
func visits(c *kernels.Config, bh, q, kv int) bool {
	for _, st := range kernels.Schedule(c) {
		if st.Kind == instrument.KindRole && st.BH == bh && st.I == q && st.J == kv {
			return true
		}
	}
	return false
}

// consumerRole is the role of consumer warpgroup k (0 or 1).
func consumerRole(k int) instrument.Role { return instrument.RoleConsumer0 + instrument.Role(k) }

// productName is a product's name as the lesson writes it.
func productName(e instrument.Event) string {
	if e == instrument.EventProductPV {
		return "P·V"
	}
	return "S"
}

func (hiddenSoftmax) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	if !t.H.Roles {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: the trace holds no role records (not a roles run)", c.ID)
	}
	step, _ := t.find(instrument.KindTiming, c.BH, c.Q, c.KV)
	blocks := roles.ByBlock(t.Roles)
	b := blocks[roles.Key{BH: c.BH, I: c.Q}]
	if step < 0 || b == nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: block (%d, %d) at kv-tile %d: %w", c.ID, c.BH, c.Q, c.KV, errNotInTrace)
	}
	me := consumerRole(c.Consumer)
	other := roles.Other(me)
	hidden, length, ok := b.HiddenSoftmax(me, c.KV)
	if !ok {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: consumer %d's softmax on kv-tile %d of block (%d, %d): %w", c.ID, c.Consumer, c.KV, c.BH, c.Q, errNotInTrace)
	}
	sm, _ := b.Find(me, instrument.EventSoftmax, c.KV)
	softmax := []roles.Interval{{Start: sm.Start, End: sm.End}}
	// The other consumer's products over the softmax, by name: where each
	// was issued and waited for, against the softmax, and its part inside.
	var parts, sums []string
	for _, p := range b.Select(func(x roles.Span) bool {
		return x.Role == other && roles.IsProduct(x.Event) && x.End > sm.Start && x.Start < sm.End
	}) {
		inside := roles.Overlap(p.Start, p.End, softmax)
		var from, to, share string
		if p.Start >= sm.Start {
			from = fmt.Sprintf("%d ns into the softmax", p.Start-sm.Start)
		} else {
			from = fmt.Sprintf("%d ns before the softmax began", sm.Start-p.Start)
		}
		if p.End <= sm.End {
			to = fmt.Sprintf("%d ns before its end", sm.End-p.End)
		} else {
			to = fmt.Sprintf("%d ns past its end", p.End-sm.End)
		}
		switch {
		case inside == p.Len():
			share = fmt.Sprintf("all %d ns of it inside", inside)
		case p.Start < sm.Start && p.End > sm.End:
			share = fmt.Sprintf("the whole softmax, %d of its %d ns, inside", inside, p.Len())
		case p.Start < sm.Start:
			share = fmt.Sprintf("the last %d of its %d ns inside", inside, p.Len())
		default:
			share = fmt.Sprintf("the first %d of its %d ns inside", inside, p.Len())
		}
		parts = append(parts, fmt.Sprintf("its %s on kv-tile %d was in flight from %s to %s, %s", productName(p.Event), p.J, from, to, share))
		sums = append(sums, fmt.Sprint(inside))
	}
	what := fmt.Sprintf("Consumer %d's softmax on kv-tile %d of block (batch-head %d, q-tile %d) lasted %d ns.", c.Consumer, c.KV, c.BH, c.Q, length)
	switch len(parts) {
	case 0:
		what += fmt.Sprintf(" No product of consumer %d was in flight during it: none of its product bars reaches into the softmax's, so 0 ns.", 1-c.Consumer)
	case 1:
		what += fmt.Sprintf(" One product of consumer %d overlaps it: %s. So %d ns, %.0f%% of the softmax.", 1-c.Consumer, parts[0], hidden, pct(hidden, length))
	default:
		what += fmt.Sprintf(" %s products of consumer %d overlap it: %s. Added, %s = %d ns, %.0f%% of the softmax.",
			countWord(len(parts)), 1-c.Consumer, strings.Join(parts, "; "), strings.Join(sums, " + "), hidden, pct(hidden, length))
	}
	if hidden < length {
		what += fmt.Sprintf(" For the rest of it no product of consumer %d was in flight.", 1-c.Consumer)
	}
	what += fmt.Sprintf(" Over the whole recording, %.0f%% of the consumers' softmax time ran under a product of the other consumer.", 100*roles.Summarise(blocks).SoftmaxHidden)
	return grading.Solution{Number: float64(hidden), Display: c.shown(float64(hidden)) + " ns", Step: step + 1, Lo: 0, Hi: float64(length),
		Why:     "no more of the softmax can run under other products than the softmax lasted, and its bar gives its length",
		Explain: what}, nil
}

// countWord is a small count as a word, at the start of a sentence.
func countWord(n int) string {
	if words := []string{"No", "One", "Two", "Three", "Four"}; n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

func pct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func (hiddenSoftmax) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Absolute(HiddenTolNs), grading.Nanoseconds, func(float64) string {
		return fmt.Sprintf("Not quite. In consumer %d's lane, find its softmax bar for kv-tile %d and read where it starts and ends (hover over it). "+
			"Then, in consumer %d's lane, find every product bar, S or P·V, that lies at least partly between those two times, whatever its kv-tile "+
			"(another tile's bar is drawn lighter, but counts). Of each, only the part inside the softmax counts: from the later of the two starts "+
			"to the earlier of the two ends. Add those parts.", c.Consumer, c.KV, 1-c.Consumer)
	})
}
