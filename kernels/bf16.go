package kernels

import "math"

// The bf16 kernels' arithmetic, as the mirrors model it. A bf16 value is held
// as the float32 of the same value (bf16 is float32 with the low 16 bits of
// the significand dropped), so that the inputs record, the float64 reference
// and the mirror all see exactly the numbers the GPU saw.

// RoundBF16 rounds x to bf16, to nearest with ties to even, as CUDA's
// __float2bfloat16_rn (cvt.rn.bf16.f32) does: subnormals are kept, a value
// past bf16's largest becomes ±Inf, NaN stays NaN.
func RoundBF16(x float32) float32 {
	b := math.Float32bits(x)
	if x != x {
		return math.Float32frombits(b | 0x00400000) // quiet, whatever the payload
	}
	// Adding 0x7FFF plus the lowest kept bit carries into the kept bits
	// exactly when the dropped half is above one half, or equal to it with
	// the kept part odd. The carry may run into the exponent, which is the
	// right answer too (up to the next binade, or to Inf).
	b += 0x7FFF + (b>>16)&1
	return math.Float32frombits(b &^ 0xFFFF)
}

// BF16Bits rounds every x to bf16 and returns the 16-bit patterns, for an
// upload to a bf16 kernel. For inputs from InputsFor the rounding changes
// nothing: they are bf16 values already.
func BF16Bits(x []float32) []uint16 {
	out := make([]uint16, len(x))
	for k, v := range x {
		out[k] = uint16(math.Float32bits(RoundBF16(v)) >> 16)
	}
	return out
}

func roundBF16All(x []float32) []float32 {
	out := make([]float32, len(x))
	for k, v := range x {
		out[k] = RoundBF16(v)
	}
	return out
}

// fma32 is the float32 fused multiply-add a·b + c, rounded once, as
// fma.rn.f32 computes it. float32(math.FMA(...)) would round twice (to
// float64, then to float32) and is wrong when the first rounding lands on a
// float32 midpoint. Here a·b is exact in float64 (24 + 24 significant bits),
// s = a·b + c is rounded to float64 with its error e recovered exactly
// (TwoSum), and only when s is a float32 midpoint does e, through its sign,
// decide the direction. Elsewhere float32(s) is already correct: float32
// midpoints are float64 values, and rounding to float64 is monotone, so s
// lies on the same side of every midpoint as the exact sum.
func fma32(a, b, c float32) float32 {
	x, y, z := float64(a), float64(b), float64(c)
	if math.IsInf(x, 0) || math.IsInf(y, 0) || math.IsInf(z, 0) || x != x || y != y || z != z {
		return float32(math.FMA(x, y, z)) // IEEE's Inf and NaN rules; no rounding involved
	}
	p := float64(x * y) // exact
	s := float64(p + z)
	// TwoSum: s + e = p + z exactly. The explicit conversions keep Go from
	// fusing any of these operations.
	bv := float64(s - p)
	e := float64(float64(p-float64(s-bv)) + float64(z-bv))
	r := float32(s)
	if e == 0 || float64(r) == s {
		return r // s is the exact sum, or a float32 that e (below s's ulp) cannot move
	}
	lo, hi := r, r
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if s-f32Value(lo) != f32Value(hi)-s {
		return r // not a midpoint
	}
	if e > 0 {
		return hi
	}
	return lo
}

// f32Value is v as a real number, with ±Inf standing for ±2¹²⁸, where the
// float32 overflow rounding puts them (the midpoint below is 2¹²⁸ − 2¹⁰³).
func f32Value(v float32) float64 {
	if math.IsInf(float64(v), 0) {
		return math.Copysign(math.Ldexp(1, 128), float64(v))
	}
	return float64(v)
}

// ex2 models ex2.approx.ftz.f32: 2^x, with subnormal inputs read as zero and
// subnormal results flushed to zero. The mirror computes it in float64 and
// rounds once, so it is within half an ulp of 2^x; the GPU's ex2.approx is
// within 2 ulp of the correctly rounded result (PTX ISA, ex2), so the two may
// differ by a couple of ulp, which the GPU comparison's bound allows for.
func ex2(x float32) float32 {
	if math.Abs(float64(x)) < 0x1p-126 {
		return 1 // a subnormal (or zero) input is read as zero
	}
	r := float32(math.Exp2(float64(x)))
	if r < 0x1p-126 {
		return 0 // a subnormal result is flushed (+0: 2^x is never negative)
	}
	return r
}

// mmaChunk adds one m16n8k16 product to a float32 accumulator: the k-term
// dot product (k ≤ 16) of bf16 values a[i]·b[i·stride]. Each product of two
// bf16 is exact (8 + 8 significant bits); the model sums them in float64 and
// rounds once to float32, then adds that to the accumulator in float32.
// mma.sync leaves the order (and the intermediate precision) of its internal
// sum unspecified, so this is one admissible order, not the tensor core's:
// the GPU comparison's bound allows for any other.
func mmaChunk(acc float32, a []float32, b []float32, stride int) float32 {
	var sum float64
	if stride == 1 { // the mirrors' layout: one bounds check, not one a term
		b = b[:len(a)]
		// Four partial sums, so the float64 adds do not wait on each
		// other (the mirrors spend a fifth of their time here). Each is
		// exact while the terms' exponents lie within about 37 bits of
		// each other, as the one running sum was, so the order rarely
		// changes the result; where it does, it is another admissible one.
		var s0, s1, s2, s3 float64
		i := 0
		for ; i+4 <= len(a); i += 4 {
			s0 += float64(a[i]) * float64(b[i])
			s1 += float64(a[i+1]) * float64(b[i+1])
			s2 += float64(a[i+2]) * float64(b[i+2])
			s3 += float64(a[i+3]) * float64(b[i+3])
		}
		for ; i < len(a); i++ {
			s0 += float64(a[i]) * float64(b[i])
		}
		sum = (s0 + s1) + (s2 + s3)
		return float32(acc + float32(sum))
	}
	for i, x := range a {
		sum += float64(x) * float64(b[i*stride])
	}
	return float32(acc + float32(sum))
}

// transposed is the rows×cols matrix m laid out column by column, so that a
// product walking one of m's columns reads it contiguously (the mirrors'
// sums are the same, term by term, in the same order).
func transposed(m []float32, rows, cols int) []float32 {
	t := make([]float32, rows*cols)
	for r := range rows {
		for c, x := range m[r*cols : (r+1)*cols] {
			t[c*rows+r] = x
		}
	}
	return t
}
