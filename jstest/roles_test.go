package jstest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"testing"

	"flashstep/instrument"
	"flashstep/recordings"
	"flashstep/roles"
)

// roles.json: what package roles computes of each recorded roles run
// (recordings/list.txt, mode=roles), block by block, for the page's lanes
// (static/js/role_spans.js) to be held to: every figure the lanes' note
// gives, and, for a few blocks, every span. Times are in ns from the
// block's first stamp (its clock anchors aside), as the lanes draw them.
// intervals are random span sets with their union, total and overlap.

type roleRun struct {
	Name   string       `json:"name"` // recordings/NAME.fstrace
	Blocks []roleBlock  `json:"blocks"`
	Shares roles.Shares `json:"shares"`
}

type roleBlock struct {
	BH       int    `json:"bh"`
	I        int    `json:"i"`
	SM       int    `json:"sm"`
	Length   uint64 `json:"length"`   // last end − first start
	InFlight uint64 `json:"inFlight"` // ns with a product in flight
	Unions   int    `json:"unions"`   // the intervals of their union
	Percent  int    `json:"percent"`  // of the block's time, rounded
	// Per consumer (0, 1) and kv-tile: [j, wait for K, softmax, softmax under
	// the other consumer's products].
	Consumers [2][][4]int64 `json:"consumers"`
	// Epilogue lengths per consumer (−1: none).
	Epilogue [2]int64 `json:"epilogue"`
	// For a few blocks: the spans, [role, event, j, start, end] in record
	// order, and the products' union, [start, end].
	Spans    [][5]any    `json:"spans,omitempty"`
	Products [][2]uint64 `json:"products,omitempty"`
}

type intervalCase struct {
	Spans   [][2]uint64 `json:"spans"`
	Union   [][2]uint64 `json:"union"`
	Total   uint64      `json:"total"`
	Window  [2]uint64   `json:"window"`
	Overlap uint64      `json:"overlap"`
}

type roleFixture struct {
	Runs      []roleRun      `json:"runs"`
	Intervals []intervalCase `json:"intervals"`
}

func roleFixtures(t *testing.T, files map[string][]byte) {
	list, err := recordings.Files.Open("list.txt")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := recordings.ParseList(list)
	list.Close()
	if err != nil {
		t.Fatal(err)
	}
	var fx roleFixture
	consumers := [2]instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1}
	for _, e := range entries {
		if q, err := url.ParseQuery(e.Query); err != nil || q.Get("mode") != "roles" {
			continue
		}
		raw, err := recordings.Files.ReadFile(e.Name + ".fstrace")
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := instrument.ReadAll(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		blocks := roles.ByBlock(recs)
		keys := make([]roles.Key, 0, len(blocks))
		for k := range blocks {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b roles.Key) int { return a.BH*1_000_000 + a.I - b.BH*1_000_000 - b.I })
		run := roleRun{Name: e.Name, Shares: roles.Summarise(blocks)}
		for n, k := range keys {
			b := blocks[k]
			first, last := b.Extent()
			products := roles.Union(b.Select(func(s roles.Span) bool { return roles.IsProduct(s.Event) }))
			rb := roleBlock{BH: k.BH, I: k.I, SM: b.SM, Length: last - first, InFlight: roles.Total(products),
				Unions: len(products), Epilogue: [2]int64{-1, -1}}
			rb.Percent = int(math.Round(100 * float64(rb.InFlight) / float64(rb.Length)))
			for c, role := range consumers {
				rb.Consumers[c] = [][4]int64{}
				for _, s := range b.Spans {
					if s.Role != role || s.Event != instrument.EventSoftmax {
						continue
					}
					hidden, softmax, _ := b.HiddenSoftmax(role, s.J)
					wait, ok := b.Find(role, instrument.EventWaitK, s.J)
					if !ok {
						t.Fatalf("%s block %v: %s has a softmax of kv-tile %d and no wait for its K", e.Name, k, role, s.J)
					}
					rb.Consumers[c] = append(rb.Consumers[c], [4]int64{int64(s.J), int64(wait.Len()), int64(softmax), int64(hidden)})
				}
				if ep, ok := b.Find(role, instrument.EventEpilogue, -1); ok {
					rb.Epilogue[c] = int64(ep.Len())
				}
			}
			if n < 2 || n == len(keys)-1 {
				for _, s := range b.Spans {
					if s.Event != instrument.EventClock {
						rb.Spans = append(rb.Spans, [5]any{s.Role.String(), s.Event.String(), s.J, s.Start - first, s.End - first})
					}
				}
				for _, p := range products {
					rb.Products = append(rb.Products, [2]uint64{p.Start - first, p.End - first})
				}
			}
			run.Blocks = append(run.Blocks, rb)
		}
		fx.Runs = append(fx.Runs, run)
	}
	if len(fx.Runs) == 0 {
		t.Fatal("recordings/list.txt names no roles recording")
	}

	rng := rand.New(rand.NewPCG(7, 11))
	for range 200 {
		var spans []roles.Span
		c := intervalCase{Spans: [][2]uint64{}, Union: [][2]uint64{}}
		for range rng.IntN(9) {
			a := uint64(rng.IntN(1000))
			b := a + uint64(rng.IntN(300))
			if rng.IntN(6) == 0 {
				b = a // an instant: no length
			}
			spans = append(spans, roles.Span{Start: a, End: b})
			c.Spans = append(c.Spans, [2]uint64{a, b})
		}
		u := roles.Union(spans)
		for _, x := range u {
			c.Union = append(c.Union, [2]uint64{x.Start, x.End})
		}
		c.Total = roles.Total(u)
		lo := uint64(rng.IntN(1200))
		c.Window = [2]uint64{lo, lo + uint64(rng.IntN(600))}
		c.Overlap = roles.Overlap(c.Window[0], c.Window[1], u)
		fx.Intervals = append(fx.Intervals, c)
	}
	files["roles.json"] = jsonFile(t, fx)
}
