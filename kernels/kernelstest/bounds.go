package kernelstest

import (
	"fmt"
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// How far may the GPU's trace lie from the mirror's? Both run the same float32
// operations in the same order, each rounded on its own (__fmul_rn,
// __fadd_rn on the GPU, float32(...) in Go), so S, m and every mask agree bit
// for bit. They part at exp: CUDA's expf is within 2 ulp of exact, the
// mirror's within 0.5 ulp, so |Δexp| ≤ 2.5 ulp ≤ 5u|e| (an ulp is at most
// 2u|v|, u = 2⁻²⁴). From there each operation moves the difference by what
// its inputs differ by, plus one rounding on each side, at most 2u times its
// result:
//
//	Δ(a·b) ≤ Δa|b| + |a|Δb + 2u|ab|      Δ(a+b) ≤ Δa + Δb + 2u|a+b|
//	Δ(a/b) ≤ (Δa + |a/b|Δb)/|b| + 2u|a/b|   Δlog l ≤ Δl/l + 4u|log l|
//
// Bounds applies these, to first order, along the mirror's trace; the tests
// hold every GPU element to them and report the worst ratio.

const u = 1.0 / (1 << 24)

// expBound bounds the two machines' exp apart at value e, with 3e-45 for a
// denormal result.
func expBound(e float64) float64 { return 5*u*math.Abs(e) + 3e-45 }

// flashState is a flash2 block's bounds after its latest step.
type flashState struct {
	l, o   []float64 // the mirror's l and O
	bl, bo []float64 // their bounds
}

// rowState is a naive row's softmax and output so far.
type rowState struct {
	s         []float64 // the row of S, as written
	m, l, bl  float64
	acc, bacc []float64 // O so far and its bound
}

// Bounds walks a mirror trace, record by record, and says how far a GPU
// trace of the same run may lie from it. The float32 kernels follow the
// bounds above; flash2_fast (bf16, tensor cores) those of Flash2FastStep.
type Bounds struct {
	h     *instrument.Header
	q, k  map[int][]float32
	v     map[int][]float32
	flash map[[2]int]*flashState
	naive map[[2]int]*rowState
	fast  map[[2]int]*fastState
	// naiveMMA walks naive_mma's rows (NaiveMMAStep).
	naiveMMA map[[2]int]*naiveMMAState
	flash1   map[[2]int]*flashState // flash1's q-tiles, O normalised at every step (Flash1Step)
	bwd      map[int]*bwdState      // a backward's batch-heads (Flash2BwdStep)
	// split-KV's walks and partials (DecodeSplitStep): each split's walk
	// starts afresh at its first kv-tile, a multiple of splitPer.
	splitPer int
	split    map[[2]int]*splitState
}

// ownBounds are the families whose records (all but the inputs) follow
// bounds of their own, each in its <family>_bounds.go; the float32 families
// that round every operation on its own (naive_row, naive, flash2) follow
// Of's. A rung that joins a family is held to the family's bound: rungs 7
// to 11 run flash2_fast's arithmetic on other instructions (only the order
// inside a 16-term product may differ, which Flash2FastStep allows) and
// change only how operands arrive and when work runs.
var ownBounds = map[*kernels.Family]func(*Bounds, *instrument.Record) map[string][]float64{
	kernels.FamilyFlash1:       (*Bounds).Flash1Step,
	kernels.FamilyFlash2MMA:    (*Bounds).Flash2MMAStep,
	kernels.FamilyFlash2Fast:   (*Bounds).Flash2FastStep,
	kernels.FamilyNaiveMMA:     (*Bounds).NaiveMMAStep,
	kernels.FamilyFlash2Bwd:    (*Bounds).Flash2BwdStep,
	kernels.FamilyNaiveBwd:     (*Bounds).NaiveBwdStep,
	kernels.FamilyFlash2BwdMMA: (*Bounds).Flash2BwdMMAStep,
	kernels.FamilyDecodeSplit:  (*Bounds).DecodeSplitStep,
}

// NewBounds starts a walk over a trace with header h.
func NewBounds(h *instrument.Header) *Bounds {
	b := &Bounds{h: h, q: map[int][]float32{}, k: map[int][]float32{}, v: map[int][]float32{},
		flash: map[[2]int]*flashState{}, naive: map[[2]int]*rowState{}, fast: map[[2]int]*fastState{},
		naiveMMA: map[[2]int]*naiveMMAState{}, flash1: map[[2]int]*flashState{}, split: map[[2]int]*splitState{}}
	if info := kernels.Info(h.Variant); info != nil && info.Family == kernels.FamilyDecodeSplit {
		c := kernels.ConfigFromHeader(h)
		_, b.splitPer = kernels.DecodeSplits(&c)
	}
	return b
}

// Of returns the bound of every array of the mirror's record m, element by
// element (padding elements are never compared), and advances the walk.
func (b *Bounds) Of(m *instrument.Record) map[string][]float64 {
	h := b.h
	br, bc, d := h.Br, h.Bc, h.D
	out := map[string][]float64{}
	zero := func(n int) []float64 { return make([]float64, n) }
	switch m.Kind {
	case instrument.KindInputs:
		b.q[m.BH], b.k[m.BH], b.v[m.BH] = m.Q, m.K, m.V
		out["q"], out["k"], out["v"] = zero(len(m.Q)), zero(len(m.K)), zero(len(m.V))
		return out
	}
	if own := ownBounds[kernels.Info(h.Variant).Family]; own != nil {
		return own(b, m)
	}
	switch m.Kind {
	case instrument.KindFlashStep:
		key := [2]int{m.BH, m.I}
		st := b.flash[key]
		if m.J == 0 || st == nil {
			st = &flashState{l: zero(br), o: zero(br * d), bl: zero(br), bo: zero(br * d)}
			b.flash[key] = st
		}
		v := b.v[m.BH]
		out["m_old"], out["m_new"], out["s"] = zero(br), zero(br), zero(br*bc)
		ba, bp, bl, bo := zero(br), zero(br*bc), zero(br), zero(br*d)
		for r := range m.RowsValid {
			alpha := float64(m.Alpha[r])
			ba[r] = expBound(alpha)
			var bsum, partial float64
			for c := range bc {
				p := float64(m.P[r*bc+c])
				bp[r*bc+c] = expBound(p)
				partial += p
				bsum += bp[r*bc+c] + 2*u*math.Abs(partial)
			}
			lNew := float64(m.L[r])
			bl[r] = ba[r]*st.l[r] + alpha*st.bl[r] + 2*u*alpha*st.l[r] + bsum + 2*u*lNew
			for x := range d {
				// O = alpha·O_prev, then the tile's products added into it.
				oPrev := st.o[r*d+x]
				acc := alpha * oPrev
				b := ba[r]*math.Abs(oPrev) + alpha*st.bo[r*d+x] + 2*u*math.Abs(acc)
				for c := range m.ColsValid {
					vv := float64(v[(m.J*bc+c)*d+x])
					term := float64(m.P[r*bc+c]) * vv
					acc += term
					b += bp[r*bc+c]*math.Abs(vv) + 2*u*math.Abs(term) + 2*u*math.Abs(acc)
				}
				bo[r*d+x] = b
			}
		}
		out["alpha"], out["p"], out["l"], out["o"] = ba, bp, bl, bo
		for r := range br {
			st.l[r] = float64(m.L[r])
			for x := range d {
				st.o[r*d+x] = float64(m.O[r*d+x])
			}
		}
		st.bl, st.bo = bl, bo

	case instrument.KindEpilogue:
		bo, blse := zero(br*d), zero(br)
		for r := range m.RowsValid {
			var l, bl float64
			var bAcc []float64
			if !kernels.Info(h.Variant).Materialised { // flash2, naive_row: the state of a flash step
				st := b.flash[[2]int{m.BH, m.I}]
				l, bl = st.l[r], st.bl[r]
				for x := range d {
					o := float64(m.O[r*d+x])
					bo[r*d+x] = (st.bo[r*d+x]+math.Abs(o)*bl)/l + 2*u*math.Abs(o)
				}
			} else {
				row := b.naive[[2]int{m.BH, m.I*br + r}]
				l, bl, bAcc = row.l, row.bl, row.bacc
				copy(bo[r*d:(r+1)*d], bAcc)
			}
			blse[r] = bl/l + 4*u*math.Abs(math.Log(l)) + 2*u*math.Abs(float64(m.LSE[r]))
		}
		out["o"], out["lse"] = bo, blse

	case instrument.KindScores:
		out["s"] = zero(br * bc)
		for r := range m.RowsValid {
			key := [2]int{m.BH, m.I*br + r}
			row := b.naive[key]
			if row == nil {
				row = &rowState{}
				b.naive[key] = row
			}
			for c := range m.ColsValid {
				row.s = append(row.s, float64(m.S[r*bc+c]))
			}
		}

	case instrument.KindSoftmax:
		bl := zero(br)
		out["m"] = zero(br)
		for r := range m.RowsValid {
			row := b.naive[[2]int{m.BH, m.I*br + r}]
			row.m, row.l = float64(m.MNew[r]), float64(m.L[r])
			var be float64
			for _, s := range row.s {
				be += expBound(math.Exp(s - row.m))
			}
			// Each lane sums ⌈N/32⌉ terms, then five butterfly levels: no
			// partial sum exceeds l.
			row.bl = be + 2*u*float64((h.N+31)/32+5)*row.l
			bl[r] = row.bl
			row.acc, row.bacc = zero(d), zero(d)
		}
		out["l"] = bl

	case instrument.KindPV:
		v := b.v[m.BH]
		bp, bo := zero(br*bc), zero(br*d)
		for r := range m.RowsValid {
			row := b.naive[[2]int{m.BH, m.I*br + r}]
			for c := range m.ColsValid {
				e := math.Exp(row.s[m.J*bc+c] - row.m)
				p := float64(m.P[r*bc+c])
				bp[r*bc+c] = (expBound(e)+p*row.bl)/row.l + 2*u*p + 3e-45
			}
			for x := range d {
				for c := range m.ColsValid {
					vv := float64(v[(m.J*bc+c)*d+x])
					term := float64(m.P[r*bc+c]) * vv
					row.acc[x] += term
					row.bacc[x] += bp[r*bc+c]*math.Abs(vv) + 2*u*math.Abs(term) + 2*u*math.Abs(row.acc[x])
				}
				bo[r*d+x] = row.bacc[x]
			}
		}
		out["p"], out["o"] = bp, bo
	}
	return out
}

// CompareRecords holds GPU record g to the mirror's m: the same structure,
// the same traffic, and every array element within its bound. worst collects
// the largest error/bound ratio per array.
func CompareRecords(h *instrument.Header, g, m *instrument.Record, bnd map[string][]float64, worst map[string]float64) error {
	if g.Kind != m.Kind || g.BH != m.BH || g.I != m.I || g.J != m.J || g.RowsValid != m.RowsValid || g.ColsValid != m.ColsValid {
		return fmt.Errorf("structure: GPU %s (bh %d, %d, %d) rows %d cols %d; mirror %s (bh %d, %d, %d) rows %d cols %d",
			g.Kind, g.BH, g.I, g.J, g.RowsValid, g.ColsValid, m.Kind, m.BH, m.I, m.J, m.RowsValid, m.ColsValid)
	}
	if g.BytesRead != m.BytesRead || g.BytesWritten != m.BytesWritten {
		return fmt.Errorf("%s (%d, %d): GPU counts %d/%d bytes, the model %d/%d", g.Kind, g.I, g.J, g.BytesRead, g.BytesWritten, m.BytesRead, m.BytesWritten)
	}
	if g.Kind != instrument.KindInputs && (g.SM >= h.NumSMs || g.TEnd < g.TStart || g.TStart == 0) {
		return fmt.Errorf("%s: SM %d of %d, time %d..%d", g.Kind, g.SM, h.NumSMs, g.TStart, g.TEnd)
	}
	spec, _ := instrument.Spec(g.Kind)
	gv, mv := recordArrays(g), recordArrays(m)
	for _, a := range spec.Arrays {
		ga, ma, ba := gv[a.Name], mv[a.Name], bnd[a.Name]
		cols := 1
		if len(a.Shape) == 2 {
			cols = h.ArrayLen(&instrument.ArraySpec{Shape: a.Shape[1:]})
		}
		for k := range ma {
			r, c := k/cols, k%cols
			if a.Shape[0] == instrument.DimBr && r >= g.RowsValid {
				continue // a padding row
			}
			if len(a.Shape) == 2 && a.Shape[1] == instrument.DimBc && c >= g.ColsValid {
				continue // a padding column
			}
			if a.Shape[0] == instrument.DimBc && r >= g.ColsValid {
				continue // a padding row of a kv-tile's dK or dV
			}
			x, y := float64(ga[k]), float64(ma[k])
			if math.IsNaN(x) {
				return fmt.Errorf("%s (%d, %d) %s[%d]: NaN on the GPU", g.Kind, g.I, g.J, a.Name, k)
			}
			if x == y {
				continue
			}
			diff := math.Abs(x - y)
			if math.IsInf(x, 0) || math.IsInf(y, 0) || diff > ba[k]*1.001+1e-40 {
				return fmt.Errorf("%s (bh %d, %d, %d) %s[%d]: GPU %v, mirror %v: difference %.3g, bound %.3g",
					g.Kind, g.BH, g.I, g.J, a.Name, k, x, y, diff, ba[k])
			}
			// The ratio the test holds, net of its 1e-40 floor for the
			// subnormal range, where a bound near zero means little.
			worst[a.Name] = math.Max(worst[a.Name], math.Max(0, diff-1e-40)/ba[k])
		}
	}
	return nil
}

func recordArrays(r *instrument.Record) map[string][]float32 {
	return map[string][]float32{"q": r.Q, "k": r.K, "v": r.V, "m_old": r.MOld, "m_new": r.MNew, "m": r.MNew,
		"alpha": r.Alpha, "w": r.Alpha, "l": r.L, "s": r.S, "p": r.P, "o": r.O, "lse": r.LSE,
		"do": r.DO, "delta": r.Delta, "dp": r.DP, "ds": r.DS, "dv": r.DV, "dk": r.DK, "dq": r.DQ}
}
