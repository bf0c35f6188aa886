package kernels

import "flashstep/instrument"

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
