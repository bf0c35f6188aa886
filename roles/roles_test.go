package roles

import (
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// Union, Total and Overlap against counting nanosecond by nanosecond.
func TestIntervalArithmetic(t *testing.T) {
	rng := testrand.New(t)
	for range 300 {
		var spans []Span
		covered := make([]bool, 200)
		for range rng.IntN(8) {
			a := uint64(rng.IntN(200))
			b := a + uint64(rng.IntN(int(200-a)+1))
			spans = append(spans, Span{Start: a, End: b})
			for x := a; x < b; x++ {
				covered[x] = true
			}
		}
		u := Union(spans)
		for k := 1; k < len(u); k++ {
			if u[k].Start <= u[k-1].End {
				t.Fatalf("union %v: not disjoint and ordered", u)
			}
		}
		lo := uint64(rng.IntN(200))
		hi := lo + uint64(rng.IntN(int(200-lo)+1))
		var all, in uint64
		for x := range uint64(200) {
			if covered[x] {
				all++
				if x >= lo && x < hi {
					in++
				}
			}
		}
		if Total(u) != all || Overlap(lo, hi, u) != in {
			t.Fatalf("spans %v: total %d overlap [%d,%d) %d, counted %d and %d", spans, Total(u), lo, hi, Overlap(lo, hi, u), all, in)
		}
	}
}

// A block drawn by hand: consumer 0's softmax [100, 300) under consumer 1's
// products [80, 150) and [250, 400) is hidden for 50 + 50 ns.
func TestHiddenSoftmax(t *testing.T) {
	c0, c1 := instrument.RoleConsumer0, instrument.RoleConsumer1
	b := &Block{Spans: []Span{
		{c0, instrument.EventProductS, 0, 20, 100},
		{c0, instrument.EventSoftmax, 0, 100, 300},
		{c1, instrument.EventProductS, 0, 80, 150},
		{c1, instrument.EventSoftmax, 0, 150, 250},
		{c1, instrument.EventTurnPV, 0, 250, 250},
		{c1, instrument.EventProductPV, 0, 250, 400},
		{c0, instrument.EventClock, -1, 5, 5},
	}}
	hidden, softmax, ok := b.HiddenSoftmax(c0, 0)
	if !ok || hidden != 100 || softmax != 200 {
		t.Fatalf("hidden %d of %d (%t), want 100 of 200", hidden, softmax, ok)
	}
	if _, _, ok := b.HiddenSoftmax(c0, 1); ok {
		t.Fatal("a softmax of a kv-tile the block lacks was found")
	}
	first, last := b.Extent()
	s := Summarise(map[Key]*Block{{}: b})
	// Softmax: c0's 100 of 200 hidden, c1's [150, 250) under c0's products [20, 100) only: 0 of 100.
	if first != 20 || last != 400 || s.SoftmaxHidden != 100.0/300 || s.ProductsInFlight != 280.0/380 { // products [20, 150) and [250, 400) of [20, 400)
		t.Fatalf("extent [%d, %d), shares %+v", first, last, s)
	}
}
