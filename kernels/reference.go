package kernels

import "math"

// Reference is exact attention in float64 over float32 inputs: O = softmax(S)V
// with S = QKᵀ/√d, masked above the diagonal when causal, and the row
// log-sum-exp of S. Rows whose every score is masked get O = 0, LSE = −Inf.
// It is the oracle the mirrors and the GPU kernels are held to.
func Reference(in *Inputs, n, d int, causal bool) (o []float64, lse []float64) {
	return attention64(widen(in.Q), widen(in.K), widen(in.V), n, d, causal)
}

// ReferenceOf is Reference for a run of any shape: in.Q holds c's
// Queries() rows, row r at position QueryOffset()+r, against c's N keys
// (a causal mask aligned to the end); o is Queries()×d, lse Queries().
func ReferenceOf(c *Config, in *Inputs) (o []float64, lse []float64) {
	nq := c.Queries()
	return attentionAt64(widen(in.Q), widen(in.K), widen(in.V), nq, c.N, c.D, c.Causal, nq, nil)
}

// widen is x in float64, exactly.
func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Reference64 is Reference on float64 inputs (q, k, v: n×d row-major): the
// forward the float64 gradient oracle (kernelstest.ReferenceGrad) and its
// finite differences are built on, so that the oracle's forward is this one
// and no copy of it.
func Reference64(q, k, v []float64, n, d int, causal bool) (o []float64, lse []float64) {
	return attention64(q, k, v, n, d, causal)
}

// Scores64 fills s with row r of Reference64's S = QKᵀ/√d (−Inf where
// causal masks it) and returns the row's max, for the gradient oracle.
func Scores64(q, k []float64, n, d int, causal bool, r int, s []float64) float64 {
	return scores64(q, k, n, d, causal, r, s)
}

// attention64 is Reference on float64 inputs (q, k, v: n×d row-major).
func attention64(q, k, v []float64, n, d int, causal bool) (o []float64, lse []float64) {
	return attentionRows64(q, k, v, n, d, causal, n, nil)
}

// attentionRows64 is attention64 of rows [0, rows) alone (each row's O and
// LSE depend on that row of Q and all of K and V); the rest stay zero. It
// stops early, every 64 rows, once stop (if not nil) says so.
func attentionRows64(q, k, v []float64, n, d int, causal bool, rows int, stop func() bool) (o []float64, lse []float64) {
	return attentionAt64(q, k, v, n, n, d, causal, rows, stop)
}

// attentionAt64 is attentionRows64 for nq query rows (q: nq×d) against n
// keys, query row r at position n−nq+r.
func attentionAt64(q, k, v []float64, nq, n, d int, causal bool, rows int, stop func() bool) (o []float64, lse []float64) {
	o = make([]float64, nq*d)
	lse = make([]float64, nq)
	s := make([]float64, n)
	for r := 0; r < rows; r++ {
		if r%64 == 0 && stop != nil && stop() {
			break
		}
		m := scoresAt64(q[r*d:(r+1)*d], k, n, causal, n-nq+r, s)
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
			vc := v[c*d : (c+1)*d]
			for x := range row {
				row[x] += p * vc[x]
			}
		}
		for x := range row {
			row[x] /= l
		}
		lse[r] = m + math.Log(l)
	}
	return o, lse
}

// scores64 fills s with row r of S = QKᵀ/√d (−Inf where causal masks it)
// and returns the row's max.
func scores64(q, k []float64, n, d int, causal bool, r int, s []float64) float64 {
	return scoresAt64(q[r*d:(r+1)*d], k, n, causal, r, s)
}

// scoresAt64 fills s with the scores of query qr, at position pos, against
// the n keys of k (−Inf past pos where causal) and returns their max.
func scoresAt64(qr, k []float64, n int, causal bool, pos int, s []float64) float64 {
	d := len(qr)
	scale := 1 / math.Sqrt(float64(d))
	m := math.Inf(-1)
	for c := 0; c < n; c++ {
		if causal && c > pos {
			s[c] = math.Inf(-1)
			continue
		}
		var dot float64
		kc := k[c*d : (c+1)*d]
		for x := range qr {
			dot += qr[x] * kc[x]
		}
		s[c] = dot * scale
		m = math.Max(m, s[c])
	}
	return m
}

// probabilities is P = softmax(S) (N×N), exact in float64 from the row's
// log-sum-exp and rounded once to float32: P_rc = exp(S_rc − LSE_r), 0
// where causal masks it; rows [0, rows) alone, the rest zero; it stops
// early as attentionRows64 does. It writes float32 directly because at
// N=4096 a float64 N×N and its rounding copy cost half a second of page
// faults, which a stopped run would pay after its client left.
func probabilities(q, k, lse []float64, n, d int, causal bool, rows int, stop func() bool) []float32 {
	p := make([]float32, n*n) // untouched rows stay unfaulted zero pages
	s := make([]float64, n)
	for r := range rows {
		if r%64 == 0 && stop != nil && stop() {
			break
		}
		scores64(q, k, n, d, causal, r, s)
		for c := range n {
			p[r*n+c] = float32(math.Exp(s[c] - lse[r]))
		}
	}
	return p
}
