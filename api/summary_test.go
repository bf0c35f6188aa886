package api

import (
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
)

// TestSummarySaysTheShape: a run's one line names its queries against its
// keys and the K/V heads its query heads share, in words a count agrees
// with, and a square run's line is as it always was.
func TestSummarySaysTheShape(t *testing.T) {
	c := kernels.Config{Variant: instrument.VariantDecodeSplit, N: 256, Nq: 1, D: 64, Br: 1, Bc: 64, Batch: 1, Heads: 4, KVHeads: 1,
		Pattern: instrument.PatternNormal, Seed: 1}
	for want, edit := range map[string]func(*kernels.Config){
		"decode_split · 1 query against N=256 keys · d=64 · Br×Bc=1×64 · batch 1 × 4 heads sharing 1 K/V head · normal inputs, seed 1": func(*kernels.Config) {},
		"decode_split · 3 queries against N=256 keys · d=64 · Br×Bc=1×64 · batch 1 × 4 heads sharing 2 K/V heads · normal inputs, seed 1": func(c *kernels.Config) {
			c.Nq, c.KVHeads = 3, 2
		},
		"decode_split · N=256 · d=64 · Br×Bc=1×64 · batch 1 × 4 heads · normal inputs, seed 1": func(c *kernels.Config) { c.Nq, c.KVHeads = 0, 0 },
	} {
		d := c
		edit(&d)
		if got := Summary(&d); got != want {
			t.Errorf("%+v: %q, want %q", d, got, want)
		}
	}
}
