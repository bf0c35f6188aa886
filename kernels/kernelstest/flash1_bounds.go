package kernelstest

import (
	"math"

	"flashstep/instrument"
)

// Flash1Step is Of for flash1's flash_step and epilogue records: the bound
// on every element of a step's S, m_old, m_new, α, P, l and O, and of an
// epilogue's O and LSE, between a GPU trace and the mirror's record m.
// Records must come in trace order (kv-tile by kv-tile), after their
// batch-head's inputs record.
//
// flash1 runs flash2's float32 operations on S, m, α, P and l, in the same
// order, so those bounds are flash2's: S and m agree bit for bit (m_old is
// reloaded from device memory, exactly as stored), Δα and Δp are expf's
// (expBound), and
//
//	Δl_new ≤ Δα·l_old + α·Δl_old + 2u·α·l_old + Σ_c (Δp_c + 2u·|partial sum_c|) + 2u·l_new.
//
// O differs: each step reloads O_old, normalised, and stores
//
//	O_new = (lScaled·O_old + Σ_c p_c·v_c) / l_new,   lScaled = α·l_old,
//
// summed as acc = lScaled·O_old, then acc += p_c·v_c column by column. By
// the rules at the top of bounds.go, to first order:
//
//	ΔlScaled ≤ Δα·l_old + α·Δl_old + 2u·lScaled
//	Δacc     ≤ ΔlScaled·|O_old| + lScaled·ΔO_old + 2u·|lScaled·O_old|
//	           + Σ_c (Δp_c·|v_c| + 2u·|p_c·v_c| + 2u·|acc_c|)   (acc_c: the sum after column c)
//	ΔO_new   ≤ (Δacc + |O_new|·Δl_new) / l_new + 2u·|O_new|
//
// where ΔO_old and Δl_old are the previous step's bounds. Since lScaled ≤
// l_new, what O_old was off by carries over at most at weight one: each step
// adds its own roundings rather than multiplying the past ones. l_new is
// either 0 or at least 1 on both sides at once: the column at the new max
// has p = exp(0) = 1 exactly, or the max is old and α = exp(0) = 1 keeps
// l_old ≥ 1; a row of l_new = 0 has seen only masked scores and stores O = 0
// on both sides, no bound needed.
//
// The epilogue's O is the last step's, copied: the same bound. Its LSE =
// m + log l is flash2's: Δl/l + 4u·|log l| + 2u·|LSE| (logf within 1 ulp).
func (b *Bounds) Flash1Step(m *instrument.Record) map[string][]float64 {
	h := b.h
	br, bc, d := h.Br, h.Bc, h.D
	zero := func(n int) []float64 { return make([]float64, n) }
	key := [2]int{m.BH, m.I}
	st := b.flash1[key]

	if m.Kind == instrument.KindEpilogue {
		bo, blse := zero(br*d), zero(br)
		for r := range m.RowsValid {
			copy(bo[r*d:(r+1)*d], st.bo[r*d:(r+1)*d])
			if l := st.l[r]; l > 0 {
				blse[r] = st.bl[r]/l + 4*u*math.Abs(math.Log(l)) + 2*u*math.Abs(float64(m.LSE[r]))
			}
		}
		return map[string][]float64{"o": bo, "lse": blse}
	}

	if m.J == 0 || st == nil {
		st = &flashState{l: zero(br), o: zero(br * d), bl: zero(br), bo: zero(br * d)}
		b.flash1[key] = st
	}
	v := b.v[m.BH]
	ba, bp, bl, bo := zero(br), zero(br*bc), zero(br), zero(br*d)
	for r := range m.RowsValid {
		alpha, lOld := float64(m.Alpha[r]), st.l[r]
		ba[r] = expBound(alpha)
		var bsum, partial float64
		for c := range bc {
			p := float64(m.P[r*bc+c])
			bp[r*bc+c] = expBound(p)
			partial += p
			bsum += bp[r*bc+c] + 2*u*math.Abs(partial)
		}
		lNew := float64(m.L[r])
		lScaled := alpha * lOld
		bScaled := ba[r]*lOld + alpha*st.bl[r] + 2*u*lScaled
		bl[r] = bScaled + bsum + 2*u*lNew
		if lNew == 0 {
			continue // only masked scores so far: O = 0 on both sides
		}
		for x := range d {
			oOld := st.o[r*d+x]
			acc := lScaled * oOld
			bAcc := bScaled*math.Abs(oOld) + lScaled*st.bo[r*d+x] + 2*u*math.Abs(acc)
			for c := range m.ColsValid {
				vv := float64(v[(m.J*bc+c)*d+x])
				term := float64(m.P[r*bc+c]) * vv
				acc += term
				bAcc += bp[r*bc+c]*math.Abs(vv) + 2*u*math.Abs(term) + 2*u*math.Abs(acc)
			}
			oNew := math.Abs(float64(m.O[r*d+x]))
			bo[r*d+x] = (bAcc+oNew*bl[r])/lNew + 2*u*oNew
		}
	}
	for r := range br {
		st.l[r] = float64(m.L[r])
		for x := range d {
			st.o[r*d+x] = float64(m.O[r*d+x])
		}
	}
	st.bl, st.bo = bl, bo
	return map[string][]float64{"m_old": zero(br), "m_new": zero(br), "s": zero(br * bc),
		"alpha": ba, "p": bp, "l": bl, "o": bo}
}
