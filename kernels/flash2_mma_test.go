package kernels_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

// flash2_mma (rung 5): its mirror against the float64 reference, its online
// softmax step by step, the trace's shape, every number recomputed from the
// inputs alone, and the GPU comparison's bound against other admissible
// arithmetic and against wrong arithmetic.

const mmaU = 1.0 / (1 << 24) // unit roundoff of float32

// mmaExpf and mmaLogf are the mirror's expf and logf (kernels/float32.go):
// float64 rounded once.
func mmaExpf(x float32) float32 { return float32(math.Exp(float64(x))) }
func mmaLogf(x float32) float32 { return float32(math.Log(float64(x))) }

// mmaRandomConfig draws a flash2_mma run: toy, small and ragged (d mostly
// not a multiple of 16, Bc not of 8), and the compiled tiles (64×64, d = 64
// or 128) with a ragged N.
func mmaRandomConfig(rng *rand.Rand, n int) Config {
	c := Config{
		Variant: instrument.VariantFlash2MMA,
		Batch:   1 + rng.IntN(2),
		Heads:   1 + rng.IntN(3),
		Causal:  rng.IntN(2) == 0,
		Pattern: instrument.Patterns[n%len(instrument.Patterns)],
		Seed:    rng.Uint64(),
	}
	switch rng.IntN(4) {
	case 0: // toy, every number legible
		c.N, c.D, c.Br, c.Bc = 4+rng.IntN(13), 2+rng.IntN(7), 1+rng.IntN(4), 1+rng.IntN(4)
	case 1: // small and ragged
		c.N, c.D = 1+rng.IntN(100), 1+rng.IntN(48)
		c.Br, c.Bc = 1+rng.IntN(min(c.N, 24)), 1+rng.IntN(min(c.N, 24))
	default: // the compiled tiles, N ragged
		c.Br, c.Bc, c.D = 64, 64, []int{64, 128}[rng.IntN(2)]
		c.N = 64 + rng.IntN(200)
		c.Batch, c.Heads = 1, 1
	}
	if rng.IntN(4) == 0 {
		bh := c.Batch * c.Heads
		lo := rng.IntN(bh)
		c.TraceBH = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(bh-lo)}
		lo = rng.IntN(c.Tr())
		c.TraceQ = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(c.Tr()-lo)}
	}
	return c
}

// mmaTrace runs the mirror, encodes what it emits and decodes it again, so
// that every check looks at the trace as a consumer sees it; the size must
// be TraceBytes' (plus the label).
func mmaTrace(t *testing.T, c Config) (*instrument.Header, []*instrument.Record) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	h := c.Header(instrument.SourceCPUMirror, MirrorLabel)
	buf, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	err = RunMirror(context.Background(), c, func(r *instrument.Record) error {
		buf, err = instrument.AppendRecord(buf, &h, r)
		return err
	})
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	empty := c.Header(instrument.SourceCPUMirror, "")
	if got, want := int64(len(buf)), c.TraceBytes()+int64(h.HeaderBytes()-empty.HeaderBytes()); got != want {
		t.Fatalf("%+v: trace is %d bytes, TraceBytes predicted %d", c, got, want)
	}
	dh, recs, err := instrument.ReadAll(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("%+v: decode: %v", c, err)
	}
	for _, r := range recs {
		for name, a := range map[string][]float32{"m_old": r.MOld, "m_new": r.MNew, "alpha": r.Alpha, "l": r.L, "s": r.S, "p": r.P, "o": r.O, "lse": r.LSE} {
			for x, v := range a {
				if v != v {
					t.Fatalf("%+v: NaN in %s[%d] of %s record (bh %d, i %d, j %d)", c, name, x, r.Kind, r.BH, r.I, r.J)
				}
			}
		}
	}
	return dh, recs
}

// mmaMasked says whether (row, col) of tile (i, j) is mmaMasked: past N or, under
// a causal mask, above the diagonal.
func mmaMasked(c *Config, i, j, row, col int) bool {
	gc := j*c.Bc + col
	return gc >= c.N || (c.Causal && gc > i*c.Br+row)
}

// mmaVisited says whether flash2_mma visits kv-tile j of q-tile i: some valid
// row of the q-tile has an unmasked column in it.
func mmaVisited(c *Config, i, j int) bool {
	if j*c.Bc >= c.N {
		return false
	}
	lastRow := min(c.N, (i+1)*c.Br) - 1
	return !c.Causal || j*c.Bc <= lastRow
}

// TestFlash2MMAMatchesReference holds the mirror's output to the float64
// reference computed from the same bf16 inputs: max |O − O_ref| over
// max |O_ref| under 1e-2 per batch-head, LSE within 1e-4 (it never sees
// bf16(P)), over fresh random runs. Outputs start as NaN, so an element the
// trace never writes fails, and a NaN never passes.
func TestFlash2MMAMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	worst := map[instrument.Pattern]float64{}
	var withTail, causal, compiled, multi int
	for n := range 240 {
		c := mmaRandomConfig(rng, n)
		if c.D%16 != 0 {
			withTail++
		}
		if c.Causal {
			causal++
		}
		if c.Br == 64 && c.Bc == 64 && c.D%64 == 0 {
			compiled++
		}
		if c.TracedBH().Len() > 1 {
			multi++
		}
		h, recs := mmaTrace(t, c)
		if h.DType != instrument.DTypeBF16 || h.Variant != instrument.VariantFlash2MMA || h.Records != len(recs) {
			t.Fatalf("%+v: header %s %s, %d records for %d", c, h.Variant, h.DType, h.Records, len(recs))
		}
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			in := InputsFor(&c, bh)
			ref, refLSE := Reference(in, c.N, c.D, c.Causal)
			rows := instrument.Range{Lo: qs.Lo * c.Br, Hi: min(c.N, qs.Hi*c.Br)}
			o := make([]float32, c.N*c.D)
			lse := make([]float32, c.N)
			for x := range o {
				o[x] = float32(math.NaN())
			}
			for x := range lse {
				lse[x] = float32(math.NaN())
			}
			for _, r := range recs {
				if r.BH != bh {
					continue
				}
				switch r.Kind {
				case instrument.KindInputs:
					for name, pair := range map[string][2][]float32{"q": {r.Q, in.Q}, "k": {r.K, in.K}, "v": {r.V, in.V}} {
						for x := range pair[1] {
							if pair[0][x] != pair[1][x] || RoundBF16(pair[0][x]) != pair[0][x] {
								t.Fatalf("%+v bh %d: inputs record %s[%d] = %v, InputsFor %v", c, bh, name, x, pair[0][x], pair[1][x])
							}
						}
					}
				case instrument.KindEpilogue:
					for row := range r.RowsValid {
						g := r.I*c.Br + row
						copy(o[g*c.D:(g+1)*c.D], r.O[row*c.D:(row+1)*c.D])
						lse[g] = r.LSE[row]
					}
				}
			}
			var maxDiff, maxRef float64
			for x := rows.Lo * c.D; x < rows.Hi*c.D; x++ {
				d := math.Abs(float64(o[x]) - ref[x])
				if !(d <= math.MaxFloat64) { // NaN, or Inf
					t.Fatalf("%+v bh %d: O[%d] = %v, reference %v", c, bh, x, o[x], ref[x])
				}
				maxDiff = math.Max(maxDiff, d)
				maxRef = math.Max(maxRef, math.Abs(ref[x]))
			}
			rel := maxDiff / math.Max(maxRef, 1e-30)
			if !(rel < 1e-2) {
				t.Fatalf("%+v bh %d: max|O − ref|/max|ref| = %.3g", c, bh, rel)
			}
			worst[c.Pattern] = math.Max(worst[c.Pattern], rel)
			for g := rows.Lo; g < rows.Hi; g++ {
				if d := math.Abs(float64(lse[g]) - refLSE[g]); !(d <= 1e-4*math.Max(1, math.Abs(refLSE[g]))) {
					t.Fatalf("%+v bh %d row %d: LSE %v, reference %v", c, bh, g, lse[g], refLSE[g])
				}
			}
		}
	}
	if withTail == 0 || causal == 0 || compiled == 0 || multi == 0 || len(worst) != len(instrument.Patterns) {
		t.Fatalf("the draw missed a case: %d with d%%16 ≠ 0, %d causal, %d at compiled tiles, %d with several heads, patterns %v",
			withTail, causal, compiled, multi, worst)
	}
	for p, w := range worst {
		t.Logf("pattern %-6s worst max-norm relative error %.3g (bound 1e-2)", p, w)
	}
}

// TestFlash2MMAOnlineSoftmaxInvariants checks every step of every trace.
// The trace is in the kernel's own units, so most of it is exact: m_old is
// the last m_new, m_new is max(m_old, max S) bit for bit, S is −Inf exactly
// where mmaMasked, α = expf(m_old − mb) and P = expf(S − mb) (mb = m_new, or 0
// while all is mmaMasked) bit for bit, and the epilogue is O·(1/l) and
// m + log l bit for bit from the last step. l, a sum in the kernel's order,
// is held to Σ exp(S − m_new) over every column seen, within its roundings.
func TestFlash2MMAOnlineSoftmaxInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || (a == 0 && b == 0) }
	for n := range 200 {
		c := mmaRandomConfig(rng, n)
		_, recs := mmaTrace(t, c)
		atoms := float64((c.Bc + 7) / 8)
		var mPrev, lPrev, mAbs []float64
		var seen [][]float64
		var last *instrument.Record
		for _, r := range recs {
			switch r.Kind {
			case instrument.KindFlashStep:
				if r.J == 0 {
					mPrev, lPrev, mAbs = make([]float64, c.Br), make([]float64, c.Br), make([]float64, c.Br)
					for k := range mPrev {
						mPrev[k] = math.Inf(-1)
					}
					seen = make([][]float64, c.Br)
				}
				for row := range r.RowsValid {
					ctx := fmt.Sprintf("%+v bh %d tile (%d,%d) row %d", c, r.BH, r.I, r.J, row)
					mOld, mNew := r.MOld[row], r.MNew[row]
					if float64(mOld) != mPrev[row] {
						t.Fatalf("%s: m_old %v, previous m_new %v", ctx, mOld, mPrev[row])
					}
					want := mOld
					for col := range c.Bc {
						s := r.S[row*c.Bc+col]
						if mmaMasked(&c, r.I, r.J, row, col) != math.IsInf(float64(s), -1) {
							t.Fatalf("%s col %d: S = %v, mmaMasked %v", ctx, col, s, mmaMasked(&c, r.I, r.J, row, col))
						}
						want = max(want, s)
					}
					if mNew != want {
						t.Fatalf("%s: m_new %v, max(m_old, max S) = %v", ctx, mNew, want)
					}
					var mb float32
					if !math.IsInf(float64(mNew), -1) {
						mb = mNew
					}
					alpha := r.Alpha[row]
					if a := mmaExpf(float32(mOld - mb)); !same(alpha, a) || alpha > 1 || alpha < 0 {
						t.Fatalf("%s: α = %v, expf(m_old − mb) = %v", ctx, alpha, a)
					}
					for col := range c.Bc {
						s, p := r.S[row*c.Bc+col], r.P[row*c.Bc+col]
						if e := mmaExpf(float32(s - mb)); !same(p, e) || p > 1 {
							t.Fatalf("%s col %d: P = %v, expf(S − mb) = %v", ctx, col, p, e)
						}
						if !math.IsInf(float64(s), -1) {
							seen[row] = append(seen[row], float64(s))
						}
					}
					mAbs[row] = math.Max(mAbs[row], math.Abs(float64(mNew)))
					l := float64(r.L[row])
					if !(l >= float64(alpha)*lPrev[row]*(1-8*mmaU)) {
						t.Fatalf("%s: l = %v < α·l_old = %v", ctx, l, float64(alpha)*lPrev[row])
					}
					// Each term exp(S − m) carries the rounding of S − m and
					// of expf; each step adds 2⌈Bc/8⌉+1 roundings per thread
					// and 2 for the quad, and α's own error, which every
					// older term then carries.
					var wantL, termErr float64
					for _, s := range seen[row] {
						e := math.Exp(s - float64(mNew))
						wantL += e
						termErr += e * (math.Expm1(2*mmaU*math.Abs(s-float64(mNew))) + mmaU)
					}
					steps := float64(r.J + 1)
					alphaErr := 4 * mmaU * (2*mAbs[row] + 1)
					bound := termErr + steps*((2*atoms+4)*2*mmaU+alphaErr)*wantL + 1e-44
					if d := math.Abs(l - wantL); !(d <= bound) {
						t.Fatalf("%s: l = %v, Σ exp(S − m_new) = %v (bound %.3g)", ctx, l, wantL, bound)
					}
					mPrev[row], lPrev[row] = float64(mNew), l
				}
				last = r
			case instrument.KindEpilogue:
				if last == nil || last.I != r.I || last.BH != r.BH {
					t.Fatalf("%+v: epilogue of (%d, %d) without its steps", c, r.BH, r.I)
				}
				for row := range r.RowsValid {
					l, m := last.L[row], last.MNew[row]
					var inv float32
					lse := float32(math.Inf(-1))
					if l != 0 {
						inv, lse = float32(1/l), float32(m+mmaLogf(l))
					}
					for x := range c.D {
						if want := float32(last.O[row*c.D+x] * inv); !same(r.O[row*c.D+x], want) {
							t.Fatalf("%+v bh %d q-tile %d row %d: epilogue O %v, O·(1/l) %v", c, r.BH, r.I, row, r.O[row*c.D+x], want)
						}
					}
					if !same(r.LSE[row], lse) {
						t.Fatalf("%+v bh %d q-tile %d row %d: LSE %v, m + log l = %v", c, r.BH, r.I, row, r.LSE[row], lse)
					}
				}
			}
		}
	}
}

// TestFlash2MMATraceStructure checks the records against the header and
// the definition: the inputs of every traced batch-head, then per q-tile
// one step per kv-tile holding an unmasked score, in order, and an
// epilogue; sizes and bytes as the kernel's header comment says (bf16: 2
// bytes), the same as flash2_fast's.
func TestFlash2MMATraceStructure(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for n := range 200 {
		c := mmaRandomConfig(rng, n)
		h, recs := mmaTrace(t, c)
		if h.Records != len(recs) || h.DType != instrument.DTypeBF16 || h.Variant != instrument.VariantFlash2MMA {
			t.Fatalf("%+v: header %+v for %d records", c, h, len(recs))
		}
		bhs, qs := c.TracedBH(), c.TracedQ()
		k := 0
		next := func() *instrument.Record {
			if k >= len(recs) {
				t.Fatalf("%+v: the trace ends after %d records", c, k)
			}
			k++
			return recs[k-1]
		}
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			if r := next(); r.Kind != instrument.KindInputs || r.BH != bh || len(r.Q) != c.N*c.D {
				t.Fatalf("%+v: record %d is %s of bh %d, want the inputs of %d", c, k-1, r.Kind, r.BH, bh)
			}
		}
		d := uint64(c.D)
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			for i := qs.Lo; i < qs.Hi; i++ {
				rows := min(c.Br, c.N-i*c.Br)
				for j := range c.Tc() {
					if !mmaVisited(&c, i, j) {
						continue
					}
					r := next()
					cols := min(c.Bc, c.N-j*c.Bc)
					wantRead := 2 * uint64(cols) * d * 2
					if j == 0 {
						wantRead += uint64(rows) * d * 2
					}
					if r.Kind != instrument.KindFlashStep || r.BH != bh || r.I != i || r.J != j || r.RowsValid != rows || r.ColsValid != cols ||
						len(r.S) != c.Br*c.Bc || len(r.P) != c.Br*c.Bc || len(r.O) != c.Br*c.D || len(r.MOld) != c.Br || len(r.L) != c.Br ||
						r.BytesRead != wantRead || r.BytesWritten != 0 {
						t.Fatalf("%+v: record %d is %s (%d,%d,%d) rows %d cols %d, %d/%d bytes; want step (%d,%d,%d) rows %d cols %d, %d/0 bytes",
							c, k-1, r.Kind, r.BH, r.I, r.J, r.RowsValid, r.ColsValid, r.BytesRead, r.BytesWritten, bh, i, j, rows, cols, wantRead)
					}
				}
				r := next()
				if r.Kind != instrument.KindEpilogue || r.BH != bh || r.I != i || r.RowsValid != rows || len(r.O) != c.Br*c.D || len(r.LSE) != c.Br ||
					r.BytesRead != 0 || r.BytesWritten != uint64(rows)*d*2+uint64(rows)*4 {
					t.Fatalf("%+v: record %d is %s (%d,%d), want the epilogue of (%d,%d)", c, k-1, r.Kind, r.BH, r.I, bh, i)
				}
			}
		}
		if k != len(recs) {
			t.Fatalf("%+v: %d records after the last epilogue", c, len(recs)-k)
		}
	}
}

// mmaExactFMA is a·b + c rounded once to float32, by big.Float.
func mmaExactFMA(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(2000).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(2000).SetFloat64(float64(c)))
	r, _ := x.Float32()
	return r
}

// TestFlash2MMAStepsRecomputed recomputes random steps from the inputs
// alone, as the kernel's header comment writes the arithmetic, row by row
// and column by column over the whole N×d matrices (no tiles, no shared
// walk), and checks that every element of S, P, m, α, l and O (padding rows
// and columns included) is the mirror's, bit for bit.
func TestFlash2MMAStepsRecomputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for n := range 40 {
		c := mmaRandomConfig(rng, n)
		_, recs := mmaTrace(t, c)
		var steps []*instrument.Record
		for _, r := range recs {
			if r.Kind == instrument.KindFlashStep {
				steps = append(steps, r)
			}
		}
		for range 3 {
			r := steps[rng.IntN(len(steps))]
			mmaRecomputeStep(t, &c, InputsFor(&c, r.BH), r)
		}
	}
}

func mmaRecomputeStep(t *testing.T, c *Config, in *Inputs, rec *instrument.Record) {
	t.Helper()
	scale := c.Scale()
	at := func(m []float32, row, x int) float32 { // a row past N reads as zero
		if row >= c.N {
			return 0
		}
		return m[row*c.D+x]
	}
	same := func(what string, row, x int, got, want float32) {
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("%+v step (%d,%d,%d) row %d: %s[%d] = %v, recomputed %v", *c, rec.BH, rec.I, rec.J, row, what, x, got, want)
		}
	}
	for r := range c.Br {
		row := rec.I*c.Br + r
		m := float32(math.Inf(-1))
		var l [4]float32
		o := make([]float32, c.D)
		for j := 0; j <= rec.J; j++ {
			s := make([]float32, c.Bc)
			mx := m
			for cc := range c.Bc {
				col := j*c.Bc + cc
				if col >= c.N || (c.Causal && col > row) {
					s[cc] = float32(math.Inf(-1))
				} else {
					var raw float32
					for k0 := 0; k0 < c.D; k0 += 16 {
						var chunk float64
						for x := k0; x < min(k0+16, c.D); x++ {
							chunk += float64(at(in.Q, row, x)) * float64(at(in.K, col, x))
						}
						raw = float32(raw + float32(chunk))
					}
					s[cc] = float32(raw * scale)
				}
				mx = max(mx, s[cc])
			}
			var mb float32
			if !math.IsInf(float64(mx), -1) {
				mb = mx
			}
			alpha := mmaExpf(float32(m - mb))
			p := make([]float32, c.Bc)
			var rs [4]float32
			for cc := range c.Bc {
				p[cc] = mmaExpf(float32(s[cc] - mb))
			}
			for cc := 0; cc < c.Bc; cc += 2 { // thread (cc%8)/2 holds columns cc and cc+1
				pair := p[cc]
				if cc+1 < c.Bc {
					pair = float32(pair + p[cc+1])
				}
				rs[(cc%8)/2] = float32(rs[(cc%8)/2] + pair)
			}
			for th := range l {
				l[th] = mmaExactFMA(l[th], alpha, rs[th])
			}
			for x := range c.D {
				o[x] = float32(o[x] * alpha)
				for k0 := 0; k0 < c.Bc; k0 += 16 {
					var chunk float64
					for cc := k0; cc < min(k0+16, c.Bc); cc++ {
						chunk += float64(RoundBF16(p[cc])) * float64(at(in.V, j*c.Bc+cc, x))
					}
					o[x] = float32(o[x] + float32(chunk))
				}
			}
			if j == rec.J {
				for cc := range c.Bc {
					same("S", r, cc, rec.S[r*c.Bc+cc], s[cc])
					same("P", r, cc, rec.P[r*c.Bc+cc], p[cc])
				}
				same("m_old", r, 0, rec.MOld[r], m)
				same("m_new", r, 0, rec.MNew[r], mx)
				same("alpha", r, 0, rec.Alpha[r], alpha)
				same("l", r, 0, rec.L[r], float32(float32(l[0]+l[1])+float32(l[2]+l[3])))
				for x := range c.D {
					same("O", r, x, rec.O[r*c.D+x], o[x])
				}
			}
			m = mx
		}
	}
}

// ---- the GPU comparison's bound ----

// expf is the simulated GPU's expf: up to 2 ulp either side of the
// mirror's (CUDA's expf is within 2 ulp of e^x), subnormal results kept.
func (g *simulatedGPU) expf(x float32) float32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := mmaExpf(x)
	if r == 0 || math.IsInf(float64(r), 0) {
		return r
	}
	steps := g.rng.IntN(5) - 2
	toward := float32(math.Inf(1))
	if steps < 0 {
		steps, toward = -steps, 0
	}
	for range steps {
		r = math.Nextafter32(r, toward)
	}
	return r
}

// mmaBoundConfig draws a run for the bound's tests: half the mirror's odd
// shapes (ragged d, Bc, toy sizes), half the compiled tiles.
func mmaBoundConfig(rng *rand.Rand, n int) Config {
	c := kernelstest.RandomGPUConfig(rng, 300)
	c.Variant = instrument.VariantFlash2MMA
	if n%2 == 0 {
		c.N = 1 + rng.IntN(90)
		c.D, c.Br, c.Bc = 1+rng.IntN(40), 1+rng.IntN(min(c.N, 20)), 1+rng.IntN(min(c.N, 20))
	} else {
		c.Br, c.Bc, c.D = 64, 64, []int{64, 128}[rng.IntN(2)]
		c.N = 64 + rng.IntN(200)
		c.Batch, c.Heads = 1, 1
	}
	c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	return c
}

// compareMMA holds every record of trace g to the mirror's over c, through
// Flash2MMAStep's bound, and returns the first error.
func compareMMA(c Config, g, mirror []*instrument.Record, worst map[string]float64) error {
	h := c.Header(instrument.SourceGPU, "")
	h.NumSMs = 1 // the stand-in's records claim SM 0 and a moment
	bnd := kernelstest.NewBounds(&h)
	if len(g) != len(mirror) {
		return fmt.Errorf("%d records, the mirror %d", len(g), len(mirror))
	}
	for k := range mirror {
		var b map[string][]float64
		if mirror[k].Kind == instrument.KindInputs {
			b = bnd.Of(mirror[k])
		} else {
			g[k].TStart, g[k].TEnd = 1, 2
			b = bnd.Flash2MMAStep(mirror[k])
		}
		if err := kernelstest.CompareRecords(&h, g[k], mirror[k], b, worst); err != nil {
			return fmt.Errorf("record %d: %w", k, err)
		}
	}
	return nil
}

func mmaMirror(t *testing.T, c Config) []*instrument.Record {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	var recs []*instrument.Record
	if err := RunMirror(context.Background(), c, func(r *instrument.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestFlash2MMABoundHoldsForOtherArithmetic runs the mirror and a simulated
// GPU (each mma summed in another order, rounding or truncating; each expf
// up to 2 ulp off) on the same fresh random runs and holds every element of
// the simulated trace to Flash2MMAStep's bound, as the GPU suite holds the
// GPU's; the worst ratio says how much room the bound leaves.
func TestFlash2MMABoundHoldsForOtherArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	worst := map[string]float64{}
	for n := range 60 {
		c := mmaBoundConfig(rng, n)
		mirror := mmaMirror(t, c)
		g := &simulatedGPU{rng: rand.New(rand.NewPCG(rng.Uint64(), 1))}
		sim := MirrorFlash2MMAWith(c, g.mma, g.expf)
		if err := compareMMA(c, sim, mirror, worst); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		differ := 0
		for k := range mirror {
			for x := range sim[k].O {
				if sim[k].O[x] != mirror[k].O[x] {
					differ++
				}
			}
		}
		if differ == 0 && c.N*c.D > 64 {
			t.Fatalf("%+v: the simulated GPU changed nothing: the test tries no bound", c)
		}
	}
	for name, w := range worst {
		t.Logf("%-6s worst difference/bound %.3g", name, w)
	}
}

// TestFlash2MMABoundCatchesWrongArithmetic: the bound is no blank cheque.
// Kernels with a plausible mistake in what the GPU leaves free must fail it
// on every run of the normal pattern: an exponential in base 2 (rung 6's
// ex2 without its scale by log2 e), expf rounded to bf16 (a softmax computed
// in bf16), and a tensor core accumulating in bf16. (Under the large
// pattern the scores, and so what the mma's sum order may move them by, are
// large enough that a bf16 exp fits the bound.) Nor does it tell rung 6's
// softmax from this one: flash2_fast's arithmetic on the same tiles fails
// it only where ex2.approx.ftz flushes a subnormal P that expf keeps.
func TestFlash2MMABoundCatchesWrongArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	wrong := []struct {
		name string
		mma  func(acc float32, a, b []float32, stride int) float32
		exp  func(float32) float32
	}{
		{"ex2 for expf", MMAChunk, func(x float32) float32 { return float32(math.Exp2(float64(x))) }},
		{"expf in bf16", MMAChunk, func(x float32) float32 { return RoundBF16(mmaExpf(x)) }},
		{"bf16 accumulator", func(acc float32, a, b []float32, stride int) float32 { return RoundBF16(MMAChunk(acc, a, b, stride)) }, mmaExpf},
	}
	for _, w := range wrong {
		caught := 0
		const runs = 12
		for n := range runs {
			c := mmaBoundConfig(rng, 2*n+1) // the compiled tiles: enough elements that a wrong one shows
			c.Pattern = instrument.PatternNormal
			if err := compareMMA(c, MirrorFlash2MMAWith(c, w.mma, w.exp), mmaMirror(t, c), map[string]float64{}); err != nil {
				caught++
				if n == 0 {
					t.Logf("%s: %v", w.name, err)
				}
			}
		}
		if caught != runs {
			t.Errorf("%s: the bound caught %d of %d runs", w.name, caught, runs)
		}
	}
}
