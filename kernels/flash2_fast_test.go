package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// ---- bf16 rounding, fma32, ex2 ----

func TestRoundBF16KnownValues(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	rng := testrand.New(t)
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	rng := testrand.New(t)
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
	t.Parallel()
	sub := math.Float32frombits(0x00000123)
	for _, tc := range []struct{ x, want float32 }{
		{float32(math.Inf(-1)), 0}, {0, 1}, {sub, 1}, {-sub, 1}, {1, 2}, {-1, 0.5},
		{-126, 0x1p-126}, {-126.5, 0}, {-140, 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := ex2(tc.x); got != tc.want {
			t.Errorf("ex2(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	rng := testrand.New(t)
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

// ---- the bf16 flash kernels: flash2_fast (rung 6) and flash2_mma (rung 5) ----

// The two run one block walk (fastArith.block) and part only in their
// softmax: flash2_fast keeps S and m raw and folds the scale and log2 e into
// one fma before ex2.approx; flash2_mma scales each score at once and keeps
// natural units, S = S_raw·scale, α = expf(m_old − m_new). Every test below
// runs for both, each held to its own arithmetic where they part.

// bf16CompiledOdds is, per bf16 flash kernel, one in how many of
// randomBF16Config's draws takes the tiles it is compiled for
// (compiledTiles).
var bf16CompiledOdds = map[instrument.Variant]int{instrument.VariantFlash2Fast: 5, instrument.VariantFlash2MMA: 2}

// randomBF16Config draws a run of v: toy, small and ragged (d mostly not a
// multiple of 16, Bc not of 8), real tile sizes, and v's compiled tiles with
// a ragged N, sometimes a few of their q-tiles traced.
func randomBF16Config(rng *rand.Rand, n int, v instrument.Variant) Config {
	c := randomConfig(rng)
	c.Variant = v
	c.Pattern = instrument.Patterns[n%len(instrument.Patterns)]
	if tiles := compiledTiles[v]; rng.IntN(bf16CompiledOdds[v]) == 0 {
		tile := tiles[rng.IntN(len(tiles))]
		c.Br, c.Bc, c.D = tile[0], tile[1], tile[2]
		c.N = max(c.Br, c.Bc) + rng.IntN(200)
		c.Batch, c.Heads = 1, 1
		c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
		if rng.IntN(4) == 0 {
			lo := rng.IntN(c.Tr())
			c.TraceQ = instrument.Range{Lo: lo, Hi: lo + 1 + rng.IntN(c.Tr()-lo)}
		}
	}
	return c
}

// atCompiledTiles says whether c runs on tiles its kernel is compiled for.
func atCompiledTiles(c *Config) bool {
	return slices.Contains(compiledTiles[c.Variant], [3]int{c.Br, c.Bc, c.D})
}

// bf16Trace is runTrace (the trace as a consumer decodes it, its size
// TraceBytes') for a valid run c of a bf16 flash kernel: its header says
// c's variant, bf16 and as many records as there are, and no array of any
// record holds a NaN.
func bf16Trace(t *testing.T, c Config) []*instrument.Record {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	h, recs := runTrace(t, c)
	if h.Records != len(recs) || h.DType != instrument.DTypeBF16 || h.Variant != c.Variant {
		t.Fatalf("%+v: header %+v for %d records", c, h, len(recs))
	}
	noNaN(t, c, recs)
	return recs
}

// bf16Runs is a bf16 flash kernel's runs for a test (runsOf): its edge
// configurations, then testrand.Runs(full, least) of randomBF16Config's
// draws, the patterns in turn.
func bf16Runs(rng *rand.Rand, v instrument.Variant, full, least int) []Config {
	n := 0
	return runsOf(rng, []instrument.Variant{v}, full, least, func(rng *rand.Rand) Config {
		n++
		return randomBF16Config(rng, n-1, v)
	})
}

// eachBF16Run runs check, as a parallel subtest per bf16 flash kernel, on
// its runs (bf16Runs) and their traces (bf16Trace).
func eachBF16Run(t *testing.T, full, least int, check func(t *testing.T, rng *rand.Rand, c Config, recs []*instrument.Record)) {
	for _, v := range BF16FlashVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			rng := testrand.New(t)
			for _, c := range bf16Runs(rng, v, full, least) {
				check(t, rng, c, bf16Trace(t, c))
			}
		})
	}
}

// TestBF16FlashMatchesReference holds each bf16 flash kernel's mirror
// output to the float64 reference computed from the same bf16 inputs:
// max |O − O_ref| under 1e-2 of max |V| per batch-head, LSE within 1e-4
// (it never sees bf16(P)), over fresh random runs. The scale is V's, not
// O_ref's: O is a weighted average of V's rows, and bf16(P)'s rounding
// moves it by a part of |V| however much the rows cancel (at d = 1 every
// output may be near 0 at once; seed 14833236778901160540 draws one). Outputs start as
// NaN, so an element the trace never writes fails, and a NaN never passes.
func TestBF16FlashMatchesReference(t *testing.T) {
	t.Parallel()
	for _, v := range BF16FlashVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			rng := testrand.New(t)
			worst := map[instrument.Pattern]float64{}
			var withTail, causal, compiled, multi int
			for _, c := range bf16Runs(rng, v, 240, 24) {
				if c.D%16 != 0 {
					withTail++
				}
				if c.Causal {
					causal++
				}
				if atCompiledTiles(&c) {
					compiled++
				}
				if c.TracedBH().Len() > 1 {
					multi++
				}
				recs := bf16Trace(t, c)
				bhs, qs := c.TracedBH(), c.TracedQ()
				for bh := bhs.Lo; bh < bhs.Hi; bh++ {
					in := InputsFor(&c, bh)
					ref, refLSE := Reference(in, c.N, c.D, c.Causal)
					rows := instrument.Range{Lo: qs.Lo * c.Br, Hi: min(c.N, qs.Hi*c.Br)}
					o, lse := epilogueOutputs(&c, recs, bh)
					for _, r := range recs {
						if r.Kind != instrument.KindInputs || r.BH != bh {
							continue
						}
						for name, pair := range map[string][2][]float32{"q": {r.Q, in.Q}, "k": {r.K, in.K}, "v": {r.V, in.V}} {
							for x := range pair[1] {
								if pair[0][x] != pair[1][x] || RoundBF16(pair[0][x]) != pair[0][x] {
									t.Fatalf("%+v bh %d: inputs record %s[%d] = %v, InputsFor %v", c, bh, name, x, pair[0][x], pair[1][x])
								}
							}
						}
					}
					var maxDiff, maxV float64
					for x := rows.Lo * c.D; x < rows.Hi*c.D; x++ {
						d := math.Abs(float64(o[x]) - ref[x])
						if !(d <= math.MaxFloat64) { // NaN, or Inf
							t.Fatalf("%+v bh %d: O[%d] = %v, reference %v", c, bh, x, o[x], ref[x])
						}
						maxDiff = math.Max(maxDiff, d)
					}
					for _, v := range in.V {
						maxV = math.Max(maxV, math.Abs(float64(v)))
					}
					rel := maxDiff / math.Max(maxV, 1e-30)
					if !(rel < 1e-2) {
						t.Fatalf("%+v bh %d: max|O − ref|/max|V| = %.3g", c, bh, rel)
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
				t.Logf("pattern %-6s worst max|O − ref| over max|V| %.3g (bound 1e-2)", p, w)
			}
		})
	}
}

func TestInputsForRoundsOnlyBF16Variants(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
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

// expf32 and logf32 are flash2_mma's mirror's expf and logf
// (kernels/float32.go), written again: float64 rounded once.
func expf32(x float32) float32 { return float32(math.Exp(float64(x))) }
func logf32(x float32) float32 { return float32(math.Log(float64(x))) }

// sameBits says whether a and b are the same float32, bit for bit (either
// zero for either).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a == 0 && b == 0)
}

// fastExpBound is how far the mirror's ex2(fma(s, sl2, −mb)) may lie from
// exp(S − M) computed from the trace's rounded S = S_raw·scale and
// M = m_raw·scale: sl2 and mb carry about 2u and 3u, S and M u each, the
// fma u|x|, ex2 half an ulp, and .ftz loses anything under 2⁻¹²⁶.
func fastExpBound(s, m float64) float64 {
	e := math.Exp(s - m)
	delta := 6*eps32*(math.Abs(s)+math.Abs(m)) + 2*eps32*math.Abs(s-m)
	return e*math.Expm1(delta) + 2*eps32*e + 0x1p-125
}

// overOne is how far past 1 flash2_fast's P and α may go at a row max m
// (natural units): 2 to the half ulp of mb = m·log2 e, with room.
func overOne(m float64) float64 { return 1 + 4*eps32*(math.Abs(m)+1) }

// bf16Softmax is where the online-softmax invariants hold the two bf16
// flash kernels to their own arithmetic.
type bf16Softmax struct {
	// exp says whether got is the kernel's e^(x − m), for x a finite score
	// or old row max and m the new row max, both as the trace holds them.
	exp func(x, m, got float32) bool
	// lTerm bounds the error of one term e^(s − m) of l (mAbs the largest
	// |m| of the row so far); α's own error in a step is alphaErr·u·(2·mAbs
	// + 1), and lFloor an absolute slack.
	lTerm            func(s, m, mAbs float64) float64
	alphaErr, lFloor float64
	// epiO and epiLSE say whether an epilogue's O and LSE are the kernel's
	// from the last step's O, m and l.
	epiO   func(o, l, got float32) bool
	epiLSE func(m, l, got float32) bool
}

var bf16Softmaxes = map[instrument.Variant]bf16Softmax{
	// flash2_fast's trace scales its raw S and m afterwards, so ex2 of the
	// fma it folds the scale into is e^(S − m) only within fastExpBound, and
	// may pass 1 by a few ulp: at the row's max, fma(s, sl2, −mb) is
	// s·sl2 − float32(s·sl2), the rounding's residue (up to half an ulp of
	// mb), not 0. Each term of l carries fastExpBound and the roundings of
	// S and m; the epilogue is O/l and m + log l within their roundings.
	instrument.VariantFlash2Fast: {
		exp: func(x, m, got float32) bool {
			s, mm, p := float64(x), float64(m), float64(got)
			return math.Abs(p-math.Exp(s-mm)) <= fastExpBound(s, mm) && p >= 0 && p <= overOne(mm)
		},
		lTerm: func(s, m, mAbs float64) float64 {
			return fastExpBound(s, m) + 7*eps32*(math.Abs(s)+mAbs)*math.Exp(s-m)
		},
		alphaErr: 8,
		epiO: func(o, l, got float32) bool {
			want := float64(o) / float64(l)
			return math.Abs(float64(got)-want) <= 3*eps32*math.Abs(want)+1e-45
		},
		epiLSE: func(m, l, got float32) bool {
			want := float64(m) + math.Log(float64(l))
			return math.Abs(float64(got)-want) <= 4*eps32*(math.Abs(want)+math.Abs(float64(m))+1)
		},
	},
	// flash2_mma's trace is in its own units, so its arithmetic holds bit
	// for bit: α = expf(m_old − m_new), P = expf(S − m_new), in [0, 1], and
	// the epilogue O·(1/l) and m + logf(l). Each term of l carries the
	// rounding of S − m and of expf.
	instrument.VariantFlash2MMA: {
		exp: func(x, m, got float32) bool { return sameBits(got, expf32(float32(x-m))) && got >= 0 && got <= 1 },
		lTerm: func(s, m, _ float64) float64 {
			return math.Exp(s-m) * (math.Expm1(2*eps32*math.Abs(s-m)) + eps32)
		},
		alphaErr: 4,
		lFloor:   1e-44,
		epiO: func(o, l, got float32) bool {
			var inv float32
			if l != 0 {
				inv = float32(1 / l)
			}
			return sameBits(got, float32(o*inv))
		},
		epiLSE: func(m, l, got float32) bool {
			lse := float32(math.Inf(-1))
			if l != 0 {
				lse = float32(m + logf32(l))
			}
			return sameBits(got, lse)
		},
	},
}

// TestBF16FlashOnlineSoftmaxInvariants checks every step of every trace:
// m_old is the last m_new, m never decreases and is exactly the max of
// m_old and the tile's S, S is −Inf exactly where masked, P is 0 there,
// α = exp(m_old − m_new) (0 after nothing seen) and P = exp(S − m_new) in
// the kernel's arithmetic (bf16Softmaxes), l ≥ α·l_old and l = Σ exp(S −
// m_new) over the columns seen, within its roundings, and after the last
// step the epilogue is O/l and m + log l.
func TestBF16FlashOnlineSoftmaxInvariants(t *testing.T) {
	t.Parallel()
	eachBF16Run(t, 200, 20, func(t *testing.T, _ *rand.Rand, c Config, recs []*instrument.Record) {
		sm := bf16Softmaxes[c.Variant]
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
						s, p := r.S[row*c.Bc+col], r.P[row*c.Bc+col]
						gc := r.J*c.Bc + col // past N or, causal, above the diagonal
						masked := gc >= c.N || (c.Causal && gc > r.I*c.Br+row)
						if masked != math.IsInf(float64(s), -1) {
							t.Fatalf("%s col %d: S = %v, masked %v", ctx, col, s, masked)
						}
						if masked {
							if p != 0 {
								t.Fatalf("%s col %d: masked, P = %v", ctx, col, p)
							}
							continue
						}
						tileMax = math.Max(tileMax, float64(s))
						seen[row] = append(seen[row], float64(s))
						if !sm.exp(s, r.MNew[row], p) {
							t.Fatalf("%s col %d: P = %v, exp(S − m) = %v", ctx, col, p, math.Exp(float64(s)-mNew))
						}
					}
					if want := math.Max(mOld, tileMax); mNew != want {
						t.Fatalf("%s: m_new %v, max(m_old, max S) = %v", ctx, mNew, want)
					}
					mAbs[row] = math.Max(mAbs[row], math.Abs(mNew))
					alpha := r.Alpha[row]
					if math.IsInf(mOld, -1) {
						if alpha != 0 {
							t.Fatalf("%s: α = %v after nothing seen", ctx, alpha)
						}
					} else if !sm.exp(r.MOld[row], r.MNew[row], alpha) {
						t.Fatalf("%s: α = %v, exp(m_old − m_new) = %v", ctx, alpha, math.Exp(mOld-mNew))
					}
					l := float64(r.L[row])
					if !(l >= float64(alpha)*lPrev[row]*(1-8*eps32)) {
						t.Fatalf("%s: l = %v < α·l_old = %v", ctx, l, float64(alpha)*lPrev[row])
					}
					var wantL, termErr float64
					for _, s := range seen[row] {
						wantL += math.Exp(s - mNew)
						termErr += sm.lTerm(s, mNew, mAbs[row])
					}
					// Each step's roundings: 2⌈Bc/8⌉+1 per thread,
					// 3 for the quad's sum, α's own error; each
					// older term carries those of every step since.
					steps := float64(r.J + 1)
					alphaErr := sm.alphaErr * eps32 * (2*mAbs[row] + 1)
					bound := termErr + steps*((2*atoms+4)*2*eps32+alphaErr)*wantL + sm.lFloor
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
					l, m := last.L[row], last.MNew[row]
					for x := range c.D {
						if o, got := last.O[row*c.D+x], r.O[row*c.D+x]; !sm.epiO(o, l, got) {
							t.Fatalf("%+v bh %d q-tile %d row %d: epilogue O %v, O/l %v", c, r.BH, r.I, row, got, float64(o)/float64(l))
						}
					}
					if got := r.LSE[row]; !sm.epiLSE(m, l, got) {
						t.Fatalf("%+v bh %d q-tile %d row %d: LSE %v, m + log l = %v", c, r.BH, r.I, row, got, float64(m)+math.Log(float64(l)))
					}
				}
			}
		}
	})
}

// ---- the trace's shape ----

// TestBF16FlashTraceStructure checks the records against the header and
// the definition: the inputs of every traced batch-head, then per q-tile one
// step per kv-tile holding an unmasked score, in order, and an epilogue;
// sizes and bytes as the kernels' header comments say (bf16: 2 bytes).
// bf16Trace has held the header, and the trace's size, to c.
func TestBF16FlashTraceStructure(t *testing.T) {
	t.Parallel()
	eachBF16Run(t, 200, 20, func(t *testing.T, _ *rand.Rand, c Config, recs []*instrument.Record) {
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
	})
}

// ---- every number of a step, recomputed ----

// TestBF16FlashStepsRecomputed recomputes random steps from the inputs
// alone, as each kernel's header comment writes its arithmetic, row by row
// and column by column over the whole N×d matrices (no tiles, no shared
// walk), and checks that every element of S, P, m, α, l and O (padding
// rows and columns included) is the mirror's, bit for bit.
func TestBF16FlashStepsRecomputed(t *testing.T) {
	t.Parallel()
	eachBF16Run(t, 40, 8, func(t *testing.T, rng *rand.Rand, c Config, recs []*instrument.Record) {
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
	})
}

func checkRecomputed(t *testing.T, c *Config, in *Inputs, rec *instrument.Record) {
	t.Helper()
	scale := c.Scale()
	// flash2_mma: x = S_raw·scale at once, the max over x, mb = m_new,
	// p = expf(x − mb), and the trace holds x and m as they are.
	score := func(sRaw float32) float32 { return float32(sRaw * scale) }
	base := func(m float32) float32 { return m }
	exp := func(v, mb float32) float32 { return expf32(float32(v - mb)) }
	natural := func(v float32) float32 { return v }
	if c.Variant == instrument.VariantFlash2Fast {
		// flash2_fast: the max over S_raw, mb = m_new·sl2,
		// p = ex2(fma(S_raw, sl2, −mb)), and the trace holds S_raw·scale and
		// m·scale.
		sl2 := float32(scale * float32(1.4426950408889634))
		score = func(sRaw float32) float32 { return sRaw }
		base = func(m float32) float32 { return float32(m * sl2) }
		exp = func(v, mb float32) float32 { return ex2(fma32(v, sl2, -mb)) }
		natural = func(v float32) float32 { return float32(v * scale) }
	}
	at := func(m []float32, row, x int) float32 { // a row past N reads as zero
		if row >= c.N {
			return 0
		}
		return m[row*c.D+x]
	}
	same := func(what string, row, x int, got, want float32) {
		if !sameBits(got, want) {
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
					s[cc] = score(mmaSum(0, c.D, func(x int) float64 { return float64(at(in.Q, row, x)) * float64(at(in.K, col, x)) }))
				}
				mx = max(mx, s[cc])
			}
			var mb float32
			if !math.IsInf(float64(mx), -1) {
				mb = base(mx)
			}
			alpha := exp(m, mb)
			p := make([]float32, c.Bc)
			var rs [4]float32
			for cc := range c.Bc {
				p[cc] = exp(s[cc], mb)
			}
			for cc := 0; cc < c.Bc; cc += 2 { // thread (cc%8)/2 holds columns cc and cc+1
				pair := p[cc]
				if cc+1 < c.Bc {
					pair = float32(pair + p[cc+1])
				}
				rs[(cc%8)/2] = float32(rs[(cc%8)/2] + pair)
			}
			for th := range l {
				l[th] = exactFMA32(alpha, l[th], rs[th])
			}
			for x := range c.D {
				o[x] = mmaSum(float32(o[x]*alpha), c.Bc, func(cc int) float64 { return float64(RoundBF16(p[cc])) * float64(at(in.V, j*c.Bc+cc, x)) })
			}
			if j == rec.J {
				for cc := range c.Bc {
					same("S", r, cc, rec.S[r*c.Bc+cc], natural(s[cc]))
					same("P", r, cc, rec.P[r*c.Bc+cc], p[cc])
				}
				same("m_old", r, 0, rec.MOld[r], natural(m))
				same("m_new", r, 0, rec.MNew[r], natural(mx))
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

// mmaSum is acc + Σ term(k) over k < n as the kernels' mma chunks add it:
// 16 exact products at a time, each chunk rounded once to float32 and added
// to acc in float32. Within a chunk the float64 sum runs in mmaChunk's
// order (four partial sums, term k into sum k mod 4, a ragged tail into
// the first, then (s0 + s1) + (s2 + s3)): the order rarely changes a
// chunk's float64 sum, but where it does the mirror must be matched to
// the bit (seed 5207540796287730713 found one).
func mmaSum(acc float32, n int, term func(k int) float64) float32 {
	for k0 := 0; k0 < n; k0 += 16 {
		k1 := min(k0+16, n)
		var s [4]float64
		whole := k0 + (k1-k0)/4*4
		for k := k0; k < whole; k++ {
			s[(k-k0)%4] += term(k)
		}
		for k := whole; k < k1; k++ {
			s[0] += term(k)
		}
		acc = float32(acc + float32((s[0]+s[1])+(s[2]+s[3])))
	}
	return acc
}
