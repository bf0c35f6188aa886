package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
)

// ---- bf16 rounding, fma32, ex2 ----

func TestRoundBF16KnownValues(t *testing.T) {
	f := math.Float32frombits
	for _, tc := range []struct {
		name    string
		in, out uint32
	}{
		{"one", 0x3F800000, 0x3F800000},
		{"1+2⁻⁸: a tie, kept part even, stays", 0x3F808000, 0x3F800000},
		{"1+3·2⁻⁸: a tie, kept part odd, goes up", 0x3F818000, 0x3F820000},
		{"just above a tie goes up", 0x3F808001, 0x3F810000},
		{"just below a tie goes down", 0x3F807FFF, 0x3F800000},
		{"negative tie to even", 0xBF818000, 0xBF820000},
		{"π", 0x40490FDB, 0x40490000},
		{"carry into the exponent", 0x3FFFFFFF, 0x40000000},
		{"largest float32 overflows to +Inf", 0x7F7FFFFF, 0x7F800000},
		{"a tie above bf16's largest goes to Inf", 0x7F7F8000, 0x7F800000},
		{"below that tie stays finite", 0x7F7F7FFF, 0x7F7F0000},
		{"−largest to −Inf", 0xFF7FFFFF, 0xFF800000},
		{"+Inf", 0x7F800000, 0x7F800000},
		{"−Inf", 0xFF800000, 0xFF800000},
		{"+0", 0, 0},
		{"−0 keeps its sign", 0x80000000, 0x80000000},
		{"least subnormal rounds to 0", 0x00000001, 0},
		{"subnormal tie to even (0)", 0x00008000, 0},
		{"subnormal tie to even (up)", 0x00018000, 0x00020000},
		{"subnormal kept", 0x00420000, 0x00420000},
	} {
		if got := math.Float32bits(RoundBF16(f(tc.in))); got != tc.out {
			t.Errorf("%s: RoundBF16(%#08x) = %#08x, want %#08x", tc.name, tc.in, got, tc.out)
		}
	}
	for _, nan := range []uint32{0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7F80FFFF} {
		if r := RoundBF16(f(nan)); r == r {
			t.Errorf("RoundBF16(NaN %#08x) = %v, not NaN", nan, r)
		}
	}
}

// TestRoundBF16AgainstBigFloat checks random normal values against an
// independent rounding to 8 significant bits, ties to even.
func TestRoundBF16AgainstBigFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 100000 {
		bits := rng.Uint32()
		exp := (bits >> 23) & 0xFF
		if exp == 0 || exp == 0xFF {
			continue // subnormal bf16 has fewer bits; Inf/NaN are above
		}
		x := math.Float32frombits(bits)
		want, _ := new(big.Float).SetMode(big.ToNearestEven).SetPrec(8).SetFloat64(float64(x)).Float32()
		if got := RoundBF16(x); got != want {
			t.Fatalf("RoundBF16(%#08x) = %#08x, want %#08x", bits, math.Float32bits(got), math.Float32bits(want))
		}
		if RoundBF16(want) != want {
			t.Fatalf("RoundBF16 is not idempotent at %v", want)
		}
	}
}

func TestBF16Bits(t *testing.T) {
	x := []float32{1, -2.5, float32(math.Pi), float32(math.Inf(-1))}
	want := []uint16{0x3F80, 0xC020, 0x4049, 0xFF80}
	got := BF16Bits(x)
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("BF16Bits(%v) = %#04x, want %#04x", x[k], got[k], want[k])
		}
	}
}

// exactFMA32 is a·b + c rounded once to float32, by big.Float.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(2000).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(2000).SetFloat64(float64(c)))
	r, _ := x.Float32()
	return r
}

func TestFMA32DoubleRounding(t *testing.T) {
	// a·b = 2⁻²⁴ − 2⁻⁵⁴, c = 1 + 2⁻²³: the exact sum lies just below the
	// float32 midpoint 1 + 2⁻²³ + 2⁻²⁴, so the answer is 1 + 2⁻²³. Rounded
	// to float64 first, the sum lands on the midpoint, and ties to even
	// then give 1 + 2⁻²².
	a := float32(math.Ldexp(1+math.Ldexp(1, -15), -24))
	b := float32(1 - math.Ldexp(1, -15))
	c := float32(1 + math.Ldexp(1, -23))
	want := c
	if naive := float32(math.FMA(float64(a), float64(b), float64(c))); naive == want {
		t.Fatalf("the case does not round twice: %v", naive)
	}
	if got := fma32(a, b, c); got != want {
		t.Fatalf("fma32 = %v, want %v", got, want)
	}
}

func TestFMA32AgainstBigFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	randFloat := func(minExp, maxExp int) float32 {
		m := 1 + rng.Float64()
		v := float32(math.Ldexp(m, minExp+rng.IntN(maxExp-minExp+1)))
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	twice := 0
	for n := range 60000 {
		var a, b, c float32
		switch n % 3 {
		case 0: // anything, subnormal and overflowing results included
			a, b, c = randFloat(-140, 100), randFloat(-140, 100), randFloat(-149, 127)
		case 1: // nearby magnitudes: cancellation
			a, b = randFloat(-3, 3), randFloat(-3, 3)
			c = -float32(float64(a)*float64(b)) * float32(1+rng.NormFloat64()*1e-6)
		default:
			// a·b = ±(ulp(c)/2)·(1 − j²·2⁻⁴⁶): the sum sits a hair off a
			// float32 midpoint, past float64's precision.
			c = randFloat(-100, 100)
			_, e := math.Frexp(float64(c))
			j := float64(1 + rng.IntN(300))
			a = float32(math.Ldexp(1+j*math.Ldexp(1, -23), e-25))
			b = float32(1 - j*math.Ldexp(1, -23))
			if rng.IntN(2) == 0 {
				a = -a
			}
		}
		want := exactFMA32(a, b, c)
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v (%#08x), want %v (%#08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if float32(math.FMA(float64(a), float64(b), float64(c))) != want {
			twice++
		}
	}
	if twice == 0 {
		t.Fatal("no case rounded differently through float64: the test does not reach double rounding")
	}
	t.Logf("%d cases where float32(math.FMA) rounds wrongly", twice)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range [][4]float32{
		{inf, 2, 1, inf}, {-inf, 2, 1, -inf}, {2, 3, -inf, -inf}, {float32(math.Inf(-1)), 0.5, -0, -inf},
	} {
		if got := fma32(tc[0], tc[1], tc[2]); got != tc[3] {
			t.Errorf("fma32(%v, %v, %v) = %v, want %v", tc[0], tc[1], tc[2], got, tc[3])
		}
	}
	for _, tc := range [][3]float32{{inf, 0, 1}, {inf, 1, -inf}, {nan, 1, 1}, {1, 1, nan}} {
		if got := fma32(tc[0], tc[1], tc[2]); got == got {
			t.Errorf("fma32(%v, %v, %v) = %v, want NaN", tc[0], tc[1], tc[2], got)
		}
	}
}

func TestEx2(t *testing.T) {
	sub := math.Float32frombits(0x00000123)
	for _, tc := range []struct{ x, want float32 }{
		{float32(math.Inf(-1)), 0}, {0, 1}, {sub, 1}, {-sub, 1}, {1, 2}, {-1, 0.5},
		{-126, 0x1p-126}, {-126.5, 0}, {-140, 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := ex2(tc.x); got != tc.want {
			t.Errorf("ex2(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
	for range 10000 {
		x := float32(rng.Float64()*200 - 100)
		want := math.Exp2(float64(x))
		if got := float64(ex2(x)); math.Abs(got-want) > 0.5*float64(ulp32(float32(want)))*1.0001 {
			t.Fatalf("ex2(%v) = %v, 2^x = %v", x, got, want)
		}
	}
}

func ulp32(x float32) float32 {
	x = float32(math.Abs(float64(x)))
	return math.Nextafter32(x, float32(math.Inf(1))) - x
}

// ---- the mirror against the float64 reference ----

// randomFastConfig draws a flash2_fast run: toy, small and ragged (d
// mostly not a multiple of 16, Bc not of 8), real tile sizes, and the
// compiled GPU shapes with a ragged N.
func randomFastConfig(rng *rand.Rand, n int) Config {
	c := randomConfig(rng)
	c.Variant = instrument.VariantFlash2Fast
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	if rng.IntN(5) == 0 {
		shape := [][3]int{{128, 128, 64}, {128, 48, 128}}[rng.IntN(2)]
		c.Br, c.Bc, c.D = shape[0], shape[1], shape[2]
		c.N = max(c.Br, c.Bc) + rng.IntN(200)
		c.Batch, c.Heads = 1, 1
		c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
	}
	return c
}

// TestFlash2FastMatchesReference holds the mirror's output to the float64
// reference computed from the same bf16 inputs: max |O − O_ref| over
// max |O_ref| under 1e-2 per batch-head, LSE within 1e-4 (it never sees
// bf16(P)), over fresh random runs. Outputs start as NaN, so a row the
// trace never writes fails, and a NaN never passes.
func TestFlash2FastMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	worst := map[instrument.Pattern]float64{}
	var withTail, causal, multi int
	for n := range 240 {
		c := randomFastConfig(rng, n)
		if c.D%16 != 0 {
			withTail++
		}
		if c.Causal {
			causal++
		}
		if c.TracedBH().Len() > 1 {
			multi++
		}
		h, recs := runTrace(t, c)
		if h.DType != instrument.DTypeBF16 || h.Records != len(recs) {
			t.Fatalf("%+v: header dtype %s, %d records for %d", c, h.DType, h.Records, len(recs))
		}
		noNaN(t, c, recs)
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			in := InputsFor(&c, bh)
			ref, refLSE := Reference(in, c.N, c.D, c.Causal)
			rows := instrument.Range{Lo: qs.Lo * c.Br, Hi: min(c.N, qs.Hi*c.Br)}
			o := fill(c.N*c.D, float32(math.NaN()))
			lse := fill(c.N, float32(math.NaN()))
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
	if withTail == 0 || causal == 0 || multi == 0 || len(worst) != len(instrument.Patterns) {
		t.Fatalf("the draw missed a case: %d with d%%16 ≠ 0, %d causal, %d with several heads, patterns %v", withTail, causal, multi, worst)
	}
	for p, w := range worst {
		t.Logf("pattern %-6s worst max-norm relative error %.3g (bound 1e-2)", p, w)
	}
}

func TestInputsForRoundsOnlyBF16Variants(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 20 {
		c := randomConfig(rng)
		bh := rng.IntN(c.Batch * c.Heads)
		raw, got := GenerateInputs(&c, bh), InputsFor(&c, bh)
		changed := 0
		for name, pair := range map[string][2][]float32{"q": {raw.Q, got.Q}, "k": {raw.K, got.K}, "v": {raw.V, got.V}} {
			for x := range pair[0] {
				want := pair[0][x]
				if Info(c.Variant).DType == instrument.DTypeBF16 {
					want = RoundBF16(want)
				}
				if pair[1][x] != want {
					t.Fatalf("%+v: %s[%d] = %v, want %v", c, name, x, pair[1][x], want)
				}
				if pair[1][x] != pair[0][x] {
					changed++
				}
			}
		}
		if (Info(c.Variant).DType == instrument.DTypeBF16) != (changed > 0) {
			t.Fatalf("%+v: %d inputs changed by InputsFor", c, changed)
		}
	}
}

// ---- the online softmax, step by step ----

// fastExpBound is how far the mirror's ex2(fma(s, sl2, −mb)) may lie from
// exp(S − M) computed from the trace's rounded S = S_raw·scale and
// M = m_raw·scale: sl2 and mb carry about 2u and 3u, S and M u each, the
// fma u|x|, ex2 half an ulp, and .ftz loses anything under 2⁻¹²⁶.
func fastExpBound(s, m float64) float64 {
	e := math.Exp(s - m)
	delta := 6*eps32*(math.Abs(s)+math.Abs(m)) + 2*eps32*math.Abs(s-m)
	return e*math.Expm1(delta) + 2*eps32*e + 0x1p-125
}

// TestFlash2FastOnlineSoftmaxInvariants checks every step of every trace:
// m_old is the last m_new, m never decreases and is exactly the max of m_old
// and the tile's S, α = exp(m_old − m_new) in [0, 1] (up to an ulp over 1,
// like P), P = exp(S − m_new)
// (0 where masked), l ≥ α·l_old and l = Σ exp(S − m_new) over the columns
// seen, and after the last step the epilogue is O/l and m + log l.
func TestFlash2FastOnlineSoftmaxInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for n := range 200 {
		c := randomFastConfig(rng, n)
		_, recs := runTrace(t, c)
		atoms := float64(ceilDiv(c.Bc, 8))
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
					mOld, mNew := float64(r.MOld[row]), float64(r.MNew[row])
					if mOld != mPrev[row] || !(mNew >= mOld) {
						t.Fatalf("%s: m_old %v (previous m_new %v), m_new %v", ctx, mOld, mPrev[row], mNew)
					}
					tileMax := math.Inf(-1)
					for col := range c.Bc {
						s, p := float64(r.S[row*c.Bc+col]), float64(r.P[row*c.Bc+col])
						masked := col >= r.ColsValid || (c.Causal && r.J*c.Bc+col > r.I*c.Br+row)
						if masked != math.IsInf(s, -1) {
							t.Fatalf("%s col %d: S = %v, masked %v", ctx, col, s, masked)
						}
						if masked {
							if p != 0 {
								t.Fatalf("%s col %d: masked, P = %v", ctx, col, p)
							}
							continue
						}
						tileMax = math.Max(tileMax, s)
						seen[row] = append(seen[row], s)
						// P may pass 1 by a few ulp: at the row's max, fma(s, sl2, −mb)
						// is s·sl2 − float32(s·sl2), the rounding's residue (up to
						// half an ulp of mb), not 0.
						if b := fastExpBound(s, mNew); !(math.Abs(p-math.Exp(s-mNew)) <= b) || p > overOne(mNew) {
							t.Fatalf("%s col %d: P = %v, exp(S − m) = %v (bound %.3g)", ctx, col, p, math.Exp(s-mNew), b)
						}
					}
					if want := math.Max(mOld, tileMax); mNew != want {
						t.Fatalf("%s: m_new %v, max(m_old, max S) = %v", ctx, mNew, want)
					}
					mAbs[row] = math.Max(mAbs[row], math.Abs(mNew))
					alpha := float64(r.Alpha[row])
					if math.IsInf(mOld, -1) {
						if alpha != 0 {
							t.Fatalf("%s: α = %v after nothing seen", ctx, alpha)
						}
					} else if b := fastExpBound(mOld, mNew); !(alpha >= 0 && alpha <= overOne(mNew) && math.Abs(alpha-math.Exp(mOld-mNew)) <= b) {
						t.Fatalf("%s: α = %v, exp(m_old − m_new) = %v", ctx, alpha, math.Exp(mOld-mNew))
					}
					l := float64(r.L[row])
					if !(l >= alpha*lPrev[row]*(1-8*eps32)) {
						t.Fatalf("%s: l = %v < α·l_old = %v", ctx, l, alpha*lPrev[row])
					}
					var wantL, termErr float64
					for _, s := range seen[row] {
						wantL += math.Exp(s - mNew)
						termErr += fastExpBound(s, mNew) + 7*eps32*(math.Abs(s)+mAbs[row])*math.Exp(s-mNew)
					}
					// Each step's roundings: 2⌈Bc/8⌉+1 per thread, 3 for the
					// quad's sum, α's own error; each older term carries those
					// of every step since.
					steps := float64(r.J + 1)
					alphaErr := 8 * eps32 * (2*mAbs[row] + 1)
					bound := termErr + steps*((2*atoms+4)*2*eps32+alphaErr)*wantL
					if d := math.Abs(l - wantL); !(d <= bound) {
						t.Fatalf("%s: l = %v, Σ exp(S − m_new) = %v (bound %.3g)", ctx, l, wantL, bound)
					}
					mPrev[row], lPrev[row] = mNew, l
				}
				last = r
			case instrument.KindEpilogue:
				if last == nil || last.I != r.I || last.BH != r.BH {
					t.Fatalf("%+v: epilogue of (%d, %d) without its steps", c, r.BH, r.I)
				}
				for row := range r.RowsValid {
					l := float64(last.L[row])
					for x := range c.D {
						want := float64(last.O[row*c.D+x]) / l
						if got := float64(r.O[row*c.D+x]); !(math.Abs(got-want) <= 3*eps32*math.Abs(want)+1e-45) {
							t.Fatalf("%+v bh %d q-tile %d row %d: epilogue O %v, O/l %v", c, r.BH, r.I, row, got, want)
						}
					}
					want := float64(last.MNew[row]) + math.Log(l)
					if got := float64(r.LSE[row]); !(math.Abs(got-want) <= 4*eps32*(math.Abs(want)+math.Abs(float64(last.MNew[row]))+1)) {
						t.Fatalf("%+v bh %d q-tile %d row %d: LSE %v, m + log l = %v", c, r.BH, r.I, row, got, want)
					}
				}
			}
		}
	}
}

// overOne is how far past 1 the kernel's P and α may go at a row max m
// (natural units): 2 to the half ulp of mb = m·log2 e, with room.
func overOne(m float64) float64 { return 1 + 4*eps32*(math.Abs(m)+1) }

// ---- the trace's shape ----

// TestFlash2FastTraceStructure checks the records against the header and
// the definition: the inputs of every traced batch-head, then per q-tile one
// step per kv-tile holding an unmasked score, in order, and an epilogue;
// sizes and bytes as the kernel's header comment says (bf16: 2 bytes).
func TestFlash2FastTraceStructure(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for n := range 200 {
		c := randomFastConfig(rng, n)
		h, recs := runTrace(t, c) // checks the bytes against TraceBytes
		if h.Records != len(recs) || h.DType != instrument.DTypeBF16 || h.Variant != instrument.VariantFlash2Fast {
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
					if tileFullyMasked(&c, i, j) {
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

// ---- every number of a step, recomputed ----

// TestFlash2FastStepsRecomputed recomputes random steps from the inputs
// alone, row by row and column by column over the whole N×d matrices (no
// tiles), and checks that every element of S, P, m, α, l and O (padding
// rows and columns included) is the mirror's, bit for bit.
func TestFlash2FastStepsRecomputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for n := range 40 {
		c := randomFastConfig(rng, n)
		_, recs := runTrace(t, c)
		var steps []*instrument.Record
		for _, r := range recs {
			if r.Kind == instrument.KindFlashStep {
				steps = append(steps, r)
			}
		}
		for range 3 {
			r := steps[rng.IntN(len(steps))]
			checkRecomputed(t, &c, InputsFor(&c, r.BH), r)
		}
	}
}

func checkRecomputed(t *testing.T, c *Config, in *Inputs, rec *instrument.Record) {
	t.Helper()
	scale := c.Scale()
	sl2 := float32(scale * float32(1.4426950408889634))
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
					for k0 := 0; k0 < c.D; k0 += 16 {
						var chunk float64
						for x := k0; x < min(k0+16, c.D); x++ {
							chunk += float64(at(in.Q, row, x)) * float64(at(in.K, col, x))
						}
						s[cc] = float32(s[cc] + float32(chunk))
					}
				}
				mx = max(mx, s[cc])
			}
			mb := float32(0)
			if !math.IsInf(float64(mx), -1) {
				mb = float32(mx * sl2)
			}
			alpha := ex2(fma32(m, sl2, -mb))
			p := make([]float32, c.Bc)
			var rs [4]float32
			for cc := range c.Bc {
				p[cc] = ex2(fma32(s[cc], sl2, -mb))
			}
			for cc := 0; cc < c.Bc; cc += 2 { // thread (cc%8)/2 holds columns cc and cc+1
				pair := p[cc]
				if cc+1 < c.Bc {
					pair = float32(pair + p[cc+1])
				}
				rs[(cc%8)/2] = float32(rs[(cc%8)/2] + pair)
			}
			for th := range l {
				l[th] = fma32(alpha, l[th], rs[th])
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
					same("S", r, cc, rec.S[r*c.Bc+cc], float32(s[cc]*scale))
					same("P", r, cc, rec.P[r*c.Bc+cc], p[cc])
				}
				same("m_old", r, 0, rec.MOld[r], float32(m*scale))
				same("m_new", r, 0, rec.MNew[r], float32(mx*scale))
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
