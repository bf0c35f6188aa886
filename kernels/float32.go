package kernels

import "math"

// The mirrors' float32 arithmetic. Every product and sum is converted to
// float32 on its own, which the Go spec guarantees rounds it and forbids fusing
// it into a multiply-add; the CUDA kernels use __fmul_rn and __fadd_rn for the
// same reason. exp and log are computed in float64 and rounded once; CUDA's
// expf and logf are within 2 ulp of that, which the GPU comparison's bound
// allows for.

var negInf = float32(math.Inf(-1))

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// dot32 is Σ a[k]·b[k] accumulated in order of k, rounding at each step.
func dot32(a, b []float32) float32 {
	var acc float32
	for k := range a {
		acc = float32(acc + float32(a[k]*b[k]))
	}
	return acc
}

// softmaxBase is the value subtracted from scores before exp: the row max, or
// 0 while every score seen is masked, so that a fully masked row gives
// exp(−Inf − 0) = 0 rather than exp(−Inf + Inf) = NaN.
func softmaxBase(m float32) float32 {
	if m == negInf {
		return 0
	}
	return m
}

func fill(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// tileRows copies rows [r0, r0+valid) of an N×d matrix into a zero-filled
// tile of `rows` rows: padding rows read as zeros, as the kernels' predicated
// loads leave them.
func tileRows(m []float32, d, r0, valid, rows int) []float32 {
	t := make([]float32, rows*d)
	copy(t, m[r0*d:(r0+valid)*d])
	return t
}
