package kernels

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// backwardConfig draws randomConfig's runs of flash2_bwd with every q-tile
// traced, so the trace holds every gradient; the batch-heads may be a part.
func backwardConfig(rng *rand.Rand) Config {
	c := withVariant(instrument.VariantFlash2Bwd)(rng)
	c.TraceQ = instrument.Range{}
	return c
}

// TestFlash2BwdInvariants checks what the backward's trace must hold by the
// algebra, record by record: P recomputed from the forward's L sums to one
// over a row's steps, with no running max; D = rowsum(dO ∘ O) equals
// rowsum(P ∘ dP); dS = P ∘ (dP − D) where it is written; dQ is the sum of
// its steps' parts times the scale; dK and dV grow step by step by dSᵀQ_i
// and PᵀdO_i.
//
// flash2_bwd_mma too, with its products' bf16 operands.
func TestFlash2BwdInvariants(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	flash := []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantFlash2BwdMMA}
	draw := func(rng *rand.Rand) Config {
		c := backwardConfig(rng)
		c.Variant = flash[rng.IntN(len(flash))]
		return c
	}
	for _, c := range runsOf(rng, flash, 60, 15, draw) {
		c.TraceQ = instrument.Range{} // a block's first traced step is its first
		_, recs := runTrace(t, c)
		bh := c.TracedBH().Lo
		in := InputsFor(&c, bh)
		// The operands of dV's and dK's products: P and dS themselves, or
		// rounded to bf16 on the tensor cores. There D is taken from O
		// rounded to bf16, which moves it by up to 2⁻⁸·Σ|dO||O| (bf16 keeps
		// 8 significant bits) from rowsum(P∘dP).
		operand, bf16 := func(x float32) float32 { return x }, Info(c.Variant).DType == instrument.DTypeBF16
		if bf16 {
			operand = RoundBF16
		}
		mScore := maxAbsScore(in, c.N, c.D, c.Causal)
		rowP := make([]float64, c.N)      // Σ P over the row
		rowPdP := make([]float64, c.N)    // Σ P·dP over the row
		parts := make([]float32, c.N*c.D) // Σ over kv-tiles of the steps' dQ parts, in kv-tile order
		delta := make([]float32, c.N)
		var prev map[int]*instrument.Record // each block's previous step
		prev = map[int]*instrument.Record{}
		for _, r := range recs {
			if r.BH != bh {
				continue
			}
			switch r.Kind {
			case instrument.KindBwdPre:
				for row := range r.RowsValid {
					delta[r.I*c.Br+row] = r.Delta[row]
				}
			case instrument.KindBwdStep:
				for row := range r.RowsValid {
					g := r.I*c.Br + row
					for col := range r.ColsValid {
						e := row*c.Bc + col
						rowP[g] += float64(r.P[e])
						rowPdP[g] += float64(r.P[e]) * float64(r.DP[e])
						if want := float32(r.P[e] * float32(r.DP[e]-delta[g])); r.DS[e] != want {
							t.Fatalf("%+v step (%d,%d) [%d,%d]: dS %v, P∘(dP−D) %v", c, r.I, r.J, row, col, r.DS[e], want)
						}
					}
					for x := range c.D {
						parts[g*c.D+x] = float32(parts[g*c.D+x] + r.DQ[row*c.D+x])
					}
				}
				// The accumulators grow by this step's products alone.
				p := prev[r.J]
				for col := range r.ColsValid {
					for x := range c.D {
						var wantV, wantK float64
						if p != nil {
							wantV, wantK = float64(p.DV[col*c.D+x]), float64(p.DK[col*c.D+x])
						}
						var size float64
						for row := range r.RowsValid {
							q, do := float64(in.Q[(r.I*c.Br+row)*c.D+x]), float64(in.DO[(r.I*c.Br+row)*c.D+x])
							pe, dse := float64(operand(r.P[row*c.Bc+col])), float64(operand(r.DS[row*c.Bc+col]))
							wantV += pe * do
							wantK += dse * q
							size += math.Abs(pe*do) + math.Abs(dse*q)
						}
						if p != nil {
							size += math.Abs(float64(p.DV[col*c.D+x])) + math.Abs(float64(p.DK[col*c.D+x]))
						}
						bound := 4*float64(c.N+2)*eps32*size + float64(c.N+2)*0x1p-149 // subnormal sums round absolutely
						if !(math.Abs(float64(r.DV[col*c.D+x])-wantV) <= bound && math.Abs(float64(r.DK[col*c.D+x])-wantK) <= bound) {
							t.Fatalf("%+v step (%d,%d) [%d,%d]: dV %v dK %v, want %v %v ± %.3g", c, r.I, r.J, col, x, r.DV[col*c.D+x], r.DK[col*c.D+x], wantV, wantK, bound)
						}
					}
				}
				prev[r.J] = r
			case instrument.KindBwdDQ:
				for e := range r.RowsValid * c.D {
					g := r.I*c.Br*c.D + e
					if want := float32(parts[g] * c.Scale()); r.DQ[e] != want {
						t.Fatalf("%+v dQ of q-tile %d [%d]: %v, the steps' parts × scale give %v", c, r.I, e, r.DQ[e], want)
					}
				}
			}
		}
		tol := 1e-5 * math.Max(1, mScore/20) * float64(c.Tc()+1)
		for g := range c.N {
			if !(math.Abs(rowP[g]-1) <= tol) {
				t.Fatalf("%+v row %d: P recomputed from L sums to %v over the row", c, g, rowP[g])
			}
			roundedO := 0.0
			if bf16 {
				for x := range c.D {
					roundedO += 0x1p-8 * math.Abs(float64(in.DO[g*c.D+x])*float64(in.O[g*c.D+x]))
				}
			}
			if !(math.Abs(rowPdP[g]-float64(delta[g])) <= tol*(1+math.Abs(float64(delta[g]))+rowAbsDP(recs, &c, bh, g))+roundedO) {
				t.Fatalf("%+v row %d: D = %v, rowsum(P∘dP) = %v", c, g, delta[g], rowPdP[g])
			}
		}
	}
}

// rowAbsDP is max |dP| over row g's steps: the scale of rowsum(P∘dP)'s
// rounding.
func rowAbsDP(recs []*instrument.Record, c *Config, bh, g int) float64 {
	var m float64
	for _, r := range recs {
		if r.Kind != instrument.KindBwdStep || r.BH != bh || g/c.Br != r.I {
			continue
		}
		for col := range r.ColsValid {
			m = math.Max(m, math.Abs(float64(r.DP[(g%c.Br)*c.Bc+col])))
		}
	}
	return m
}

// TestFlash2BwdTraceOrder (flash2_bwd and flash2_bwd_mma): every q-tile's pre first; then each kv-tile's
// block, q-tiles in order from the first that sees it (under a causal mask
// none wholly above the diagonal) to the last; then every q-tile's dq.
func TestFlash2BwdTraceOrder(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	flash := []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantFlash2BwdMMA}
	draw := func(rng *rand.Rand) Config {
		return withVariant(flash[rng.IntN(len(flash))])(rng)
	}
	for _, c := range runsOf(rng, flash, 100, 20, draw) {
		_, recs := runTrace(t, c)
		var want []string
		bhs, qs := c.TracedBH(), c.TracedQ()
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			want = append(want, fmt.Sprintf("inputs %d", bh))
		}
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			for i := qs.Lo; i < qs.Hi; i++ {
				want = append(want, fmt.Sprintf("bwd_pre %d %d", bh, i))
			}
		}
		for j := range c.Tc() {
			for bh := bhs.Lo; bh < bhs.Hi; bh++ {
				for i := qs.Lo; i < qs.Hi; i++ {
					if !tileFullyMasked(&c, i, j) {
						want = append(want, fmt.Sprintf("bwd_step %d %d %d", bh, i, j))
					}
				}
			}
		}
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			for i := qs.Lo; i < qs.Hi; i++ {
				want = append(want, fmt.Sprintf("bwd_dq %d %d", bh, i))
			}
		}
		var got []string
		for _, r := range recs {
			switch r.Kind {
			case instrument.KindInputs:
				got = append(got, fmt.Sprintf("inputs %d", r.BH))
			case instrument.KindBwdStep:
				got = append(got, fmt.Sprintf("bwd_step %d %d %d", r.BH, r.I, r.J))
			default:
				got = append(got, fmt.Sprintf("%s %d %d", r.Kind, r.BH, r.I))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%+v: records\n%v\nwant\n%v", c, got, want)
		}
	}
}

// TestBackwardMirrorsStopWithTheirRun: a backward mirror walks a whole
// batch-head (at N=4096, d=128, tracing the last q-tile, 12 to 18 s of
// float32 in Go) and must stop soon after its client leaves, reporting
// the run cut short rather than a finished trace.
//
// Not parallel: it measures how soon a run stops, and the package's other
// tests (held back until the serial ones are done) would only slow it.
// Without the stops each run takes 10–18 s here; with them, well under a
// second alone, and 3 s was once exceeded under a whole suite's load on two
// cores, so the limit is 5 s.
func TestBackwardMirrorsStopWithTheirRun(t *testing.T) {
	for _, v := range []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantNaiveBwd} {
		c := Config{Variant: v, N: MaxN, D: 128, Br: 64, Bc: 64, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal,
			Seed: testrand.New(t).Uint64(), TraceQ: instrument.Range{Lo: MaxN/64 - 1, Hi: MaxN / 64}}
		r, err := c.Check()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		records := 0
		err = RunMirror(ctx, r, func(*instrument.Record) error { records++; return nil })
		cancel()
		if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
			t.Errorf("%s stopped at 100 ms: returned %v after %v, %d records", v, err, took, records)
		}
	}
}
