package traffic

import (
	"flashstep/instrument"
	"flashstep/kernels"
)

// The backward's DRAM model, the forward's three rules applied to its
// kernels.
//
// A flash backward (flash2_bwd, flash2_bwd_mma) launches a block per
// kv-tile; the blocks of a batch-head run side by side, each walking the
// q-tiles in order, so the Q_i, dO_i, L_i and D_i one block reads are read
// again by its neighbours soon after:
//
//   - pre reads dO, O and L (first touch) and writes D and the zeroed dQ;
//   - a main step reads K_j and V_j at its block's first q-tile (first
//     touch). Q_i, dO_i, L_i and D_i come from DRAM once per batch-head, at
//     kv-tile 0's step (its block visits every q-tile), and from L2 for the
//     other blocks while the batch-heads in flight keep them there
//     (bwdFits); otherwise at every step;
//   - dQ_i's adds are atomics, done in L2: the first (kv-tile 0's) brings
//     dQ_i in from DRAM, where pre's zeros were written back, and the last
//     leaves it to be written back once, while it fits; otherwise every add
//     reads and writes it. dK_j and dV_j are written once;
//   - dq reads dQ back from DRAM and writes it: by then the main kernel has
//     walked every batch-head.
//
// The naive backward (naive_bwd) moves N×N matrices: P (an input), dP and
// dS (written). Each is read from L2 where the matrices of every
// batch-head fit in it, from DRAM otherwise; ds, which reads its rows of P
// and dP twice, reads them from DRAM once and from L2 the second time only
// where they fit. Its small operands (dO_i, Q_i, K, V) come from DRAM at
// their first touch and from L2 after, as the forward's K and V do
// (kvFits).

// bwdFits says whether the batch-heads a flash backward has in flight keep
// their Q, dO (the kernel's element type), L, D and dQ (float32) in L2.
// Blocks run in launch order, a batch-head's kv-tiles side by side:
// ResidentBlocks/Tc batch-heads, and one more being started.
func (m CacheModel) bwdFits(c *kernels.Config) bool {
	inFlight := int64((m.ResidentBlocks+c.Tc()-1)/c.Tc() + 1)
	n, d := int64(c.N), int64(c.D)
	return inFlight*(2*n*d*int64(elementBytes(c))+2*n*4+n*d*4) <= m.L2Bytes
}

// matricesFit says whether k N×N float32 matrices of every batch-head fit
// in L2.
func (m CacheModel) matricesFit(c *kernels.Config, k int) bool {
	return int64(k)*int64(c.Batch*c.Heads)*int64(c.N)*int64(c.N)*4 <= m.L2Bytes
}

// lastKVTile is the last kv-tile whose block visits q-tile i: every tile,
// or under a causal mask the one holding the q-tile's last row.
func lastKVTile(c *kernels.Config, i int) int {
	if !c.Causal {
		return c.Tc() - 1
	}
	return (min(c.N, (i+1)*c.Br) - 1) / c.Bc
}

// backwardDRAM is DRAM for a backward kernel's step.
func (m CacheModel) backwardDRAM(c *kernels.Config, s kernels.StepRef) (read, write uint64) {
	if kernels.Info(c.Variant).Materialised {
		return m.naiveBwdDRAM(c, s)
	}
	const f32 = 4
	elem := uint64(elementBytes(c))
	rows, cols, d := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D)
	switch s.Kind {
	case instrument.KindBwdPre:
		return 2*rows*d*elem + rows*f32, rows*f32 + rows*d*f32
	case instrument.KindBwdStep:
		fits := m.bwdFits(c)
		if s.I == firstQTile(c, s.J) {
			read += 2 * cols * d * elem // K_j, V_j
		}
		if s.J == 0 || !fits {
			read += 2*rows*d*elem + 2*rows*f32 // Q_i, dO_i, L_i, D_i
			read += rows * d * f32             // dQ_i, brought into L2 by the first add
		}
		if s.J == lastKVTile(c, s.I) || !fits {
			write += rows * d * f32 // dQ_i, written back after the last
		}
		if s.I == c.Tr()-1 {
			write += 2 * cols * d * f32 // dK_j, dV_j
		}
	case instrument.KindBwdDQ:
		return rows * d * f32, rows * d * f32
	}
	return read, write
}

// naiveBwdDRAM is DRAM for a step of naive_bwd's four kernels.
func (m CacheModel) naiveBwdDRAM(c *kernels.Config, s kernels.StepRef) (read, write uint64) {
	const f32 = 4
	rows, cols, d, n := uint64(s.RowsValid), uint64(s.ColsValid), uint64(c.D), uint64(c.N)
	small := m.kvFits(c)
	switch s.Kind {
	case instrument.KindBwdDP:
		if s.J == 0 || !small {
			read += rows * d * f32 // dO_i
		}
		if s.I == 0 || !small {
			read += cols * d * f32 // V_j
		}
		write = rows * cols * f32
	case instrument.KindBwdDS:
		read = rows * n * f32 // P's rows: an input, first touched here
		if !m.matricesFit(c, 2) {
			read += rows * n * f32     // dP's rows, evicted since dp wrote them
			read += 2 * rows * n * f32 // and both again for the second pass
		}
		write = rows * n * f32
	case instrument.KindBwdDQ:
		if !m.matricesFit(c, 3) {
			read += rows * n * f32 // dS's rows
		}
		if s.I == 0 || !small {
			read += n * d * f32 // K
		}
		write = rows * d * f32
	case instrument.KindBwdKV:
		if !m.matricesFit(c, 3) {
			read += 2 * rows * cols * f32 // the P and dS tiles
		}
		if s.J == 0 || !small {
			read += 2 * rows * d * f32 // Q_i, dO_i
		}
		if s.I == c.Tr()-1 {
			write = 2 * cols * d * f32 // dK_j, dV_j
		}
	}
	return read, write
}
