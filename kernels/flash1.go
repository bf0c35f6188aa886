package kernels

import (
	"fmt"

	"flashstep/instrument"
)

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

// flash1Rung is the ladder's third rung.
var flash1Rung = &VariantInfo{
	Variant:   instrument.VariantFlash1,
	Title:     "FlashAttention-1 loop order (float32)",
	Summary:   "kv-tiles outer, q-tiles inner: one block per batch-head reads O, m and l from device memory and writes them back at every tile.",
	DType:     instrument.DTypeF32,
	Loop:      LoopKVOuter,
	Rung:      3,
	Gist:      "FlashAttention-1's loop order",
	Idea:      "FlashAttention-1's loop order: one block per batch-head loads K_j and V_j once and walks every q-tile with them, so S and P stay on chip, but each q-tile's O, m and l go back to device memory after every kv-tile and are read again for the next, and O is divided by l at every step. Its parallelism is batch × heads, as FlashAttention-1's was: at long N few blocks fill the GPU.",
	StepRun:   "/step?variant=flash1&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5",
	Colour:    "#7fb2ff",
	BytesNote: "Each step reads Q and the running O, m and l from device memory and writes O, m and l back; K and V are read once per batch-head.",
	Words: Words{
		Steps: map[instrument.Kind]StepWords{
			instrument.KindFlashStep: {Title: "kv-tile {j} (cols {keys}) × q-tile {i} (rows {rows}), {head}",
				Body:  "FlashAttention-1's order: {K_j} and {V_j} stay in shared memory while the block walks the q-tiles. For this one it reads {Q_i}, computes S, the new max, α and P, and writes {O_i} = (α·l_old·O_old + P·{V_j}) / l_new, m and l to device memory again.",
				First: " This is {Q_i}'s first kv-tile: its O, m and l start empty.",
				Later: " {O_i}, m and l come back from device memory first: the previous kv-tile wrote them."},
			instrument.KindEpilogue: {Title: "Q-tile {i} finished (rows {rows}), {head}",
				Body: "That was q-tile {i}'s last kv-tile: its O in device memory, normalised at every step, is final. The block writes LSE = m + log l."},
		},
		TileStates: []TileState{{"done", "done (O, m, l written back to device memory)"}},
		OCaption:   "{O_i}, normalised by l at every step, in device memory",
	},
	GPURate: 1e12, CPURate: 2e9,
	// Only B·H blocks spread over the SMs (8 at N = 32768, d = 128): past
	// N = 4096 a point takes tens of seconds and says nothing new.
	MaxSweptN: 4096,
	Tiles:     Float32Tiles, TeachingTiles: true,
	Instance: func(t Tile) string { return fmt.Sprintf("FLASH1_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads) },
	Launches: func(c *Config, t Tile) Launches {
		// FLASH1_SMEM in flash1.cu: Q_i, K_j (rows padded by one), V_j, the
		// S/P tile (padded) and two per-row arrays (α·l_old and l_new).
		shared := 4 * (t.Br*t.D + t.Bc*(t.D+1) + t.Bc*t.D + t.Br*(t.Bc+1) + 2*t.Br)
		return Launches{
			Kernels: []Launch{{Name: fmt.Sprintf("flash1_br%d_bc%d_d%d", t.Br, t.Bc, t.D), Grid: [3]int{c.Batch * c.Heads, 1, 1}, Threads: t.Threads,
				Shared: shared, Args: append(QKVO(), Buf(BufML), Val(c.N), ScaleArg(c), CausalArg(c))}},
			Extra: map[Buffer]int64{BufML: int64(c.Batch*c.Heads) * 2 * int64(c.N) * 4},
		}
	},
	// One block per batch-head writes a record per (q-tile, kv-tile) step
	// and the epilogue: a slot for each.
	TraceSlots: recordSlots,
	Family:     FamilyFlash1,
	phases:     flash1Phases,
	records:    flash1Records,
}

func flash1Phases(c *Config) int { return c.Tc() }

func flash1Records(c *Config, i int) []kindCount {
	n := flash2KVTiles(c, i)
	out := make([]kindCount, 0, n+1)
	for j := range n {
		out = append(out, kindCount{kind: instrument.KindFlashStep, n: 1, phase: j, j0: j})
	}
	return append(out, kindCount{kind: instrument.KindEpilogue, n: 1, phase: n - 1, j0: 0})
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

// FamilyFlash1: float32, FlashAttention-1's order: kv-tiles outer, O, m and l through device memory.
var FamilyFlash1 = &Family{Name: "flash1", Traffic: flash1Traffic, block: flash1Block}
