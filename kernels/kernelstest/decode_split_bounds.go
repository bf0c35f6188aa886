package kernelstest

import (
	"math"

	"flashstep/instrument"
)

// decode_split's bounds. Its splits' walks are flash2_fast's arithmetic,
// each from a fresh state at its split's first kv-tile (bf16FlashStep
// restarts there, Bounds.splitPer), and a split's end is that walk's
// epilogue. The merge is float32 on both sides in the same order, parting
// only where expf and logf do (within 2 ulp and 1 ulp on the GPU, 0.5 on
// the mirror) and where its inputs, the splits' LSE_s and O_s, already
// part by their bounds b_s and bO_s. To first order, per row:
//
//	M    = max_s LSE_s                 ΔM ≤ max_s b_s
//	e_s  = expf(LSE_s − M)             Δe_s ≤ e_s(b_s + ΔM + 2u|LSE_s − M|) + 5u·e_s
//	sum  = Σ_s e_s, in order           Δsum ≤ Σ Δe_s + 2u·S·sum
//	LSE  = M + logf(sum)               ΔLSE ≤ ΔM + Δsum/sum + 4u|log sum| + 2u|LSE|
//	w_s  = expf(LSE_s − LSE)           Δw_s ≤ w_s(b_s + ΔLSE + 2u|LSE_s − LSE|) + 5u·w_s
//	O   += w_s·O_s, one fma            ΔO += Δw_s|O_s| + w_s·bO_s + 2u|O|
//
// A split that saw no key has LSE_s = −Inf and O_s = 0 on both sides and
// adds nothing.

// splitState is one q-tile's splits as the bounds walk them.
type splitState struct {
	current    int                  // the split whose walk the fast state holds
	lse, blse  map[int][]float64    // each split's LSE_s and its bound, by split
	o, bo      map[int][]float64    // each split's O_s and its bound
	merged     map[string][]float64 // the latest merge record's bounds
	mergedLSE  []float64            // the merged LSE (mirror's)
	mergedBLSE []float64            // and its bound
}

// DecodeSplitStep is Of for decode_split's records.
func (b *Bounds) DecodeSplitStep(m *instrument.Record) map[string][]float64 {
	key := [2]int{m.BH, m.I}
	st := b.split[key]
	if st == nil {
		st = &splitState{current: -1, lse: map[int][]float64{}, blse: map[int][]float64{}, o: map[int][]float64{}, bo: map[int][]float64{}}
		b.split[key] = st
	}
	br, d := b.h.Br, b.h.D
	switch m.Kind {
	case instrument.KindFlashStep:
		st.current = m.J / b.splitPer
		return b.bf16FlashStep(m, exp2Folded)
	case instrument.KindSplitEnd:
		out := map[string][]float64{"o": make([]float64, br*d), "lse": make([]float64, br)}
		if st.current == m.J { // a split that walked kv-tiles: its walk's epilogue
			out = b.bf16FlashStep(m, exp2Folded)
		}
		st.lse[m.J], st.blse[m.J] = widen(m.LSE), out["lse"]
		st.o[m.J], st.bo[m.J] = widen(m.O), out["o"]
		return out
	case instrument.KindMerge:
		if m.J == 0 {
			st.mergedLSE, st.mergedBLSE = b.mergedLSE(st, m.RowsValid)
			st.merged = map[string][]float64{"o": make([]float64, br*d)}
		}
		bw, bo := make([]float64, br), append([]float64(nil), st.merged["o"]...)
		for r := range m.RowsValid {
			lse, blse := st.mergedLSE[r], st.mergedBLSE[r]
			ls := st.lse[m.J][r]
			if math.IsInf(lse, -1) || math.IsInf(ls, -1) {
				continue // no weight, nothing added
			}
			w := float64(m.Alpha[r])
			bw[r] = w*(st.blse[m.J][r]+blse+2*u*math.Abs(ls-lse)) + 5*u*w + 3e-45
			for x := range d {
				bo[r*d+x] += bw[r]*math.Abs(st.o[m.J][r*d+x]) + w*st.bo[m.J][r*d+x] + 2*u*math.Abs(float64(m.O[r*d+x]))
			}
		}
		st.merged = map[string][]float64{"lse": st.mergedBLSE, "w": bw, "o": bo}
		return st.merged
	case instrument.KindEpilogue: // the merge's result: its last record's O and LSE
		return map[string][]float64{"o": st.merged["o"], "lse": st.mergedBLSE}
	}
	return map[string][]float64{}
}

// mergedLSE is the merged LSE of each row, as the mirror computed it from
// its splits (in float64, which the first-order bound allows), and its
// bound.
func (b *Bounds) mergedLSE(st *splitState, rows int) (lse, blse []float64) {
	br := b.h.Br
	lse, blse = make([]float64, br), make([]float64, br)
	splits := len(st.lse)
	for r := range rows {
		mx, bm := math.Inf(-1), 0.0
		for s := range splits {
			if l := st.lse[s][r]; !math.IsInf(l, -1) {
				mx, bm = math.Max(mx, l), math.Max(bm, st.blse[s][r])
			}
		}
		if math.IsInf(mx, -1) {
			lse[r] = mx
			continue
		}
		var sum, bsum float64
		for s := range splits {
			l := st.lse[s][r]
			if math.IsInf(l, -1) {
				continue
			}
			e := math.Exp(l - mx)
			sum += e
			bsum += e*(st.blse[s][r]+bm+2*u*math.Abs(l-mx)) + 5*u*e + 3e-45
		}
		bsum += 2 * u * float64(splits) * sum
		lse[r] = mx + math.Log(sum)
		blse[r] = bm + bsum/sum + 4*u*math.Abs(math.Log(sum)) + 2*u*math.Abs(lse[r]) + 1e-45
	}
	return lse, blse
}
