package kernels

import "flashstep/instrument"

// One thread per query row, float32: the CPU mirror of naive_row.cu, the
// ladder's first rung.
//
// Thread r of the block of q-tile i owns row r0+r and walks the keys twice:
//
//	pass 1: s_c = q·k_c · scale for every key c, m = max_c s_c
//	pass 2: s_c again, p_c = exp(s_c − m), l += p_c, O += p_c·v_c
//
// and then O/l and LSE = m + log l. No shared memory and no tile: the block's
// threads happen to read the same key at the same time. The trace cuts both
// passes into kv-tiles of Bc keys so the stepper can show them: pass 1 as
// scores records (the S tile, which no memory ever holds), pass 2 as flash
// steps whose m never changes (α = 1: the max is known before the sum
// starts), then the epilogue. Under a causal mask each row stops at its own
// column; kv-tiles wholly above the q-tile's diagonal are not visited.

func naiveRowRecords(c *Config, i int) []kindCount {
	n := flash2KVTiles(c, i)
	return []kindCount{{instrument.KindScores, n, 0, 0}, {instrument.KindFlashStep, n, 0, 0}, {instrument.KindEpilogue, 1, 0, 0}}
}

// naiveRowTraffic is the device-memory traffic of one record, counted per
// block as flash2's: pass 1 reads K_j (and Q_i with the first tile), pass 2
// reads K_j and V_j, the epilogue writes O and the LSE. The block's threads
// all read the same key at once, so a warp's load is one request; other
// warps of the block find it in L1, which the model does not count twice.
func naiveRowTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32 = 4
	rows, cols, d := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindScores:
		read = cols * d * f32
		if r.J == 0 {
			read += rows * d * f32
		}
	case instrument.KindFlashStep:
		read = 2 * cols * d * f32
	case instrument.KindEpilogue:
		written = rows*d*f32 + rows*f32
	}
	return read, written
}

// naiveRowBlock runs the block of (bh, q-tile i) and emits its records.
func naiveRowBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	panic("naive_row mirror: not written yet")
}
