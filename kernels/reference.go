package kernels

import "math"

// Reference is exact attention in float64 over float32 inputs: O = softmax(S)V
// with S = QKᵀ/√d, masked above the diagonal when causal, and the row
// log-sum-exp of S. Rows whose every score is masked get O = 0, LSE = −Inf.
// It is the oracle the mirrors and the GPU kernels are held to.
func Reference(in *Inputs, n, d int, causal bool) (o []float64, lse []float64) {
	o = make([]float64, n*d)
	lse = make([]float64, n)
	scale := 1 / math.Sqrt(float64(d))
	s := make([]float64, n)
	for r := 0; r < n; r++ {
		m := math.Inf(-1)
		q := in.Q[r*d : (r+1)*d]
		for c := 0; c < n; c++ {
			if causal && c > r {
				s[c] = math.Inf(-1)
				continue
			}
			var dot float64
			k := in.K[c*d : (c+1)*d]
			for x := range q {
				dot += float64(q[x]) * float64(k[x])
			}
			s[c] = dot * scale
			m = math.Max(m, s[c])
		}
		if math.IsInf(m, -1) {
			lse[r] = m
			continue
		}
		var l float64
		row := o[r*d : (r+1)*d]
		for c := 0; c < n; c++ {
			p := math.Exp(s[c] - m)
			l += p
			if p == 0 {
				continue
			}
			v := in.V[c*d : (c+1)*d]
			for x := range row {
				row[x] += p * float64(v[x])
			}
		}
		for x := range row {
			row[x] /= l
		}
		lse[r] = m + math.Log(l)
	}
	return o, lse
}
