package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	. "flashstep/kernels"
)

const u32 = 1.0 / (1 << 24) // unit roundoff of float32

// flash1Config draws a flash1 run weighted toward toy and ragged sizes: N
// rarely a multiple of the tiles, Br ≠ Bc, causal or not, any pattern, and
// sometimes a partial trace selection (RandomConfig).
func flash1Config(rng *rand.Rand) Config {
	c := RandomConfig(rng)
	c.Variant = instrument.VariantFlash1
	return c
}

// visits says whether q-tile i of c sees kv-tile j, from the definition: some
// valid (row, column) of the tile pair is unmasked.
func visits(c *Config, i, j int) bool {
	if !c.Causal {
		return true
	}
	for r := i * c.Br; r < min(c.N, (i+1)*c.Br); r++ {
		if j*c.Bc <= r {
			return true
		}
	}
	return false
}

// flash1Runs is a flash1 test's runs (RunsOf): the edge configurations,
// then testrand.Runs(full, least) of flash1Config's draws.
func flash1Runs(rng *rand.Rand, full, least int) []Config {
	return RunsOf(rng, []instrument.Variant{instrument.VariantFlash1}, full, least, flash1Config)
}

// lastKVTile is the last kv-tile q-tile i sees.
func lastKVTile(c *Config, i int) int {
	j := c.Tc() - 1
	for !visits(c, i, j) {
		j--
	}
	return j
}

// TestFlash1RecordsLeaveInKVTileOrder: the trace is the kernel's loop order,
// kv-tile-major. Every traced q-tile's step j (batch-head by batch-head,
// q-tile by q-tile) comes before any step j+1, and a q-tile's epilogue
// follows its step at its last kv-tile, at once.
func TestFlash1RecordsLeaveInKVTileOrder(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	type ref struct {
		kind     instrument.Kind
		bh, i, j int
	}
	for _, c := range flash1Runs(rng, 150, 15) {
		recs := mirrorTrace(t, c)
		var want []ref
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			want = append(want, ref{instrument.KindInputs, bh, -1, -1})
		}
		for j := range c.Tc() {
			for bh := bhs.Lo; bh < bhs.Hi; bh++ {
				for i := qs.Lo; i < qs.Hi; i++ {
					if visits(&c, i, j) {
						want = append(want, ref{instrument.KindFlashStep, bh, i, j})
					}
					if j == lastKVTile(&c, i) {
						want = append(want, ref{instrument.KindEpilogue, bh, i, -1})
					}
				}
			}
		}
		var got []ref
		for _, r := range recs {
			got = append(got, ref{r.Kind, r.BH, r.I, r.J})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%+v: records leave as\n%v\nwant\n%v", c, got, want)
		}
		// The schedule the GPU worker lays the trace out by says the same.
		sched := Schedule(&c)
		if len(sched) != len(recs)-bhs.Len() {
			t.Fatalf("%+v: Schedule lists %d steps, the mirror emits %d", c, len(sched), len(recs)-bhs.Len())
		}
		for k, s := range sched {
			r := recs[bhs.Len()+k]
			if s.Kind != r.Kind || s.BH != r.BH || s.I != r.I || s.J != r.J || s.RowsValid != r.RowsValid || s.ColsValid != r.ColsValid {
				t.Fatalf("%+v: step %d: Schedule %+v, mirror %s (bh %d, %d, %d)", c, k, s, r.Kind, r.BH, r.I, r.J)
			}
		}
	}
}

// TestFlash1StepsNormalised checks every step against the update it claims:
// m_old is the previous step's m_new, l = α·l_old + Σ P, and the O stored is
// normalised, O·l_new = α·l_old·O_old + P·V_j within float32 rounding (O_old
// the previous step's O); a row that has seen only masked scores stores 0.
// The epilogue's O is the last step's, bit for bit.
func TestFlash1StepsNormalised(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range flash1Runs(rng, 150, 15) {
		recs := mirrorTrace(t, c)
		br, bc, d := c.Br, c.Bc, c.D
		inputs := map[int][]float32{}
		prev := map[[2]int]*instrument.Record{}
		for _, r := range recs {
			key := [2]int{r.BH, r.I}
			switch r.Kind {
			case instrument.KindInputs:
				inputs[r.BH] = r.V
			case instrument.KindFlashStep:
				p := prev[key]
				if (p == nil) != (r.J == 0) || p != nil && p.J != r.J-1 {
					t.Fatalf("%+v bh %d q-tile %d: step %d follows %v", c, r.BH, r.I, r.J, p)
				}
				v := inputs[r.BH]
				for row := range r.RowsValid {
					ctx := fmt.Sprintf("%+v bh %d step (%d, %d) row %d", c, r.BH, r.I, r.J, row)
					mOld, lOld := float32(math.Inf(-1)), 0.0
					oOld := make([]float32, d)
					if p != nil {
						mOld, lOld, oOld = p.MNew[row], float64(p.L[row]), p.O[row*d:(row+1)*d]
					}
					if r.MOld[row] != mOld {
						t.Fatalf("%s: m_old %v, the previous step's m_new %v", ctx, r.MOld[row], mOld)
					}
					alpha, lNew := float64(r.Alpha[row]), float64(r.L[row])
					lScaled := alpha * lOld
					var rowSum float64
					for col := range bc {
						rowSum += float64(r.P[row*bc+col])
					}
					if diff := math.Abs(lNew - (lScaled + rowSum)); !(diff <= float64(bc+3)*u32*lNew) {
						t.Fatalf("%s: l %v, α·l_old + Σ P = %v", ctx, lNew, lScaled+rowSum)
					}
					for x := range d {
						o := float64(r.O[row*d+x])
						if lNew == 0 {
							if o != 0 {
								t.Fatalf("%s: O[%d] = %v with l = 0", ctx, x, o)
							}
							continue
						}
						want := lScaled * float64(oOld[x])
						scaleAbs := math.Abs(want)
						for col := range r.ColsValid {
							pv := float64(r.P[row*bc+col]) * float64(v[(r.J*bc+col)*d+x])
							want += pv
							scaleAbs += math.Abs(pv)
						}
						// Each of the bc + 2 products and sums rounds once, to
						// at most u of a value within scaleAbs; the division
						// once more, u of |O|.
						bound := float64(bc+4)*u32*scaleAbs + 2*u32*math.Abs(o)*lNew + 1e-38
						if diff := math.Abs(o*lNew - want); !(diff <= bound) {
							t.Fatalf("%s: O[%d]·l_new = %v, α·l_old·O_old + P·V = %v: off by %.3g, bound %.3g", ctx, x, o*lNew, want, diff, bound)
						}
					}
				}
				prev[key] = r
			case instrument.KindEpilogue:
				p := prev[key]
				if p == nil || p.J != lastKVTile(&c, r.I) {
					t.Fatalf("%+v: epilogue of (%d, %d) after step %v", c, r.BH, r.I, p)
				}
				for k := range br * d {
					if math.Float32bits(r.O[k]) != math.Float32bits(p.O[k]) {
						t.Fatalf("%+v bh %d q-tile %d: epilogue O[%d] = %v, the last step's %v", c, r.BH, r.I, k, r.O[k], p.O[k])
					}
				}
			}
		}
	}
}

// TestFlash1SoftmaxIsFlash2s: the loop order changes where O lives, not the
// online softmax. Step for step, the valid rows' S, P, m, α and l are
// flash2's bit for bit, and so is the LSE; only O (normalised at every step
// here, once at the end there) differs. (Padding rows differ: flash2 carries
// their state on chip, flash1 has nowhere to keep it and starts them afresh
// at every step.)
func TestFlash1SoftmaxIsFlash2s(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	type key struct{ kind, bh, i, j int }
	for _, c := range flash1Runs(rng, 100, 10) {
		f2 := c
		f2.Variant = instrument.VariantFlash2
		theirs := map[key]*instrument.Record{}
		for _, r := range mirrorTrace(t, f2) {
			theirs[key{int(r.Kind), r.BH, r.I, r.J}] = r
		}
		for _, r := range mirrorTrace(t, c) {
			f := theirs[key{int(r.Kind), r.BH, r.I, r.J}]
			if f == nil {
				t.Fatalf("%+v: flash2 has no %s (bh %d, %d, %d)", c, r.Kind, r.BH, r.I, r.J)
			}
			rows := r.RowsValid
			for name, pair := range map[string][2][]float32{"s": {r.S, f.S}, "p": {r.P, f.P}, "m_old": {r.MOld, f.MOld},
				"m_new": {r.MNew, f.MNew}, "alpha": {r.Alpha, f.Alpha}, "l": {r.L, f.L}, "lse": {r.LSE, f.LSE}} {
				if n := len(pair[0]) / c.Br * rows; fmt.Sprint(pair[0][:n]) != fmt.Sprint(pair[1][:n]) {
					t.Fatalf("%+v %s (bh %d, %d, %d): %s is %v, flash2's %v", c, r.Kind, r.BH, r.I, r.J, name, pair[0], pair[1])
				}
			}
		}
	}
}

// flash1OutputBound is, per element of O and per row's LSE, how far
// flash1's float32 output may lie from the exact one, to first order
// (FirstOrderBounds, which holds the scores' part): the float32 exp (|x|·u
// from its rounded argument, at most 88u for a term that matters, and one
// u), the sums over n columns, and at every one of the Tc steps the rescale
// α·l_old, its product with O_old and the division by l_new add
// (n + 2·88 + 4·Tc + 6)·u relative to Σ p_c|v_c|; l is within
// (n + 2·88 + 2·Tc + 4)·u relative.
func flash1OutputBound(in *Inputs, n, d, tc int, causal bool) (bound, lse []float64) {
	return FirstOrderBounds(in, n, d, causal, n+2*88+4*tc+6, n+2*88+2*tc+4)
}

// TestFlash1MatchesReference holds every element of every traced epilogue's
// O, and its LSE, to the float64 reference over random ragged and causal
// runs. The output starts as NaN, so an element no epilogue writes fails.
func TestFlash1MatchesReference(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	worst, worstLSE := 0.0, 0.0
	for _, c := range flash1Runs(rng, 200, 20) {
		recs := mirrorTrace(t, c)
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			in := InputsFor(&c, bh)
			ref, refLSE := Reference(in, c.N, c.D, c.Causal)
			bound, lseBound := flash1OutputBound(in, c.N, c.D, c.Tc(), c.Causal)
			o, lse := EpilogueOutputs(&c, recs, bh)
			for g := qs.Lo * c.Br; g < min(c.N, qs.Hi*c.Br); g++ {
				for x := range c.D {
					k := g*c.D + x
					diff := math.Abs(float64(o[k]) - ref[k])
					if !(diff <= bound[k]) { // NaN fails too
						t.Fatalf("%+v bh %d row %d col %d: O %v, reference %v, bound %.3g", c, bh, g, x, o[k], ref[k], bound[k])
					}
					worst = math.Max(worst, diff/bound[k])
				}
				diff := math.Abs(float64(lse[g]) - refLSE[g])
				if !(diff <= lseBound[g]) {
					t.Fatalf("%+v bh %d row %d: LSE %v, reference %v, bound %.3g", c, bh, g, lse[g], refLSE[g], lseBound[g])
				}
				worstLSE = math.Max(worstLSE, diff/lseBound[g])
			}
		}
	}
	t.Logf("worst error/bound: O %.3f, LSE %.3f", worst, worstLSE)
}

// TestFlash1Traffic adds up the bytes the records carry and checks them
// against totals worked out from the loop order: every visit of a q-tile to
// a kv-tile reads Q_i and writes O_i, m_i and l_i, every visit but the first
// reads O_i, m_i and l_i back, each kv-tile's K and V is read once per
// batch-head, and the LSE is written once. Without a mask that is Tc writes
// of O where flash2 makes one.
func TestFlash1Traffic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for n, c := range flash1Runs(rng, 80, 16) {
		c.TraceBH, c.TraceQ, c.Batch, c.Heads = instrument.Range{}, instrument.Range{}, 1, 1
		c.Causal = n%2 == 0
		recs := mirrorTrace(t, c)
		var read, written, oWritten uint64
		for _, r := range recs {
			read += r.BytesRead
			written += r.BytesWritten
			if r.Kind == instrument.KindFlashStep {
				oWritten += r.BytesWritten - 2*uint64(r.RowsValid)*4 // less m and l
			}
		}
		d := uint64(c.D)
		var wantO, wantR, wantW uint64
		for i := range c.Tr() {
			rows, n := uint64(c.RowsValidOf(i)), uint64(lastKVTile(&c, i)+1)
			wantO += n * rows * d * 4
			wantR += n*rows*d*4 + (n-1)*(rows*d*4+2*rows*4)
			wantW += n*(rows*d*4+2*rows*4) + rows*4
		}
		for j := range c.Tc() {
			wantR += 2 * uint64(c.ColsValidOf(j)) * d * 4
		}
		if oWritten != wantO || read != wantR || written != wantW {
			t.Fatalf("%+v: O written %d, read %d, written %d; want %d, %d and %d", c, oWritten, read, written, wantO, wantR, wantW)
		}
		if c.Causal {
			continue
		}
		// flash2 writes O once, with the LSE, at its epilogues.
		f2 := c
		f2.Variant = instrument.VariantFlash2
		var f2O uint64
		for _, r := range mirrorTrace(t, f2) {
			if r.Kind == instrument.KindEpilogue {
				f2O += r.BytesWritten - uint64(r.RowsValid)*4
			}
		}
		if oWritten != uint64(c.Tc())*f2O {
			t.Fatalf("%+v: flash1 writes %d bytes of O, flash2 %d: want Tc = %d times as many", c, oWritten, f2O, c.Tc())
		}
	}
}

// flash1Sim is flash1.cu written out again, in the kernel's own loop order
// (kv-tiles outer, q-tiles inner, O, m and l in a device-memory array),
// with the arithmetic a GPU may do differently as parameters: exp, and the
// weight of O_old in the update (α·l_old). With the mirror's exp it must
// reproduce the mirror's trace bit for bit; with expf's 2 ulp it stands in
// for the GPU to try the bound the GPU's trace is held to.
type flash1Sim struct {
	exp    func(float32) float32
	weight func(alpha, lOld float32) float32
}

func rightWeight(alpha, lOld float32) float32 { return alpha * lOld }

func (s flash1Sim) run(c Config) []*instrument.Record {
	br, bc, d, n, tr, tc := c.Br, c.Bc, c.D, c.N, c.Tr(), c.Tc()
	scale := c.Scale()
	negInf := float32(math.Inf(-1))
	bhs, qs := c.TracedBH(), c.TracedQ()
	var recs []*instrument.Record
	phases := make([][]*instrument.Record, tc)
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		in := InputsFor(&c, bh)
		recs = append(recs, &instrument.Record{Kind: instrument.KindInputs, BH: bh, I: -1, J: -1, Q: in.Q, K: in.K, V: in.V})
		o := make([]float32, n*d) // device memory: O, m and l
		m := make([]float32, n)
		l := make([]float32, n)
		for j := range tc {
			c0 := j * bc
			cols := min(bc, n-c0)
			iFirst := 0
			if c.Causal {
				iFirst = c0 / br
			}
			for i := iFirst; i < tr; i++ {
				r0 := i * br
				rows := min(br, n-r0)
				jEnd := tc
				if c.Causal {
					jEnd = min(tc, (r0+rows-1)/bc+1)
				}
				step := &instrument.Record{Kind: instrument.KindFlashStep, BH: bh, I: i, J: j, RowsValid: rows, ColsValid: cols,
					MOld: make([]float32, br), MNew: make([]float32, br), Alpha: make([]float32, br), L: make([]float32, br),
					S: make([]float32, br*bc), P: make([]float32, br*bc), O: make([]float32, br*d)}
				for r := range br {
					row := r0 + r
					mOld, lOld, oOld := negInf, float32(0), make([]float32, d)
					if j > 0 && r < rows {
						mOld, lOld = m[row], l[row]
						copy(oOld, o[row*d:(row+1)*d])
					}
					sr, pr := step.S[r*bc:(r+1)*bc], step.P[r*bc:(r+1)*bc]
					rowMax := negInf
					for col := range bc {
						sr[col] = negInf
						if col < cols && !(c.Causal && c0+col > row) {
							var acc float32
							for x := range d {
								var q float32
								if r < rows {
									q = in.Q[row*d+x]
								}
								acc = float32(acc + float32(q*in.K[(c0+col)*d+x]))
							}
							sr[col] = float32(acc * scale)
						}
						rowMax = max(rowMax, sr[col])
					}
					mNew := max(mOld, rowMax)
					base := mNew
					if base == negInf {
						base = 0
					}
					alpha := s.exp(mOld - base)
					var rowSum float32
					for col := range bc {
						pr[col] = s.exp(sr[col] - base)
						rowSum = float32(rowSum + pr[col])
					}
					lNew := float32(float32(alpha*lOld) + rowSum)
					w := s.weight(alpha, lOld)
					for x := range d {
						acc := float32(w * oOld[x])
						for col := range bc {
							var v float32
							if col < cols {
								v = in.V[(c0+col)*d+x]
							}
							acc = float32(acc + float32(pr[col]*v))
						}
						if lNew != 0 {
							step.O[r*d+x] = float32(acc / lNew)
						}
					}
					step.MOld[r], step.MNew[r], step.Alpha[r], step.L[r] = mOld, mNew, alpha, lNew
					if r < rows {
						m[row], l[row] = mNew, lNew
						copy(o[row*d:(row+1)*d], step.O[r*d:(r+1)*d])
					}
				}
				rd := uint64(rows * d * 4)
				if j > 0 {
					rd += uint64(rows*d*4 + 2*rows*4)
				}
				if i == iFirst {
					rd += uint64(2 * cols * d * 4)
				}
				step.BytesRead, step.BytesWritten = rd, uint64(rows*d*4+2*rows*4)
				traced := qs.Lo <= i && i < qs.Hi
				if traced {
					phases[j] = append(phases[j], step)
				}
				if j == jEnd-1 && traced {
					epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: bh, I: i, J: -1, RowsValid: rows,
						O: append([]float32(nil), step.O...), LSE: make([]float32, br), BytesWritten: uint64(rows * 4)}
					for r := range br {
						epi.LSE[r] = negInf
						if step.L[r] != 0 {
							epi.LSE[r] = float32(step.MNew[r] + float32(math.Log(float64(step.L[r]))))
						}
					}
					phases[j] = append(phases[j], epi)
				}
			}
		}
	}
	// The trace lays kv-tile j's records of every batch-head out together.
	for _, p := range phases {
		recs = append(recs, p...)
	}
	return recs
}

// TestFlash1SimIsTheMirror: the mirror walks one q-tile at a time, the
// kernel one kv-tile at a time; written again in the kernel's order, with
// the mirror's exp, the trace must come out the same, bit for bit.
func TestFlash1SimIsTheMirror(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	sim := flash1Sim{exp: exactExp, weight: rightWeight}
	for _, c := range flash1Runs(rng, 100, 10) {
		mirror := mirrorTrace(t, c)
		got := sim.run(c)
		if len(got) != len(mirror) {
			t.Fatalf("%+v: %d simulated records, %d from the mirror", c, len(got), len(mirror))
		}
		for k := range mirror {
			if !instrument.SameBits(got[k], mirror[k]) {
				t.Fatalf("%+v record %d:\nsimulated %v\nmirror    %v", c, k, *got[k], *mirror[k])
			}
		}
	}
}

// boundConfig draws a run for the bound tests: one the GPU runs, or one of
// the mirror's other shapes.
func boundConfig(rng *rand.Rand, n int) Config {
	var c Config
	if n%2 == 0 {
		c = flash1Config(rng)
	} else {
		c = gpuConfig(rng, instrument.VariantFlash1)
	}
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	return c
}

// TestFlash1BoundHoldsForOtherArithmetic runs the mirror and a simulated GPU
// whose exp is up to 2 ulp off the correctly rounded one (CUDA's expf is
// within 2 ulp) on the same fresh random runs, and holds every element of
// the simulated trace to kernelstest's bound, as the GPU suite will hold the
// GPU's; the worst ratio says how much room the bound leaves.
func TestFlash1BoundHoldsForOtherArithmetic(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	runs := boundEdges(rng, instrument.VariantFlash1)
	for n := range testrand.Runs(80, 8) {
		runs = append(runs, boundConfig(rng, n))
	}
	boundHolds(t, rng, runs, func(c Config, g *simulatedGPU) []*instrument.Record {
		return flash1Sim{exp: g.expf, weight: rightWeight}.run(c)
	})
}

// TestFlash1BoundCatchesAWrongRescale: the bound is not vacuous. A kernel
// that forgets to rescale the old sum (weighting O_old by l_old, not
// α·l_old) writes an O that the bound rejects, in every run where a later
// kv-tile raises some row's max.
func TestFlash1BoundCatchesAWrongRescale(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	wrong := flash1Sim{exp: exactExp, weight: func(_, lOld float32) float32 { return lOld }}
	tried := 0
	for n := 0; tried < testrand.Runs(40, 8); n++ {
		c := boundConfig(rng, n)
		mirror := mirrorTrace(t, c)
		// Does a later kv-tile raise the max of a row that has a sum (l_old
		// ≥ 1), by enough to matter?
		raised := false
		for _, r := range mirror {
			if r.Kind != instrument.KindFlashStep {
				continue
			}
			for row := range r.RowsValid {
				raised = raised || r.MOld[row] != float32(math.Inf(-1)) && r.Alpha[row] < 0.99
			}
		}
		if !raised {
			continue
		}
		tried++
		_, err := compareToBound(t, c, wrong.run(c), mirror, map[string]float64{})
		if err == nil {
			t.Fatalf("%+v: O without the rescale α passes the bound", c)
		}
	}
}
