package playground

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"flashstep/internal/testrand"
)

// halves is every non-negative finite float16, decoded from its bits by
// the format's definition, independently of Float16.
func halves() (vals []float64, bits []uint16) {
	for b := uint16(0); b <= 0x7bff; b++ {
		exp, frac := int(b>>10), float64(b&0x3ff)
		v := math.Ldexp(frac, -24) // subnormal: frac·2⁻²⁴
		if exp > 0 {
			v = math.Ldexp(1024+frac, exp-25)
		}
		vals, bits = append(vals, v), append(bits, b)
	}
	return vals, bits
}

// nearest is the nearest of the sorted vals to x ≥ 0, ties to the one with
// the even last bit.
func nearest(x float64, vals []float64, bits []uint16) float64 {
	k := sort.SearchFloat64s(vals, x)
	if k == len(vals) {
		return vals[k-1]
	}
	if vals[k] == x || k == 0 {
		return vals[k]
	}
	lo, hi := vals[k-1], vals[k]
	switch {
	case x-lo < hi-x:
		return lo
	case hi-x < x-lo:
		return hi
	case bits[k-1]&1 == 0:
		return lo
	}
	return hi
}

func TestFloat16KnownValues(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	for x, want := range map[float64]float64{
		65504:                    65504, // the largest half
		65519.99:                 65504,
		65520:                    inf, // the midpoint to 65536 rounds up, past the format
		-65520:                   -inf,
		1e6:                      inf,
		1 + math.Ldexp(1, -11):   1,                     // a tie: to the even neighbour, 1
		1 + 3*math.Ldexp(1, -11): 1 + math.Ldexp(1, -9), // a tie: up to the even one
		math.Ldexp(1, -24):       math.Ldexp(1, -24),    // the smallest subnormal
		math.Ldexp(1, -25):       0,                     // halfway to it: to even, 0
		3 * math.Ldexp(1, -26):   math.Ldexp(1, -24),
		0.1:                      0.0999755859375,
		-2.5:                     -2.5,
	} {
		if got := Float16(x); got != want {
			t.Errorf("Float16(%g) = %g, want %g", x, got, want)
		}
	}
	if !math.IsNaN(Float16(math.NaN())) {
		t.Error("Float16(NaN) is not NaN")
	}
}

// Float16 agrees with the nearest of all 31,744 finite halves, for random x
// across every binade, ties included.
func TestFloat16IsNearest(t *testing.T) {
	t.Parallel()
	vals, bits := halves()
	rng := testrand.New(t)
	for range 200000 {
		x := math.Ldexp(rng.Float64()+0.5, rng.IntN(44)-30)
		if rng.IntN(8) == 0 { // exact midpoints between neighbours
			k := rng.IntN(len(vals) - 1)
			x = (vals[k] + vals[k+1]) / 2
		}
		want := inf(x)
		if x < 65520 {
			want = nearest(x, vals, bits)
		}
		if got := Float16(x); got != want {
			t.Fatalf("Float16(%v) = %v, want %v", x, got, want)
		}
		if got := Float16(-x); got != -want {
			t.Fatalf("Float16(%v) = %v, want %v", -x, got, -want)
		}
	}
}

func inf(float64) float64 { return math.Inf(1) }

// BFloat16 is the nearest float32 whose low 16 bits are zero, ties to even,
// for random float32s; known values pin the edges.
func TestBFloat16(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 200000 {
		f := math.Float32frombits(rng.Uint32() &^ (1 << 31))
		if f != f || math.IsInf(float64(f), 0) {
			continue
		}
		b := math.Float32bits(f)
		lo := b &^ 0xffff
		down, up := float64(math.Float32frombits(lo)), float64(math.Float32frombits(lo+0x10000))
		upAt := up // where the next bfloat16 would be: 2¹²⁸ past the largest
		if math.IsInf(up, 1) {
			upAt = math.Ldexp(1, 128)
		}
		x := float64(f)
		want := up
		if x-down < upAt-x || x-down == upAt-x && lo&0x10000 == 0 {
			want = down
		}
		if got := BFloat16(x); got != want {
			t.Fatalf("BFloat16(%v) = %v, want %v", x, got, want)
		}
	}
	maxBF16 := float64(math.Float32frombits(0x7f7f0000)) // 3.3895e38
	for x, want := range map[float64]float64{
		1 + math.Ldexp(1, -8):     1,
		1 + 3*math.Ldexp(1, -8):   1 + math.Ldexp(1, -6),
		maxBF16:                   maxBF16,
		math.MaxFloat32:           math.Inf(1),
		math.Ldexp(1, 128):        math.Inf(1),
		-math.Ldexp(1, 128):       math.Inf(-1),
		float64(float32(math.Pi)): 3.140625,
	} {
		if got := BFloat16(x); got != want {
			t.Errorf("BFloat16(%g) = %g, want %g", x, got, want)
		}
	}
}

// exp overflows where each type's largest value runs out: past ln 65520 ≈
// 11.0903 in float16, ln(2¹²⁸ − 2¹⁰³) ≈ 88.7228 in float32, and a little
// earlier, ln((2 − 2⁻⁸)·2¹²⁷) ≈ 88.7209, in bfloat16.
func TestExpOverflow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d        Dtype
		ok, over float64
	}{{F16, 11.09, 11.0904}, {F32, 88.7228, 88.7229}, {BF16, 88.72, 88.7215}} {
		if v := c.d.Round(math.Exp(c.ok)); math.IsInf(v, 0) {
			t.Errorf("%s: exp(%g) = inf, want finite", c.d, c.ok)
		}
		if v := c.d.Round(math.Exp(c.over)); !math.IsInf(v, 1) {
			t.Errorf("%s: exp(%g) = %g, want inf", c.d, c.over, v)
		}
	}
	if v := Float32(math.Exp(88.722)); math.IsInf(v, 0) {
		t.Error("float32 overflows at 88.722, where only bfloat16 does")
	}
}

func randomRow(rng *rand.Rand, n int, scale float64) []float64 {
	row := make([]float64, n)
	for k := range row {
		row[k] = math.Round(rng.NormFloat64()*scale*100) / 100
	}
	return row
}

// With the max subtracted the online result is the softmax of the logits
// as the type stores them, to the type's precision, for random rows and tile widths; nothing is NaN or inf.
func TestOnlineMatchesExact(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range []struct {
		d   Dtype
		tol float64 // per weight, relative to the largest weight
	}{{F32, 1e-5}, {F16, 1e-2}, {BF16, 6e-2}} {
		for range 300 {
			n := 1 + rng.IntN(MaxLogits)
			s := Settings{Logits: randomRow(rng, n, 1+rng.Float64()*40), Tile: 1 + rng.IntN(n), SubtractMax: true, Dtype: c.d}
			r := Run(s)
			if len(r.Tiles) != (n+s.Tile-1)/s.Tile || r.FirstInf >= 0 {
				t.Fatalf("%+v: %d tiles, first inf %d", s, len(r.Tiles), r.FirstInf)
			}
			var sum float64
			exact := Exact(r.Stored)
			for k, w := range r.Weights {
				sum += w
				if math.IsNaN(w) || math.Abs(w-exact[k]) > c.tol {
					t.Fatalf("%s %v tile %d: weight %d = %g, exact %g", c.d, s.Logits, s.Tile, k, w, exact[k])
				}
			}
			if math.Abs(sum-1) > c.tol*float64(n) {
				t.Fatalf("%s %v: weights sum to %g", c.d, s.Logits, sum)
			}
			// m after the last tile is the row's max, and l ≥ 1.
			last := r.Tiles[len(r.Tiles)-1]
			if want := maxOf(r.Stored); last.MNew != want || !(last.L >= 1) {
				t.Fatalf("%s %v: m = %g (want %g), l = %g", c.d, s.Logits, last.MNew, want, last.L)
			}
		}
	}
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// A hand-worked row, float32, against float64 arithmetic.
func TestWorkedRow(t *testing.T) {
	t.Parallel()
	r := Run(Settings{Logits: []float64{3, 1, -2, 8}, Tile: 2, SubtractMax: true, Dtype: F32})
	e := math.Exp
	l0 := 1 + e(-2)
	want := []Tile{
		{MOld: math.Inf(-1), MTile: 3, MNew: 3, Alpha: 0, L: l0},
		{MOld: 3, MTile: 8, MNew: 8, Alpha: e(-5), L: e(-5)*l0 + e(-10) + 1},
	}
	for k, w := range want {
		g := r.Tiles[k]
		if g.MOld != w.MOld || g.MTile != w.MTile || g.MNew != w.MNew || math.Abs(g.Alpha-w.Alpha) > 1e-7 || math.Abs(g.L-w.L) > 1e-6 {
			t.Errorf("tile %d: %+v, want %+v", k, g, w)
		}
	}
}

// Without the max subtraction, l overflows at the logit where the type
// runs out, and the weights become NaN (inf/inf) or 0 (finite/inf).
func TestOverflowWithoutMax(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 200 {
		n := 4 + rng.IntN(12)
		row := randomRow(rng, n, 2)
		at := rng.IntN(n)
		row[at] = 89 + rng.Float64()*10 // past float32's and bfloat16's limit
		s := Settings{Logits: row, Tile: 1 + rng.IntN(n), Dtype: F32}
		r := Run(s)
		if r.FirstInf != at || r.FirstExpInf != at {
			t.Fatalf("%v: first inf at %d (exp %d), want %d", row, r.FirstInf, r.FirstExpInf, at)
		}
		for k, w := range r.Weights {
			if k == at && !math.IsNaN(w) || k != at && w != 0 {
				t.Fatalf("%v: weight %d = %g", row, k, w)
			}
		}
		s.SubtractMax = true
		if r := Run(s); r.FirstInf >= 0 || math.IsNaN(r.Weights[at]) {
			t.Fatalf("%v: with the max subtracted l still overflows at %d", row, r.FirstInf)
		}
		// float16 overflows earlier: at the first logit past ln 65520 ≈ 11.09,
		// or where the sum of smaller terms passes 65504.
		s.SubtractMax, s.Dtype = false, F16
		r = Run(s)
		want, sum := -1, 0.0
		for k, x := range row {
			sum = Float16(sum + Float16(math.Exp(Float16(x))))
			if math.IsInf(sum, 1) {
				want = k
				break
			}
		}
		if r.FirstInf != want || want < 0 || want > at {
			t.Fatalf("%v float16: first inf at %d, want %d (≤ %d)", row, r.FirstInf, want, at)
		}
	}
	// Three exp(10) = 22026 are each fine in float16; their sum is not.
	r := Run(Settings{Logits: []float64{10, 10, 10}, Tile: 3, Dtype: F16})
	if r.FirstInf != 2 || r.FirstExpInf != -1 {
		t.Errorf("10,10,10 in float16: first inf %d, first exp inf %d; want 2, -1", r.FirstInf, r.FirstExpInf)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	s, err := ParseMap(map[string]string{"logits": "3, 1,-2,8.5", "tile": "3", "max": "off", "dtype": "bf16"})
	if err != nil || s.LogitsText() != "3,1,-2,8.5" || s.Tile != 3 || s.SubtractMax || s.Dtype != BF16 {
		t.Fatalf("%+v %v", s, err)
	}
	if s.Query() != "logits=3,1,-2,8.5&tile=3&max=off&dtype=bf16" {
		t.Errorf("query %s", s.Query())
	}
	for attrs, want := range map[string]string{
		"logits=":         "logits: from 1 to 32",
		"logits=1,x":      "logit 1 must be a number",
		"logits=1,NaN":    "logit 1 must be a number",
		"logits=1,200000": "from -100000 to 100000",
		"logits=" + strings.Repeat("1,", 32) + "1": "from 1 to 32",
		"logits=1,2 tile=3":                        "tile: a whole number from 1 to 2",
		"tile=0":                                   "tile: a whole number",
		"max=maybe":                                "max: on or off",
		"dtype=f64":                                "dtype: f32, f16 or bf16",
	} {
		m := map[string]string{}
		for _, kv := range strings.Fields(attrs) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		if _, err := ParseMap(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", attrs, err, want)
		}
	}
}
