package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Naive attention on tensor cores, bf16: the CPU mirror of naive_mma.cu. The
// three phases are naive's (naive.go), with the tensor cores' arithmetic:
//
//  1. scores:  S_raw in float32 from d/16 mma chunks of 16 exact bf16
//     products (mmaChunk), then S = S_raw·scale; −Inf above the diagonal.
//  2. softmax: naive's three passes in float32, unchanged; P = exp(S − m)/l
//     rounded to bf16, as the kernel stores it.
//  3. pv:      O += P·V, Bc/16 mma chunks per kv-tile in column order, P and
//     V bf16, O accumulated in float32. The tiles are flash2_fast's, so the
//     side by side steps both over the same tiles.
//
// The kernel pads S's and P's rows to whole kv-tiles (zeros past N); the
// mirror keeps rows of N, which holds the same values.

// naiveMMARung is naive attention on the tensor cores of the last rungs:
// not a rung, the like-for-like partner of the bf16 flash kernels.
var naiveMMARung = &VariantInfo{
	Variant:      instrument.VariantNaiveMMA,
	Title:        "Naive attention, tensor cores (bf16)",
	Summary:      "naive's three kernels on tensor cores: bf16 products, S (float32) and P (bf16) still N×N in device memory.",
	DType:        instrument.DTypeBF16,
	Materialised: true,
	Loop:         LoopMaterialised,
	DiffsAgainst: instrument.VariantNaive, // the same three kernels in float32
	Idea:         "The naive three kernels on tensor cores: S = QKᵀ (float32, N×N), a row softmax writing P (bf16, N×N), O = PV. The like-for-like partner of the bf16 flash rungs: memory-bound on its N² traffic.",
	Bench:        true,
	StepRun:      "/step?variant=naive_mma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:       "#8c1c2b",
	GPURate:      25e12, CPURate: 0.4e9,
	// flash2_fast's tiles (Br = 128, 4 warps of 32 rows) for each head dim,
	// so that the two step over the same tiles (TestInstancesMatchSource
	// checks naive_mma.cu agrees).
	Tiles:      []Tile{{128, 128, 64, 128}, {128, 48, 128, 128}},
	Instance:   func(t Tile) string { return fmt.Sprintf("NAIVE_MMA_INSTANCE(%d, %d)", t.Bc, t.D) },
	Launches:   naiveMMALaunches,
	TraceSlots: &TraceSlots{Slot: materialisedSlot},
	Family:     FamilyNaiveMMA,
	phases:     func(*Config) int { return naivePhases },
	records:    naiveRecords,
}

// naiveMMALaunches: S float32 and P bf16, their rows N rounded up to whole
// kv-tiles so that every tile load is whole and aligned; the scores and pv
// kernels' shared memory (naive_mma::scores_smem and pv_smem) holds bf16
// tiles, P's rows padded by 8 elements.
func naiveMMALaunches(c *Config, t Tile) Launches {
	bh, n, ld := int64(c.Batch*c.Heads), int64(c.N), int64(c.Tc()*c.Bc)
	tr, tc, nbh := c.Tr(), c.Tc(), c.Batch*c.Heads
	name := func(phase string) string { return fmt.Sprintf("naive_mma_%s_bc%d_d%d", phase, t.Bc, t.D) }
	return Launches{
		Kernels: []Launch{
			{Name: name("scores"), Grid: [3]int{tc, tr, nbh}, Threads: t.Threads, Shared: 2 * (t.Br*t.D + t.Bc*t.D),
				Args: []Arg{Buf(BufQ), Buf(BufK), Buf(BufS), Val(c.N), ScaleArg(c), CausalArg(c)}},
			{Name: name("softmax"), Grid: [3]int{tr, nbh, 1}, Threads: 256,
				Args: []Arg{Buf(BufS), Buf(BufP), Buf(BufLSE), Val(c.N), Val(tc)}},
			{Name: name("pv"), Grid: [3]int{tr, nbh, 1}, Threads: t.Threads, Shared: 2 * (t.Br*(t.Bc+8) + t.Bc*t.D),
				Args: []Arg{Buf(BufP), Buf(BufV), Buf(BufLSE), Buf(BufO), Val(c.N)}},
		},
		Extra: map[Buffer]int64{BufS: bh * n * ld * 4, BufP: bh * n * ld * 2},
	}
}

var naiveMMA = naiveArith{
	score: func(q, k []float32, scale float32) float32 {
		var acc float32
		for k0 := 0; k0 < len(q); k0 += 16 {
			k1 := min(k0+16, len(q))
			acc = mmaChunk(acc, q[k0:k1], k[k0:k1], 1)
		}
		return float32(acc * scale)
	},
	storeP: RoundBF16,
	pvTile: func(acc float32, p []float32, v []float32, stride int) float32 {
		for c0 := 0; c0 < len(p); c0 += 16 {
			c1 := min(c0+16, len(p))
			acc = mmaChunk(acc, p[c0:c1], v[c0*stride:], stride)
		}
		return acc
	},
	traffic: naiveMMATraffic,
}

func naiveMMABlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	naiveMMA.block(c, in, bh, i, emit)
}

// naiveMMATraffic is naive's traffic with bf16 Q, K, V, P and O: S stays
// float32 (written by the scores, read three times by the softmax).
func naiveMMATraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32, bf16 = 4, 2
	rows, cols, d, n := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D), uint64(c.N)
	switch r.Kind {
	case instrument.KindScores:
		return (rows + cols) * d * bf16, rows * cols * f32
	case instrument.KindSoftmax:
		return 3 * rows * n * f32, rows*n*bf16 + rows*f32
	case instrument.KindPV:
		return rows*cols*bf16 + cols*d*bf16, 0
	case instrument.KindEpilogue:
		return 0, rows * d * bf16
	}
	return 0, 0
}

// FamilyNaiveMMA: naive's three phases with bf16 products on tensor cores.
var FamilyNaiveMMA = &Family{Name: "naive_mma", Traffic: naiveMMATraffic, block: naiveMMABlock}
