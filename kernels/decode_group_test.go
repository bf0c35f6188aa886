package kernels_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
)

// decode_group joins flash2_fast's family: its mirror is that walk, its
// GPU bound that family's. What is its own is the shapes (nq < N, grouped
// heads), held here on the CPU against float64 and against the square runs
// they are part of, and its traffic, which reads a group's K and V once.

// epilogues maps each (batch-head, q-tile) to its epilogue record.
func epilogues(recs []*instrument.Record) map[[2]int]*instrument.Record {
	out := map[[2]int]*instrument.Record{}
	for _, r := range recs {
		if r.Kind == instrument.KindEpilogue {
			out[[2]int{r.BH, r.I}] = r
		}
	}
	return out
}

// TestShapedRunIsTheSquareRunsLastRows: a run of nq < N queries, not
// causal, is the square run's last nq rows bit for bit (its inputs are,
// and each row's arithmetic depends on its row alone); a grouped run's
// K and V are its group's first head's, and so is that head's output.
func TestShapedRunIsTheSquareRunsLastRows(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(20, 4) {
		tile := Info(instrument.VariantDecodeGroup).Tiles[rng.IntN(5)] // d = 64
		sq := Config{Variant: instrument.VariantDecodeGroup, N: 1 + rng.IntN(200), D: tile.D, Br: tile.Br, Bc: tile.Bc,
			Batch: 1 + rng.IntN(2), Heads: 4, Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))], Seed: rng.Uint64()}
		shaped := sq
		shaped.Nq = 1 + rng.IntN(sq.N)
		shaped.KVHeads = []int{1, 2, 4}[rng.IntN(3)]
		sqRecs, err := mirrorRecords(sq)
		if err != nil {
			t.Fatalf("%+v: %v", sq, err)
		}
		shRecs, err := mirrorRecords(shaped)
		if err != nil {
			t.Fatalf("%+v: %v", shaped, err)
		}
		sqEpi, shEpi := epilogues(sqRecs), epilogues(shRecs)
		off := shaped.QueryOffset()
		for bh := range shaped.Batch * shaped.Heads {
			if shaped.KVSource(bh) != bh {
				continue // its K and V are another head's: no square head to hold it to (the float64 test does)
			}
			for r := range shaped.Queries() {
				got := shEpi[[2]int{bh, r / shaped.Br}]
				want := sqEpi[[2]int{bh, (off + r) / sq.Br}]
				gr, wr := r%shaped.Br, (off+r)%sq.Br
				if math.Float32bits(got.LSE[gr]) != math.Float32bits(want.LSE[wr]) {
					t.Fatalf("%+v: head %d query %d: LSE %v, the square run's row %d %v", shaped, bh, r, got.LSE[gr], off+r, want.LSE[wr])
				}
				for x := range shaped.D {
					if math.Float32bits(got.O[gr*shaped.D+x]) != math.Float32bits(want.O[wr*sq.D+x]) {
						t.Fatalf("%+v: head %d query %d: O[%d] %v, the square run's %v", shaped, bh, r, x, got.O[gr*shaped.D+x], want.O[wr*sq.D+x])
					}
				}
			}
		}
	}
}

// TestDecodeMirrorMatchesFloat64: both decode rungs, every shape (one query and several, N
// of 1 and below the tile, causal aligned to the end, one to all heads of
// K and V) within the bf16 kernels' bounds of exact attention on the same
// inputs, every element of every head.
func TestDecodeMirrorMatchesFloat64(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	tiles := Info(instrument.VariantDecodeGroup).Tiles
	for k := range testrand.Runs(40, 8) {
		tile := tiles[rng.IntN(len(tiles))]
		c := Config{Variant: []instrument.Variant{instrument.VariantDecodeGroup, instrument.VariantDecodeSplit}[k%2], D: tile.D, Br: tile.Br, Bc: tile.Bc, Batch: 1 + rng.IntN(2),
			Heads: 1 << rng.IntN(3), Causal: rng.IntN(2) == 0, Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))], Seed: rng.Uint64()}
		switch k % 3 {
		case 0:
			c.N = 1 + rng.IntN(tile.Bc) // below the tile
		default:
			c.N = 1 + rng.IntN(300)
		}
		// One query, or up to three q-tiles' worth: decoding's shapes (the
		// square ones are every rung's tests').
		c.Nq = []int{1, 1 + rng.IntN(min(c.N, 3*c.Br))}[rng.IntN(2)]
		c.KVHeads = c.Heads >> rng.IntN(4)
		if c.KVHeads == 0 {
			c.KVHeads = 1
		}
		recs, err := mirrorRecords(c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		epi := epilogues(recs)
		for bh := range c.Batch * c.Heads {
			in := InputsFor(&c, bh)
			if len(in.Q) != c.Queries()*c.D {
				t.Fatalf("%+v: head %d has %d Q values, want nq·d = %d", c, bh, len(in.Q), c.Queries()*c.D)
			}
			ref, refLSE := ReferenceOf(&c, in)
			var diff2, ref2 float64
			for r := range c.Queries() {
				e := epi[[2]int{bh, r / c.Br}]
				if e == nil {
					t.Fatalf("%+v: head %d has no epilogue for q-tile %d", c, bh, r/c.Br)
				}
				lse := float64(e.LSE[r%c.Br])
				if d := math.Abs(lse - refLSE[r]); !(d <= 1e-3*math.Max(1, math.Abs(refLSE[r]))) {
					t.Fatalf("%+v: head %d query %d: LSE %v, float64 %v", c, bh, r, lse, refLSE[r])
				}
				for x := range c.D {
					o := float64(e.O[(r%c.Br)*c.D+x])
					if math.IsNaN(o) {
						t.Fatalf("%+v: head %d query %d: O[%d] is NaN", c, bh, r, x)
					}
					diff2 += (o - ref[r*c.D+x]) * (o - ref[r*c.D+x])
					ref2 += ref[r*c.D+x] * ref[r*c.D+x]
				}
			}
			if rel := math.Sqrt(diff2 / ref2); !(rel <= 1e-2) {
				t.Fatalf("%+v: head %d: ‖O − ref‖/‖ref‖ = %.3g, above 1e-2", c, bh, rel)
			}
		}
	}
}

// TestCausalShapeSeesUpToItsPosition: under a causal mask query row r of an
// nq-row run is position N − nq + r. One query against N keys sees every
// key (its P has no zero), and a q-tile visits the kv-tiles up to its last
// row's position.
func TestCausalShapeSeesUpToItsPosition(t *testing.T) {
	t.Parallel()
	c := Config{Variant: instrument.VariantDecodeGroup, N: 200, Nq: 1, D: 64, Br: 1, Bc: 64, Batch: 1, Heads: 1, Causal: true,
		Pattern: instrument.PatternNormal, Seed: testrand.Seed()}
	recs, err := mirrorRecords(c)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, r := range recs {
		if r.Kind != instrument.KindFlashStep {
			continue
		}
		steps++
		for col := range r.ColsValid {
			if !(r.P[col] > 0) {
				t.Fatalf("the last position sees every key, but P[%d] of kv-tile %d is %v", col, r.J, r.P[col])
			}
		}
	}
	if steps != c.Tc() {
		t.Fatalf("one query at the last position visits %d kv-tiles, want all %d", steps, c.Tc())
	}
	// Three queries, the first at position 197: tiles 0-3 for the one q-tile of Br = 4.
	c.Nq, c.Br = 3, 4
	if got := c.QTileRecords(0); got != 4+1 {
		t.Fatalf("a q-tile of positions 197-199 leaves %d records, want 4 steps and the epilogue", got)
	}
	c.N, c.Nq, c.Br, c.Bc = 256, 128, 64, 64 // positions 128-191 see kv-tiles 0-2
	if got := c.QTileRecords(0); got != 3+1 {
		t.Fatalf("q-tile 0 of positions 128-191 leaves %d records, want 3 steps and the epilogue", got)
	}
}

// TestDecodeTrafficReadsEachKVHeadOnce: a grouped run's records add up to
// each K/V head's cache read once per q-tile, and every query head's Q and
// O once: what the kernel moves.
func TestDecodeTrafficReadsEachKVHeadOnce(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	c := Config{Variant: instrument.VariantDecodeGroup, N: 64*3 + 1 + rng.IntN(63), Nq: 1, D: 128, Br: 1, Bc: 64, Batch: 2, Heads: 8, KVHeads: 2,
		Pattern: instrument.PatternNormal, Seed: rng.Uint64()}
	recs, err := mirrorRecords(c)
	if err != nil {
		t.Fatal(err)
	}
	var read, written uint64
	for _, r := range recs {
		read += r.BytesRead
		written += r.BytesWritten
	}
	const bf16 = 2
	wantRead := uint64(c.Batch*c.KVHeadCount()*2*c.N*c.D*bf16 + c.Batch*c.Heads*c.Queries()*c.D*bf16)
	wantWritten := uint64(c.Batch * c.Heads * c.Queries() * (c.D*bf16 + 4))
	if read != wantRead || written != wantWritten {
		t.Fatalf("%+v: records read %d and write %d bytes, want %d (K and V once per K/V head, Q per query head) and %d", c, read, written, wantRead, wantWritten)
	}
}

// TestShapeValidation: every field of the shapes is checked, naming the
// field, its limit, and for a rung that takes no such shape the rungs that
// do; URL forms read back the same run, and a square run's URL is as it
// was.
func TestShapeValidation(t *testing.T) {
	t.Parallel()
	base := Config{Variant: instrument.VariantDecodeGroup, N: 100, D: 64, Br: 1, Bc: 64, Batch: 1, Heads: 8, Pattern: instrument.PatternNormal, Seed: 1}
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
		words []string
	}{
		{"nq past N", func(c *Config) { c.Nq = 101 }, FieldNq, []string{"between 1 and N=100", "101"}},
		{"nq negative", func(c *Config) { c.Nq = -1 }, FieldNq, []string{"between 1 and N=100", "-1"}},
		{"kv_heads not dividing", func(c *Config) { c.KVHeads = 3 }, FieldKVHeads, []string{"divide heads=8", "1, 2, 4, 8", "3"}},
		{"kv_heads past heads", func(c *Config) { c.KVHeads = 16 }, FieldKVHeads, []string{"divide heads=8"}},
		{"flash2 with fewer queries", func(c *Config) { c.Variant, c.Br, c.Bc, c.D, c.Nq = instrument.VariantFlash2, 4, 4, 8, 10 },
			FieldNq, []string{"nq must equal N=100", "decode_group"}},
		{"flash2_fast with grouped heads", func(c *Config) { c.Variant, c.KVHeads = instrument.VariantFlash2Fast, 2 },
			FieldKVHeads, []string{"kv_heads must equal heads=8", "decode_group"}},
	}
	for _, tc := range cases {
		c := base
		tc.edit(&c)
		err := c.Validate()
		var fe FieldErrors
		if !errors.As(err, &fe) {
			t.Fatalf("%s: %+v validated (%v)", tc.name, c, err)
		}
		msg, ok := fe.ByField()[tc.field]
		if !ok {
			t.Fatalf("%s: error %v names no %s", tc.name, err, tc.field)
		}
		for _, w := range tc.words {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: %q does not say %q", tc.name, msg, w)
			}
		}
	}
	// The GPU's limit: a group's q-tiles share one 16-row atom.
	c := base
	c.Br, c.KVHeads = 4, 1 // 8 heads × 4 rows
	if err := Info(c.Variant).GPULimits(&c); err == nil || !strings.Contains(err.Error(), "at most 16 (got 8 × 4)") {
		t.Fatalf("8 heads of 4 rows on one K/V head: %v", err)
	}
	c.KVHeads = 2
	if err := Info(c.Variant).GPULimits(&c); err != nil {
		t.Fatalf("4 heads of 4 rows on each K/V head fit the atom: %v", err)
	}
	// URLs: the shapes round-trip; nq = N and kv_heads = heads are the
	// defaults, which a URL leaves out.
	c = base
	c.Nq, c.KVHeads = 7, 2
	back, err := ParseConfig(c.Values())
	if err != nil || back.Nq != 7 || back.KVHeads != 2 || back.Key() != c.Key() {
		t.Fatalf("%+v read back as %+v (%v)", c, back, err)
	}
	c.Nq, c.KVHeads = 100, 8
	v := c.Values()
	if v.Has(FieldNq) || v.Has(FieldKVHeads) {
		t.Fatalf("a square run's URL names its defaults: %s", v.Encode())
	}
	v.Set(FieldNq, "100")
	v.Set(FieldKVHeads, "8")
	if back, err := ParseConfig(v); err != nil || back.Key() != base.Key() {
		t.Fatalf("nq=N and kv_heads=heads read as %+v (%v), not the square run", back, err)
	}
	v.Set(FieldNq, "")
	v.Set(FieldKVHeads, " ")
	if _, err := ParseConfig(v); err != nil {
		t.Fatalf("blank nq and kv_heads are their defaults: %v", err)
	}
	v.Set(FieldNq, "0")
	if _, err := ParseConfig(v); err == nil || !strings.Contains(err.Error(), "nq must be at least 1 (got 0)") {
		t.Fatalf("nq=0: %v", err)
	}
	v.Set(FieldNq, "")
	v.Set(FieldKVHeads, "0")
	if _, err := ParseConfig(v); err == nil || !strings.Contains(err.Error(), "kv_heads must be at least 1 (got 0)") {
		t.Fatalf("kv_heads=0: %v", err)
	}
	v.Set(FieldKVHeads, "")
	v.Set(FieldNq, "one")
	if _, err := ParseConfig(v); err == nil || !strings.Contains(err.Error(), "nq must be a whole number") {
		t.Fatalf("nq=one: %v", err)
	}
}
