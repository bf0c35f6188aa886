// Package roles reads the role records of a roles-mode trace
// (docs/ROLES.md): each block's spans by warp role, and the arithmetic the
// lessons, the figures and the GPU's checks ask of them — unions, overlaps
// and how much of one lane's time ran under another's. Every time is in
// nanoseconds on the trace's one %globaltimer axis, as the worker placed it.
package roles

import (
	"sort"

	"flashstep/instrument"
)

// Span is one role record: a warp role's interval in a block.
type Span struct {
	Role       instrument.Role
	Event      instrument.Event
	J          int // the kv-tile, or -1 for the block's closing group
	Start, End uint64
}

// Len is the span's length in ns.
func (s Span) Len() uint64 { return s.End - s.Start }

// Block is one block's role records, in trace order.
type Block struct {
	BH, I int
	SM    int
	Spans []Span
}

// Key names a block: its batch-head and q-tile.
type Key struct{ BH, I int }

// ByBlock gathers the role records of a trace by block. Records of other
// kinds are skipped.
func ByBlock(recs []*instrument.Record) map[Key]*Block {
	out := map[Key]*Block{}
	for _, r := range recs {
		if r.Kind != instrument.KindRole {
			continue
		}
		k := Key{r.BH, r.I}
		b := out[k]
		if b == nil {
			b = &Block{BH: r.BH, I: r.I, SM: r.SM}
			out[k] = b
		}
		b.Spans = append(b.Spans, Span{Role: r.Role, Event: r.Event, J: r.J, Start: r.TStart, End: r.TEnd})
	}
	return out
}

// Find is the span of role and event at kv-tile j, if the block has one.
func (b *Block) Find(role instrument.Role, e instrument.Event, j int) (Span, bool) {
	for _, s := range b.Spans {
		if s.Role == role && s.Event == e && s.J == j {
			return s, true
		}
	}
	return Span{}, false
}

// Select is the spans of which keep says yes.
func (b *Block) Select(keep func(Span) bool) []Span {
	var out []Span
	for _, s := range b.Spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Extent is the block's first start and last end over its spans, the
// clock anchors left out (they are instants, not work).
func (b *Block) Extent() (first, last uint64) {
	first = ^uint64(0)
	for _, s := range b.Spans {
		if s.Event == instrument.EventClock {
			continue
		}
		first, last = min(first, s.Start), max(last, s.End)
	}
	return first, last
}

// IsProduct reports whether e is a tensor-core product (issued to waited).
func IsProduct(e instrument.Event) bool {
	return e == instrument.EventProductS || e == instrument.EventProductPV
}

// Interval is a half-open time interval [Start, End) in ns.
type Interval struct{ Start, End uint64 }

// Union is the union of spans as disjoint intervals in time order.
func Union(spans []Span) []Interval {
	iv := make([]Interval, 0, len(spans))
	for _, s := range spans {
		if s.End > s.Start {
			iv = append(iv, Interval{s.Start, s.End})
		}
	}
	sort.Slice(iv, func(a, b int) bool { return iv[a].Start < iv[b].Start })
	var out []Interval
	for _, x := range iv {
		if n := len(out); n > 0 && x.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, x.End)
			continue
		}
		out = append(out, x)
	}
	return out
}

// Total is the length of disjoint intervals.
func Total(iv []Interval) uint64 {
	var n uint64
	for _, x := range iv {
		n += x.End - x.Start
	}
	return n
}

// Overlap is how much of [start, end) the disjoint intervals cover.
func Overlap(start, end uint64, iv []Interval) uint64 {
	var n uint64
	for _, x := range iv {
		lo, hi := max(start, x.Start), min(end, x.End)
		if hi > lo {
			n += hi - lo
		}
	}
	return n
}

// Other is the other consumer warpgroup.
func Other(r instrument.Role) instrument.Role {
	if r == instrument.RoleConsumer0 {
		return instrument.RoleConsumer1
	}
	return instrument.RoleConsumer0
}

// HiddenSoftmax is how many ns of consumer c's softmax on kv-tile j ran
// while a product of the other consumer was in flight (issued, not yet
// waited for): the overlap ping-pong is built to make.
func (b *Block) HiddenSoftmax(c instrument.Role, j int) (hidden, softmax uint64, ok bool) {
	s, ok := b.Find(c, instrument.EventSoftmax, j)
	if !ok {
		return 0, 0, false
	}
	other := Other(c)
	products := Union(b.Select(func(x Span) bool { return x.Role == other && IsProduct(x.Event) }))
	return Overlap(s.Start, s.End, products), s.Len(), true
}

// Shares sums what a whole roles trace says of its consumers: the share
// of all consumer softmax time that ran under the other consumer's
// products, the share of consumer time spent waiting for a turn, and the
// share of blocks' time with a product of either consumer in flight.
type Shares struct {
	SoftmaxHidden, Turns, ProductsInFlight float64
}

// Summarise computes the Shares of blocks.
func Summarise(blocks map[Key]*Block) Shares {
	var hidden, softmax, turns, consumer, inFlight, span uint64
	for _, b := range blocks {
		first, last := b.Extent()
		span += last - first
		inFlight += Total(Union(b.Select(func(x Span) bool { return IsProduct(x.Event) })))
		for _, c := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
			other := Union(b.Select(func(x Span) bool { return x.Role == Other(c) && IsProduct(x.Event) }))
			for _, s := range b.Spans {
				if s.Role != c || s.Event == instrument.EventClock {
					continue
				}
				consumer += s.Len()
				switch s.Event {
				case instrument.EventSoftmax:
					softmax += s.Len()
					hidden += Overlap(s.Start, s.End, other)
				case instrument.EventTurnS, instrument.EventTurnPV:
					turns += s.Len()
				}
			}
		}
	}
	ratio := func(a, b uint64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return Shares{SoftmaxHidden: ratio(hidden, softmax), Turns: ratio(turns, consumer), ProductsInFlight: ratio(inFlight, span)}
}
