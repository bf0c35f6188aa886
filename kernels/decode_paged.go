package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Split-KV decoding from a paged cache, bf16: decode_paged.cu, the third
// rung of inference's ladder (docs/DECODE.md).
//
// An inference server does not keep a sequence's keys in one piece: its
// cache is a pool of pages, each holding a page's worth of consecutive
// tokens (here Bc, so a kv-tile is a page) for every K/V head, handed out
// as sequences grow, and each sequence keeps a block table, the page of
// each of its kv-tiles in order. A sequence's pages lie anywhere in the
// pool, so the kernel finds kv-tile j of batch row b at page
// table[b][j]: one more load a kv-tile, and the tile's address from it.
//
// Everything else is decode_split's: the same splits, walks and merge,
// reading the same keys (a page holds the contiguous run's tile j), so
// every output is decode_split's bit for bit and the rung joins its
// family (mirror, bound, traffic). What the stepper adds is the table:
// which page each step read.
var decodePagedRung = &VariantInfo{
	Variant:   instrument.VariantDecodePaged,
	Title:     "Decode, split-KV from a paged cache (bf16)",
	Summary:   "decode_split reading K and V from a pool of pages through each sequence's block table, as inference servers keep the cache: kv-tile j of a sequence is wherever its table says.",
	DType:     instrument.DTypeBF16,
	Shapes:    Shapes{Queries: true, GroupedHeads: true},
	Decode:    true,
	Paged:     true,
	Loop:      LoopFused,
	Idea:      "A paged KV cache: the cache is a pool of pages (a kv-tile of every K/V head each), handed out as sequences grow, and each sequence's block table lists its pages in order; the kernel reads kv-tile j from page table[b][j], one load more a tile, and the same bytes of K and V.",
	StepRun:   "/step?variant=decode_paged&n=512&nq=1&d=64&br=1&bc=64&batch=2&heads=4&kv_heads=1&pattern=normal&seed=1",
	Colour:    "#b8860b",
	BytesNote: "decode_split's bytes: K_j and V_j once for the block's group of query heads (counted on the group's first head), read from the page the block table names; a split's partial O and LSE in float32, read back by the merge. The table's 4 bytes a kv-tile are not counted.",
	GPURate:   4e12, CPURate: 0.4e9,
	Tiles:    decodeGroupRung.Tiles, // decode_split's blocks
	Instance: func(t Tile) string { return fmt.Sprintf("DECODE_PAGED_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D) },
	Launches: func(c *Config, t Tile) Launches {
		l := splitLaunches(c, t, "decode_paged", "decode_paged_merge", Buf(BufK), Buf(BufV), Buf(BufPageTable))
		// K and V are the pools (bf16), larger than a contiguous cache by
		// the ragged last kv-tile's rows.
		l.Extra[BufK] = PoolElements(c) * bf16Bytes
		l.Extra[BufV] = PoolElements(c) * bf16Bytes
		l.Extra[BufPageTable] = int64(c.Batch*c.Tc()) * 4
		return l
	},
	TraceSlots: decodeSplitRung.TraceSlots,
	GPULimits:  decodeSplitLimits,
	Family:     FamilyDecodeSplit,
	phases:     func(*Config) int { return 2 },
	records:    decodeSplitRecords,
}

// bf16Bytes is an element of the pools.
const bf16Bytes = 2

// Pages is the pool's size in pages: a page for each kv-tile of each
// sequence (batch row), every one in use.
func Pages(c *Config) int { return c.Batch * c.Tc() }

// PoolElements is a pool's size in elements (K's or V's): Pages pages of
// Bc rows of d for each K/V head.
func PoolElements(c *Config) int64 {
	return int64(Pages(c)) * int64(c.KVHeadCount()) * int64(c.Bc) * int64(c.D)
}

// PageOf is the page holding kv-tile j of batch row b: the block table's
// entry table[b][j]. A server's allocator hands pages out as sequences
// grow, from a free list in whatever order earlier requests left it; the
// table here scatters them as such a pool would, by an affine map of the
// tile's place in the batch, (b·Tc + j)·a + c mod Pages, which is one to
// one because a shares no factor with Pages (the first number from
// 0.618·Pages up that does), and moves with the run's seed (c = seed mod
// Pages). static/js/pages.js computes the same, held to this by a fixture.
func PageOf(c *Config, b, j int) int { return pagesOf(c)(b, j) }

// pagesOf is PageOf for run c, its multiplier found once.
func pagesOf(c *Config) func(b, j int) int {
	p := uint64(Pages(c))
	a := max(1, p*618034/1000000)
	for gcd(a, p) != 1 {
		a++
	}
	tc, off := uint64(c.Tc()), c.Seed%p
	return func(b, j int) int { return int(((uint64(b)*tc+uint64(j))*a + off) % p) }
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// PageTable is the block table as the kernel reads it: Tc entries a batch
// row, row after row.
func PageTable(c *Config) []int32 {
	tc, pageOf := c.Tc(), pagesOf(c)
	t := make([]int32, c.Batch*tc)
	for b := range c.Batch {
		for j := range tc {
			t[b*tc+j] = int32(pageOf(b, j))
		}
	}
	return t
}

// PagedPool lays a contiguous K or V (kv: B·Hkv heads of N rows of d, head
// after head, as the other rungs read it) out as the paged cache's pool:
// page PageOf(b, j) holds rows j·Bc to j·Bc + Bc − 1 of each K/V head h of
// batch row b, head after head ([page][h][row][d]), the rows past N zero.
func PagedPool(c *Config, kv []float32) []float32 {
	hkv, n, d, bc, tc, pageOf := c.KVHeadCount(), c.N, c.D, c.Bc, c.Tc(), pagesOf(c)
	pool := make([]float32, PoolElements(c))
	for b := range c.Batch {
		for j := range tc {
			page := pageOf(b, j)
			rows := min(bc, n-j*bc)
			for h := range hkv {
				src := kv[((b*hkv+h)*n+j*bc)*d:]
				dst := pool[((page*hkv+h)*bc)*d:]
				copy(dst[:rows*d], src[:rows*d])
			}
		}
	}
	return pool
}
