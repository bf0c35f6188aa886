package kernels

import "flashstep/instrument"

// FlashAttention-1's loop order, float32: the CPU mirror of flash1.cu, the
// ladder's third rung.
//
// One block per batch-head walks the kv-tiles j in order (outer loop) and,
// for each, every q-tile i that sees it (inner loop). The running state of a
// q-tile cannot stay on chip across the inner loop, so each step reads O_i,
// m_i and l_i from device memory and writes them back:
//
//	S     = Q_i K_jᵀ · scale                 (−Inf where masked or padding)
//	m_new = max(m_old, rowmax(S))
//	α     = exp(m_old − m_new)
//	P     = exp(S − m_new)
//	l_new = α·l_old + rowsum(P)
//	O     = (α·l_old·O_old + P V_j) / l_new   normalised at every step
//
// After a q-tile's last kv-tile its O is final; the epilogue writes the
// LSE = m + log l. Records leave in the kernel's order: phase j holds every
// q-tile's step j (and the epilogue of a q-tile whose last kv-tile is j).

func flash1Phases(c *Config) int { return c.Tc() }

func flash1Records(c *Config, i int) []kindCount {
	n := flash2KVTiles(c, i)
	out := make([]kindCount, 0, n+1)
	for j := range n {
		out = append(out, kindCount{instrument.KindFlashStep, 1, j, j})
	}
	return append(out, kindCount{instrument.KindEpilogue, 1, n - 1, 0})
}

// flash1Traffic is the device-memory traffic of one record. A step reads
// Q_i, and O_i, m_i, l_i after the first kv-tile, and writes O_i, m_i, l_i;
// K_j and V_j are read once per block, counted on the step of the first
// q-tile that visits kv-tile j. The epilogue writes the LSE.
func flash1Traffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32 = 4
	rows, cols, d := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindFlashStep:
		read = rows * d * f32
		if r.J > 0 {
			read += rows*d*f32 + 2*rows*f32
		}
		if r.I == flash1FirstQTile(c, r.J) {
			read += 2 * cols * d * f32
		}
		written = rows*d*f32 + 2*rows*f32
	case instrument.KindEpilogue:
		written = rows * f32
	}
	return read, written
}

// flash1FirstQTile is the first q-tile that visits kv-tile j: 0, or under a
// causal mask the q-tile holding row j·Bc (the rows above it see none of j).
func flash1FirstQTile(c *Config, j int) int {
	if !c.Causal {
		return 0
	}
	return j * c.Bc / c.Br
}

// flash1Block runs q-tile i of batch-head bh through every kv-tile and emits
// step j in phase j. The kernel interleaves the q-tiles (each kv-tile visits
// all of them before the next), but a q-tile's steps depend only on each
// other, through O_i, m_i and l_i in device memory: here those are m, l and
// o, carried from one step to the next as float32, exactly what the kernel
// stores and reloads.
func flash1Block(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	r0 := i * br
	rowsValid := min(br, n-r0)
	q := tileRows(in.Q, d, r0, rowsValid, br)

	m := fill(br, negInf)
	l := make([]float32, br)
	o := make([]float32, br*d)

	tiles := flash2KVTiles(c, i)
	for j := range tiles {
		c0 := j * bc
		colsValid := min(bc, n-c0)
		k := tileRows(in.K, d, c0, colsValid, bc)
		v := tileRows(in.V, d, c0, colsValid, bc)
		// Padding rows have no place in device memory: the kernel starts
		// them afresh at every step, as every row at j = 0.
		for r := rowsValid; r < br; r++ {
			m[r], l[r] = negInf, 0
			clear(o[r*d : (r+1)*d])
		}

		rec := &instrument.Record{Kind: instrument.KindFlashStep, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: colsValid,
			MOld: append([]float32(nil), m...), MNew: make([]float32, br), Alpha: make([]float32, br),
			L: make([]float32, br), S: make([]float32, br*bc), P: make([]float32, br*bc)}

		for r := range br {
			p := rec.P[r*bc : (r+1)*bc]
			mNew, alpha, rowSum := softmaxRow(c, q[r*d:(r+1)*d], k, scale, r0+r, c0, colsValid, m[r], rec.S[r*bc:(r+1)*bc], p)
			lScaled := float32(alpha * l[r]) // the old rows' weight, against the new max
			lNew := float32(lScaled + rowSum)
			or := o[r*d : (r+1)*d]
			for x := range d {
				// O_old is normalised: lScaled·O_old is its unnormalised sum.
				acc := pvDot(float32(lScaled*or[x]), p, v, x, d)
				if lNew == 0 { // every score seen so far masked
					or[x] = 0
				} else {
					or[x] = float32(acc / lNew)
				}
			}
			m[r], l[r] = mNew, lNew
			rec.MNew[r], rec.Alpha[r], rec.L[r] = mNew, alpha, lNew
		}
		rec.O = append([]float32(nil), o...)
		rec.BytesRead, rec.BytesWritten = flash1Traffic(c, rec)
		emit(j, rec)
	}

	// The last step's O is final; the epilogue adds the LSE.
	epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: bh, I: i, J: -1, RowsValid: rowsValid,
		O: append([]float32(nil), o...), LSE: make([]float32, br)}
	for r := range br {
		if l[r] == 0 {
			epi.LSE[r] = negInf
		} else {
			epi.LSE[r] = float32(m[r] + log32(l[r]))
		}
	}
	epi.BytesRead, epi.BytesWritten = flash1Traffic(c, epi)
	emit(tiles-1, epi)
}
