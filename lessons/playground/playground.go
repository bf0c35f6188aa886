// Package playground owns the arithmetic of the online-softmax playground:
// one row of logits split into tiles, the running max m, the running sum l
// and the rescale factor α per tile, in float32, float16 or bfloat16 with
// every intermediate rounded as that type rounds it. The browser computes
// the same thing in static/js/playground_math.js so the playground answers
// as the student types; this Go port is what the server grades a lesson's
// playground checkpoints with, and the tests hold the two to each other.
//
// The settings parse from the same key=value pairs a lesson directive and
// the /playground URL use: logits=3,1,-2,8 tile=2 max=on dtype=f32.
package playground

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Dtype is the floating-point type every intermediate is rounded to.
type Dtype string

const (
	F32  Dtype = "f32"
	F16  Dtype = "f16"
	BF16 Dtype = "bf16"
)

// Dtypes in the order the switch shows them.
var Dtypes = []Dtype{F32, F16, BF16}

// Name is the type as a reader knows it.
func (d Dtype) Name() string {
	return map[Dtype]string{F32: "float32", F16: "float16", BF16: "bfloat16"}[d]
}

// Limits of a row. A row is read on one screen, and a logit past 10⁵ shows
// nothing that 10⁵ does not (float16 already stores it as inf).
const (
	MaxLogits   = 32
	MaxAbsLogit = 1e5
)

// Settings are one state of the playground.
type Settings struct {
	Logits      []float64
	Tile        int // logits per tile
	SubtractMax bool
	Dtype       Dtype
}

// Keys are the settings' names in directives and URLs.
var Keys = []string{"logits", "tile", "max", "dtype"}

// Default is the row the playground opens with when none is given.
var Default = Settings{Logits: []float64{3, 1, -2, 8, 5, 2}, Tile: 2, SubtractMax: true, Dtype: F32}

// Parse reads settings from key=value pairs; an absent key keeps Default's
// value. Each error names the key and the limit it broke.
func Parse(get func(string) (string, bool)) (Settings, error) {
	s := Default
	s.Logits = slices.Clone(Default.Logits)
	var errs []string
	if v, ok := get("logits"); ok {
		s.Logits = nil
		parts := strings.Split(v, ",")
		if len(parts) > MaxLogits || strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Sprintf("logits: from 1 to %d numbers separated by commas, got %d", MaxLogits, len(parts)))
		} else {
			for k, p := range parts {
				x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
				if err != nil || math.IsNaN(x) || math.Abs(x) > MaxAbsLogit {
					errs = append(errs, fmt.Sprintf("logits: logit %d must be a number from %g to %g, got %q", k, -MaxAbsLogit, MaxAbsLogit, p))
					break
				}
				s.Logits = append(s.Logits, x)
			}
		}
	}
	if v, ok := get("tile"); ok {
		t, err := strconv.Atoi(v)
		if err != nil || t < 1 || t > max(len(s.Logits), 1) {
			errs = append(errs, fmt.Sprintf("tile: a whole number from 1 to %d (the row's length), got %q", max(len(s.Logits), 1), v))
		}
		s.Tile = t
	} else {
		s.Tile = min(s.Tile, max(len(s.Logits), 1))
	}
	if v, ok := get("max"); ok {
		switch v {
		case "on":
			s.SubtractMax = true
		case "off":
			s.SubtractMax = false
		default:
			errs = append(errs, fmt.Sprintf("max: on or off, got %q", v))
		}
	}
	if v, ok := get("dtype"); ok {
		if !slices.Contains(Dtypes, Dtype(v)) {
			errs = append(errs, fmt.Sprintf("dtype: f32, f16 or bf16, got %q", v))
		}
		s.Dtype = Dtype(v)
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return s, nil
}

// ParseMap reads settings from a directive's attributes.
func ParseMap(attrs map[string]string) (Settings, error) {
	return Parse(func(k string) (string, bool) { v, ok := attrs[k]; return v, ok })
}

// ParseQuery reads settings from a URL's query.
func ParseQuery(q url.Values) (Settings, error) {
	return Parse(func(k string) (string, bool) { return q.Get(k), q.Has(k) })
}

// LogitsText is the row as the directive and the URL write it.
func (s Settings) LogitsText() string {
	parts := make([]string, len(s.Logits))
	for k, x := range s.Logits {
		parts[k] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Query is the settings as /playground's URL query.
func (s Settings) Query() string {
	on := "off"
	if s.SubtractMax {
		on = "on"
	}
	// Commas kept readable: they are legal in a query.
	return "logits=" + s.LogitsText() + "&tile=" + strconv.Itoa(s.Tile) + "&max=" + on + "&dtype=" + string(s.Dtype)
}

// ---- rounding ----

// f32Overflow is where rounding to float32 gives inf: MaxFloat32 plus half
// an ulp (2¹²⁸ − 2¹⁰³). Checked by hand because Go leaves an out-of-range
// float64 → float32 conversion to the implementation.
var f32Overflow = math.Ldexp(1, 128) - math.Ldexp(1, 103)

// Float32 rounds x to the nearest float32 (ties to even).
func Float32(x float64) float64 {
	if math.Abs(x) >= f32Overflow {
		return math.Copysign(math.Inf(1), x)
	}
	return float64(float32(x))
}

// Float16 rounds x to the nearest IEEE half (ties to even): 11 significant
// bits, subnormals below 2⁻¹⁴, and inf from 65520 up, the midpoint between
// the largest half, 65504, and the 65536 the format cannot hold.
func Float16(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	a := math.Abs(x)
	if a >= 65520 {
		return math.Copysign(math.Inf(1), x)
	}
	_, e := math.Frexp(a) // a = f·2^e with f in [0.5, 1): its leading bit is 2^(e−1)
	e = max(e-1, -14)     // below 2⁻¹⁴ the subnormals share one spacing
	q := math.Ldexp(1, e-10)
	return math.Copysign(math.RoundToEven(a/q)*q, x)
}

// BFloat16 rounds x as a conversion from float32 does: to float32 first,
// then the float32's bits to their top 16, ties to even. Overflow needs no
// case of its own: the carry runs into the exponent and makes inf.
func BFloat16(x float64) float64 {
	f := float32(Float32(x))
	if f != f {
		return x
	}
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return float64(math.Float32frombits(b & 0xffff0000))
}

// Round rounds x to the type d.
func (d Dtype) Round(x float64) float64 {
	switch d {
	case F16:
		return Float16(x)
	case BF16:
		return BFloat16(x)
	}
	return Float32(x)
}

// ---- the row ----

// Tile is one tile's update of the running state.
type Tile struct {
	Start, End int       // logits [Start, End)
	MOld       float64   // m before the tile (−inf at the first)
	MTile      float64   // the tile's largest logit
	MNew       float64   // max(m_old, m_tile)
	Alpha      float64   // exp(m_old − m_new); 1 with the max subtraction off
	P          []float64 // exp(s − m_new), or exp(s) with it off
	L          float64   // α·l_old + Σp, added term by term
}

// Result is the row worked through tile by tile.
type Result struct {
	Stored  []float64 // the logits as the type stores them
	Tiles   []Tile
	Weights []float64 // the online softmax: exp(s − m)/l after the last tile
	Exact   []float64 // the softmax of the logits as given, in float64
	// FirstInf is the logit whose term first makes l infinite (its own
	// exp overflowing, or the sum passing the type's largest value); −1 if
	// l stays finite.
	FirstInf int
	// FirstExpInf is the first logit whose exp(·) alone overflows; −1 if none.
	FirstExpInf int
}

// Run works the row through the online softmax in s.Dtype: every
// subtraction, exp, product, sum and division is rounded to the type.
func Run(s Settings) Result {
	d := s.Dtype
	res := Result{FirstInf: -1, FirstExpInf: -1}
	for _, x := range s.Logits {
		res.Stored = append(res.Stored, d.Round(x))
	}
	m, l := math.Inf(-1), 0.0
	for start := 0; start < len(res.Stored); start += s.Tile {
		end := min(start+s.Tile, len(res.Stored))
		t := Tile{Start: start, End: end, MOld: m, MTile: math.Inf(-1)}
		for _, x := range res.Stored[start:end] {
			t.MTile = max(t.MTile, x)
		}
		t.MNew = max(m, t.MTile)
		base := base(s.SubtractMax, t.MNew)
		t.Alpha = 1
		if s.SubtractMax {
			t.Alpha = d.Round(math.Exp(d.Round(m - base)))
		}
		l = d.Round(t.Alpha * l)
		for k := start; k < end; k++ {
			p := d.Round(math.Exp(d.Round(res.Stored[k] - base)))
			t.P = append(t.P, p)
			if math.IsInf(p, 1) && res.FirstExpInf < 0 {
				res.FirstExpInf = k
			}
			l = d.Round(l + p)
			if math.IsInf(l, 1) && res.FirstInf < 0 {
				res.FirstInf = k
			}
		}
		t.L = l
		m = t.MNew
		res.Tiles = append(res.Tiles, t)
	}
	b := base(s.SubtractMax, m)
	for _, x := range res.Stored {
		res.Weights = append(res.Weights, d.Round(d.Round(math.Exp(d.Round(x-b)))/l))
	}
	res.Exact = Exact(s.Logits)
	return res
}

// base is what the scores are shifted by before exp: the running max, or
// nothing with the subtraction off. A max of −inf (every logit −inf) shifts
// by 0, as the kernels do, so that exp(−inf − (−inf)) never makes a NaN.
func base(subtractMax bool, m float64) float64 {
	if !subtractMax || math.IsInf(m, -1) {
		return 0
	}
	return m
}

// Exact is the softmax of xs in float64, max subtracted: the reference the
// playground shows the online result against.
func Exact(xs []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	out := make([]float64, len(xs))
	var sum float64
	for k, x := range xs {
		out[k] = math.Exp(x - m)
		sum += out[k]
	}
	for k := range out {
		out[k] /= sum
	}
	return out
}
