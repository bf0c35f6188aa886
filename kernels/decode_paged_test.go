package kernels_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
)

// decode_paged: decode_split's arithmetic (its family's tests hold it);
// what is its own is the block table and the pool the worker lays K and V
// out in, which the kernel reads through.

// pagedConfig draws a paged run: batch rows and K/V heads enough for the
// pool to mix sequences, keys from one to several kv-tiles, any seed.
func pagedConfig(rng *rand.Rand) Config {
	tiles := Info(instrument.VariantDecodePaged).Tiles
	t := tiles[rng.IntN(len(tiles))]
	c := Config{Variant: instrument.VariantDecodePaged, N: 1 + rng.IntN(600), D: t.D, Br: t.Br, Bc: t.Bc, Batch: 1 + rng.IntN(4),
		Heads: 1 << rng.IntN(3), Causal: rng.IntN(2) == 0, Pattern: instrument.Patterns[rng.IntN(len(instrument.Patterns))],
		Seed: []uint64{rng.Uint64(), 0, math.MaxUint64}[rng.IntN(3)]}
	c.Nq = []int{1, 1 + rng.IntN(c.N)}[rng.IntN(2)]
	c.KVHeads = max(1, c.Heads>>rng.IntN(3))
	for c.Group()*c.Br > DecodeAtomRows { // the group's q-tiles fill one atom at most
		c.KVHeads *= 2
	}
	return c
}

// TestPageTableIsAPermutation: every page of the pool holds exactly one
// kv-tile of one sequence, at pool sizes up to a server's (64 sequences of
// 128k keys), and from four pages up the table is not the identity: a
// sequence's kv-tiles are scattered.
func TestPageTableIsAPermutation(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(200, 40) {
		c := Config{Variant: instrument.VariantDecodePaged, N: 1 + rng.IntN(1<<rng.IntN(18)), D: 128, Br: 1, Bc: 64, Batch: 1 + rng.IntN(64), Heads: 8,
			Seed: rng.Uint64()}
		table := PageTable(&c)
		if len(table) != Pages(&c) {
			t.Fatalf("%+v: %d entries, %d pages", c, len(table), Pages(&c))
		}
		seen := make([]bool, Pages(&c))
		identity := true
		for k, p := range table {
			if p < 0 || int(p) >= len(seen) || seen[p] {
				t.Fatalf("%+v: entry %d (batch row %d, kv-tile %d) is page %d: out of the pool or taken twice", c, k, k/c.Tc(), k%c.Tc(), p)
			}
			seen[p] = true
			identity = identity && int(p) == k
		}
		if identity && len(table) >= 4 {
			t.Fatalf("%+v: the table of %d pages is the identity, nothing scattered", c, len(table))
		}
	}
}

// TestPagedPoolHoldsEachTile: the pool holds kv-tile j of K/V head h of
// batch row b, row for row, at page PageOf(b, j), head after head; the
// rows of a ragged last tile's page past N are zero; nothing else is in
// the pool (gathering every tile back through the table gives the
// contiguous cache, every element).
func TestPagedPoolHoldsEachTile(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(60, 12) {
		c := pagedConfig(rng)
		hkv, n, d, bc := c.KVHeadCount(), c.N, c.D, c.Bc
		kv := make([]float32, c.Batch*hkv*n*d)
		for x := range kv {
			kv[x] = float32(rng.NormFloat64()) + 1 // never zero, so a zero in the pool is padding
		}
		pool := PagedPool(&c, kv)
		if int64(len(pool)) != PoolElements(&c) {
			t.Fatalf("%+v: pool of %d elements, want %d", c, len(pool), PoolElements(&c))
		}
		back := make([]float32, len(kv))
		covered := make([]bool, len(pool))
		for b := range c.Batch {
			for j := range c.Tc() {
				page := PageOf(&c, b, j)
				for h := range hkv {
					for r := range bc {
						at := ((page*hkv+h)*bc + r) * d
						for x := range d {
							covered[at+x] = true
							if j*bc+r >= n {
								if pool[at+x] != 0 {
									t.Fatalf("%+v: page %d head %d row %d (past N) holds %v", c, page, h, r, pool[at+x])
								}
								continue
							}
							back[((b*hkv+h)*n+j*bc+r)*d+x] = pool[at+x]
						}
					}
				}
			}
		}
		if !reflect.DeepEqual(back, kv) {
			t.Fatalf("%+v: the tiles gathered back through the table are not the cache", c)
		}
		for x, ok := range covered {
			if !ok {
				t.Fatalf("%+v: pool element %d belongs to no kv-tile", c, x)
			}
		}
	}
}

// TestPagedLaunchReadsThePools: a paged run's split kernel takes Q, the
// two pools and the table where decode_split's takes Q, K and V, the rest
// alike; the plan sizes K and V as the pools PagedPool lays out and the
// table as PageTable's, so the worker's uploads fill them exactly.
func TestPagedLaunchReadsThePools(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(40, 10) {
		c := pagedConfig(rng)
		tile, ok := Info(c.Variant).TileFor(&c)
		if !ok {
			t.Fatalf("%+v: no tile", c)
		}
		paged := Info(c.Variant).Launches(&c, tile)
		s := c
		s.Variant = instrument.VariantDecodeSplit
		split := Info(s.Variant).Launches(&s, tile)
		pk, sk := paged.Kernels[0].Args, split.Kernels[0].Args
		want := append(append([]Arg{}, sk[:3]...), Buf(BufPageTable))
		if !reflect.DeepEqual(pk[:4], want) || !reflect.DeepEqual(pk[4:], sk[3:]) || !reflect.DeepEqual(paged.Kernels[1].Args, split.Kernels[1].Args) {
			t.Fatalf("%+v: paged args %+v, split's %+v", c, pk, sk)
		}
		pool := int64(len(PagedPool(&c, make([]float32, c.Batch*c.KVHeadCount()*c.N*c.D)))) * 2
		if paged.Extra[BufK] != pool || paged.Extra[BufV] != pool || paged.Extra[BufPageTable] != int64(len(PageTable(&c)))*4 {
			t.Fatalf("%+v: plan sizes K %d, V %d, table %d; the pools take %d bytes, the table %d", c, paged.Extra[BufK], paged.Extra[BufV],
				paged.Extra[BufPageTable], pool, len(PageTable(&c))*4)
		}
	}
}

// TestPagedLimitsNameTheRung: a paged run whose group's q-tiles overflow
// the 16-row atom is refused on the GPU naming Br, the limit and the rung
// asked for, not the rung whose block it shares.
func TestPagedLimitsNameTheRung(t *testing.T) {
	t.Parallel()
	c := Config{Variant: instrument.VariantDecodePaged, N: 512, Nq: 8, D: 64, Br: 8, Bc: 64, Batch: 2, Heads: 4, KVHeads: 1}
	err := Info(c.Variant).GPULimits(&c)
	var fe FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != FieldBr || !strings.Contains(fe[0].Message, "decode_paged packs") ||
		!strings.Contains(fe[0].Message, "at most 16 (got 4 × 8)") {
		t.Fatalf("Br 8 with 4 query heads a K/V head: %v", err)
	}
	c.Br = 4
	if err := Info(c.Variant).GPULimits(&c); err != nil {
		t.Fatalf("Br 4 with 4 query heads a K/V head fills the atom exactly: %v", err)
	}
}
