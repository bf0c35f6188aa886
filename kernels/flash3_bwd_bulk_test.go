package kernels

import (
	"testing"

	"flashstep/instrument"
)

// flash3_bwd_bulk.cu's phases and the code each must hold
// (TestSourcePhases): its own idea, the dQ phase, in full; the rest named
// where they live.
func init() {
	phaseCode["flash3_bwd_bulk.cu"] = map[string][]string{
		"pre":        {"flash3_bwd_tma.cu's pre"},
		"load-kv":    {"flash3_bwd_tma.cu's main_block"},
		"load-q":     {"flash3_bwd_tma::main_block<BR, BC, D>(tmQ, tmK, tmV, tmDO, tmL, tmD, nullptr", "BulkDQ{tmDQ, (int)blockIdx.y}"},
		"recompute":  {"flash3_bwd_wgmma.cu's qtile"},
		"dp-ds":      {"dSᵀ = Pᵀ ∘ (dPᵀ − D_i)"},
		"dv":         {"dV_j += bf16(Pᵀ) dO_i"},
		"dk":         {"dK_j += bf16(dSᵀ) Q_i"},
		"dq":         {"chunk = ((di & 3) * 2 + (t >> 1)) ^ g", "hopper::fence_async_shared()", "hopper::tma_reduce_add(map, x0, row0, bh, st)", "hopper::bulk_wait_read<0>()", "hopper::bulk_wait<0>()"},
		"write-dkdv": {"flash3_bwd_wgmma.cu's write_dkdv"},
		"dq-scale":   {"bwd_ends::dq_scale<BR, BC, D, NT>(dQ, N, scale"},
	}
}

// TestBulkDQMap: the main kernel adds dQ through a float32 tensor map of
// the run's shape whose box is a warp's 16 rows (what BulkDQ's two boxes a
// pass assume), in the seventh argument's place, and reads no dQ address;
// every tile's shared memory fits a block (227 KiB), and three blocks an
// SM at 64×64, d = 64 (its two q-tile stages are for that: run av).
func TestBulkDQMap(t *testing.T) {
	t.Parallel()
	v := Info(instrument.VariantFlash3BwdBulk)
	for _, tile := range v.Tiles {
		c := Config{Variant: v.Variant, N: 3*tile.Br + 5, D: tile.D, Br: tile.Br, Bc: tile.Bc, Batch: 2, Heads: 3, Pattern: instrument.PatternNormal}
		main := v.Launches(&c, tile).Kernels[1]
		m := main.Args[6].Map
		if m == nil || !m.Add || m.Buffer != BufDQ || m.D != c.D || m.N != c.N || m.BH != 6 || m.Rows != 16 {
			t.Errorf("%v: dQ's argument is %+v, want an Add map of dQ, %d×%d×6, 16 rows a box", tile, main.Args[6], c.D, c.N)
		}
		for k, a := range main.Args {
			if a.IsBuf && a.Buffer == BufDQ {
				t.Errorf("%v: argument %d is dQ's address: the bulk rung adds through its map alone", tile, k)
			}
		}
		const blockMax = 227 * 1024
		if main.Shared > blockMax || (tile.D == 64 && 3*(main.Shared+1024) > 228*1024) {
			t.Errorf("%v: %d bytes of shared memory a block", tile, main.Shared)
		}
	}
}
