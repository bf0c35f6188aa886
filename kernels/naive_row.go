package kernels

import (
	"fmt"

	"flashstep/instrument"
)

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

// naiveRowRung is the ladder's first rung.
var naiveRowRung = &VariantInfo{
	Variant:   instrument.VariantNaiveRow,
	Title:     "One thread per row (float32)",
	Summary:   "The first kernel a student writes: one thread per query row walks every key twice, once for the row max, once for exp, the sum and P·V.",
	DType:     instrument.DTypeF32,
	Loop:      LoopRowThreads,
	Rung:      1,
	Gist:      "a thread per row",
	Idea:      "One thread per query row walks every key twice: once for the row's max, once for exp, the sum l and the weighted sum of V. The first kernel a student writes: correct and safe from overflow, no tiles, no shared memory; every row reads all of K twice and V once, and a thread's registers must hold its whole q row and O row.",
	StepRun:   "/step?variant=naive_row&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5",
	Colour:    "#b5651d",
	BytesNote: "Each block reads Q once and K twice, V once (every row walks every key in both passes); no score is ever stored.",
	Words: Words{
		Steps: map[instrument.Kind]StepWords{
			instrument.KindScores: {Title: "Pass 1: rows {rows} × keys {keys}, {head}",
				Body:  "Each thread owns one query row and walks these keys: s = q·k/√d for each, keeping the row's running max m. Nothing is stored; pass 2 computes every score again.",
				First: " First keys: each thread loads its q row into registers."},
			instrument.KindFlashStep: {Title: "Pass 2: rows {rows} × keys {keys}, {head}",
				Body: "The row max m is known from pass 1, so m never changes here and α = 1: each thread recomputes s, adds P = exp(s − m) to l and P·v to its row of O. No rescaling, at the price of reading all of K twice."},
		},
		TileStates:  []TileState{{"scanned", "pass 1: row max taken, nothing stored"}, {"done", "pass 2: exp, l and O done"}},
		RowsCaption: "Softmax, per row of the q-tile: the max from pass 1, so α = 1 throughout",
	},
	GPURate: 1e12, CPURate: 2e9,
	// Past N = 4096 a point takes tens of seconds (every row re-reads all
	// of K) and says nothing new.
	MaxSweptN: 4096,
	Tiles:     Float32Tiles, TeachingTiles: true,
	Instance: func(t Tile) string { return fmt.Sprintf("NAIVE_ROW_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D) },
	Launches: func(c *Config, t Tile) Launches {
		return Launches{Kernels: []Launch{{Name: fmt.Sprintf("naive_row_br%d_bc%d_d%d", t.Br, t.Bc, t.D), Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
			Threads: t.Br, Args: append(QKVO(), Val(c.N), ScaleArg(c), CausalArg(c))}}}
	},
	Family:  FamilyNaiveRow,
	phases:  onePhase,
	records: naiveRowRecords,
}

func naiveRowRecords(c *Config, i int) []kindCount {
	n := flash2KVTiles(c, i)
	return []kindCount{{kind: instrument.KindScores, n: n, phase: 0, j0: 0}, {kind: instrument.KindFlashStep, n: n, phase: 0, j0: 0}, {kind: instrument.KindEpilogue, n: 1, phase: 0, j0: 0}}
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

// naiveRowBlock runs the block of (bh, q-tile i) and emits its records: the
// scores record of every visited kv-tile (pass 1), the flash step of every
// one (pass 2), then the epilogue. A padding row has no key: S = −Inf, P = 0,
// m = −Inf, l = 0, O = 0 and LSE = −Inf, as the kernel leaves it.
func naiveRowBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	r0 := i * br
	rowsValid := min(br, n-r0)
	q := tileRows(in.Q, d, r0, rowsValid, br)
	tiles := flash2KVTiles(c, i)

	// keys is how many keys of kv-tile j row r sees, from the tile's first:
	// none for a padding row, under a causal mask those at or left of the
	// row's own column.
	keys := func(r, j int) int {
		if r >= rowsValid {
			return 0
		}
		cols := min(bc, n-j*bc)
		if c.Causal {
			cols = min(cols, r0+r-j*bc+1)
		}
		return max(cols, 0)
	}
	// score is s = q·k · scale of row r and key col, the same in both passes.
	score := func(r, col int) float32 {
		return float32(dot32(q[r*d:(r+1)*d], in.K[col*d:(col+1)*d]) * scale)
	}

	// Pass 1: the scores and the row max.
	m := fill(br, negInf)
	for j := range tiles {
		c0 := j * bc
		rec := &instrument.Record{Kind: instrument.KindScores, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: min(bc, n-c0), S: fill(br*bc, negInf)}
		for r := range br {
			for col := range keys(r, j) {
				s := score(r, c0+col)
				rec.S[r*bc+col] = s
				m[r] = max(m[r], s)
			}
		}
		rec.BytesRead, rec.BytesWritten = naiveRowTraffic(c, rec)
		emit(0, rec)
	}

	// Pass 2: p = exp(s − m), l and O, against the max pass 1 found.
	l := make([]float32, br)
	o := make([]float32, br*d)
	for j := range tiles {
		c0 := j * bc
		rec := &instrument.Record{Kind: instrument.KindFlashStep, BH: bh, I: i, J: j,
			RowsValid: rowsValid, ColsValid: min(bc, n-c0),
			MOld: append([]float32(nil), m...), MNew: append([]float32(nil), m...), Alpha: fill(br, 1),
			S: fill(br*bc, negInf), P: make([]float32, br*bc)}
		for r := range br {
			base := softmaxBase(m[r])
			or := o[r*d : (r+1)*d]
			for col := range keys(r, j) {
				s := score(r, c0+col)
				p := exp32(s - base)
				l[r] = float32(l[r] + p)
				v := in.V[(c0+col)*d : (c0+col+1)*d]
				for x := range d {
					or[x] = float32(or[x] + float32(p*v[x]))
				}
				rec.S[r*bc+col], rec.P[r*bc+col] = s, p
			}
		}
		rec.L = append([]float32(nil), l...)
		rec.O = append([]float32(nil), o...)
		rec.BytesRead, rec.BytesWritten = naiveRowTraffic(c, rec)
		emit(0, rec)
	}

	epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: bh, I: i, J: -1, RowsValid: rowsValid,
		O: make([]float32, br*d), LSE: make([]float32, br)}
	for r := range br {
		if l[r] == 0 { // a padding row: no key, no output
			epi.LSE[r] = negInf
			continue
		}
		for x := range d {
			epi.O[r*d+x] = float32(o[r*d+x] / l[r])
		}
		epi.LSE[r] = float32(m[r] + log32(l[r]))
	}
	epi.BytesRead, epi.BytesWritten = naiveRowTraffic(c, epi)
	emit(0, epi)
}

// FamilyNaiveRow: float32, a thread per query row: two passes over the keys, the row max then exp, sum and P·V.
var FamilyNaiveRow = &Family{Name: "naive_row", Traffic: naiveRowTraffic, block: naiveRowBlock}
