package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2 on tensor cores, bf16: the CPU mirror of flash2_fast.cu.
//
// The loop is flash2's (one block per batch-head and q-tile, the kv-tiles in
// order, causal tiles above the diagonal skipped); the arithmetic is the
// kernel's, operation by operation, as its PTX has it:
//
//	Q, K, V    bf16 (InputsFor rounds them; the tiles are rounded again,
//	           which changes nothing, so the mirror holds for any inputs)
//	S_raw      float32, d/16 mma chunks of 16 exact bf16 products (mmaChunk)
//	masks      −Inf where col ≥ N, or causal and col > row
//	m_new      max(m_old, max_c S_raw), raw units
//	sl2        float32(scale·float32(log2 e))
//	mb         float32(m_new·sl2), 0 while m_new = −Inf
//	α          ex2(fma(m_old, sl2, −mb))
//	p          ex2(fma(S_raw, sl2, −mb))
//	l_t        fma(α, l_t, rs_t): nvcc contracts the .cu's l·α + rs into one
//	           fma.rn.f32; rs_t = Σ_ni (p0 + p1) over thread t's columns
//	           ni·8+2t and ni·8+2t+1, in atom order, every add float32
//	l          (l_0 + l_1) + (l_2 + l_3), where the trace or the end needs it
//	O          float32(O·α), then Bc/16 mma chunks of bf16(p)·V
//	end        inv = float32(1/l), out = float32(O·inv),
//	           LSE = fma(m_new, scale, logf(l))
//
// The trace is in natural-log units as flash2's: S = S_raw·scale and
// m = m_raw·scale (float32 products), P the float32 p before its rounding to
// bf16, α, the full l and O after the step; the epilogue's O is O·inv in
// float32 (the kernel stores it to device memory rounded to bf16).
//
// The kernel runs Br in whole 16-row atoms and Bc in pairs of 8-column
// atoms; the mirror runs any shape, with a shorter last chunk where d or Bc
// is not a multiple of 16 and a partial last column atom where Bc is not a
// multiple of 8 (its missing columns add nothing).
//
// flash2_mma (rung 5) runs this same block walk; where the two kernels'
// softmaxes part (the units of S and m, the exponential, the LSE) is a
// softmaxForm: exp2Form here, naturalForm in flash2_mma.go.

// log2e32 is log2 e as the kernel's float literal 1.4426950408889634f.
// flash2FastRung is the ladder's sixth rung.
var flash2FastRung = &VariantInfo{
	Variant:       instrument.VariantFlash2Fast,
	Title:         "FlashAttention-2, tensor cores (bf16)", // the stepper's variant select holds about 50 characters (layout_test.go measures it)
	Summary:       "FlashAttention-2's loop on tensor cores: bf16 Q, K, V and P through mma.sync with float32 accumulation, exp2 with the scale folded in.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          6,
	Gist:          "FlashAttention-2 on tensor cores, tuned",
	Idea:          "What makes it fast: shared memory XOR-swizzled so ldmatrix hits no bank twice, K and V streamed by cp.async while the previous product runs, exp2 with the scale folded in, P packed to bf16 as it is made, 128-row tiles of 4 warps that reuse each K and V fragment twice, causal tiles above the diagonal skipped and only the diagonal ones masked.",
	Bench:         true,
	StepRun:       "/step?variant=flash2_fast&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#003a99",
	GPURate:       250e12, CPURate: 0.4e9,
	// The fastest tiles measured per head dim (docs/LADDER.md), 4 warps;
	// each compiled as a plain and a causal kernel (TestInstancesMatchSource
	// checks flash2_fast.cu agrees).
	Tiles: []Tile{{128, 128, 64, 128}, {128, 48, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH2_FAST_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads/32)
	},
	Launches: func(c *Config, t Tile) Launches {
		name := fmt.Sprintf("flash2_fast_br%d_bc%d_d%d", t.Br, t.Bc, t.D)
		if c.Causal {
			name += "_causal"
		}
		// Q_i, K_j and V_j in bf16 (fast::smem_bytes).
		return Launches{Kernels: []Launch{{Name: name, Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
			Threads: t.Threads, Shared: 2 * (t.Br*t.D + 2*t.Bc*t.D), Args: append(QKVO(), Val(c.N), ScaleArg(c))}}}
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: flash2Records, // the same tiles as flash2: one step per visited kv-tile, then the epilogue
}

const log2e32 = float32(1.4426950408889634)

// flash2FastTraffic is the device-memory traffic of one record: as flash2's,
// with Q, K, V and O in bf16 (2 bytes) and the LSE in float32.
func flash2FastTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const bf16, f32 = 2, 4
	rows, cols, d := uint64(r.RowsValid), uint64(r.ColsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindFlashStep:
		read = 2 * cols * d * bf16
		if r.J == 0 {
			read += rows * d * bf16
		}
	case instrument.KindEpilogue:
		written = rows*d*bf16 + rows*f32
	}
	return read, written
}

// quadThreads is the four threads of a quad, which share a row of S: thread
// t holds columns 2t and 2t+1 of each 8-column atom.
const quadThreads = 4

// fastArith is the arithmetic the bf16 flash kernels leave unspecified: the
// sum inside one mma, and the exponential (ex2.approx in flash2_fast, expf
// in flash2_mma). The mirror uses one admissible choice of each; tests swap
// in others (a stand-in for the GPU) to try the GPU bound.
type fastArith struct {
	mma func(acc float32, a, b []float32, stride int) float32
	ex2 func(x float32) float32 // flash2_fast's
	exp func(x float32) float32 // flash2_mma's
}

var mirrorArith = fastArith{mma: mmaChunk, ex2: ex2, exp: exp32}

// flash2FastBlock runs the block of (bh, q-tile i) and emits its records.
func flash2FastBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	mirrorArith.block(c, in, bh, i, emit)
}

// softmaxForm is where the two bf16 flash kernels part: the units their
// row max is kept in and how a score becomes P. Everything else, the mma
// products, the masks, the quad's partial sums, the rescale of O and the
// end, is one block walk (fastArith.block).
type softmaxForm interface {
	// score is the value the row max is taken over, from the raw S_raw
	// (−Inf where masked).
	score(sRaw float32) float32
	// natural is a kept score or row max in the trace's natural-log units.
	natural(v float32) float32
	// base is what the exponents subtract, from the new row max: 0 while
	// every score seen is masked, so that the exponential gives 0, never NaN.
	base(m float32) float32
	// exp is the kernel's e^(v − m) for a kept score or row max v, from
	// base(m).
	exp(v, base float32) float32
	// lse is the row's log-sum-exp from its kept max and its l.
	lse(m, l float32) float32
}

// exp2Form is flash2_fast's softmax: S and m raw (unscaled), the scale and
// log2 e folded into one fma before ex2.approx.
type exp2Form struct {
	scale, sl2 float32
	ex2        func(float32) float32
}

func (f exp2Form) score(sRaw float32) float32 { return sRaw }
func (f exp2Form) natural(v float32) float32  { return float32(v * f.scale) }
func (f exp2Form) base(m float32) float32 {
	if m == negInf {
		return 0
	}
	return float32(m * f.sl2)
}
func (f exp2Form) exp(v, mb float32) float32 { return f.ex2(fma32(v, f.sl2, -mb)) }
func (f exp2Form) lse(m, l float32) float32  { return fma32(m, f.scale, log32(l)) }

// form is the softmax of c's variant: flash2_mma's natural units, or
// flash2_fast's exp2.
func (a fastArith) form(c *Config) softmaxForm {
	scale := c.Scale()
	if c.Variant == instrument.VariantFlash2MMA {
		return naturalForm{scale: scale, expf: a.exp}
	}
	return exp2Form{scale: scale, sl2: float32(scale * log2e32), ex2: a.ex2}
}

// block is the bf16 flash kernels' block of (bh, q-tile i), in the softmax
// form of c's variant: its walk over every kv-tile it visits, then the
// epilogue.
func (a fastArith) block(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	w := a.walk(c, in, bh, i)
	w.steps(0, flash2KVTiles(c, i), 0, emit)
	emit(0, w.end(instrument.KindEpilogue, -1))
}

// fastWalk is a bf16 flash block's q-tile and its running state (m, each
// quad thread's part of l, O) as it walks kv-tiles. A split-KV block walks
// its split's kv-tiles from a fresh state (decode_split.go).
type fastWalk struct {
	a                   fastArith
	c                   *Config
	f                   softmaxForm
	in                  *Inputs
	bh, i               int
	rowsValid, r0, pos0 int
	q                   []float32
	m, lt, o            []float32
	traffic             func(*Config, *instrument.Record) (uint64, uint64)
}

// walk starts q-tile i of batch-head bh with nothing summed yet.
func (a fastArith) walk(c *Config, in *Inputs, bh, i int) *fastWalk {
	br, d := c.Br, c.D
	r0 := i * br
	rowsValid := c.RowsValidOf(i)
	return &fastWalk{a: a, c: c, f: a.form(c), in: in, bh: bh, i: i, rowsValid: rowsValid, r0: r0,
		pos0: c.QueryOffset() + r0, // row 0's position: the causal diagonal
		q:    roundBF16All(tileRows(in.Q, d, r0, rowsValid, br)),
		m:    fill(br, negInf),                // kept units (raw in flash2_fast)
		lt:   make([]float32, br*quadThreads), // each thread's part of l
		o:    make([]float32, br*d), traffic: trafficOf(c.Variant)}
}

// steps walks kv-tiles [j0, j1), emitting a flash step record for each in
// the given phase.
func (w *fastWalk) steps(j0, j1, phase int, emit func(phase int, r *instrument.Record)) {
	c, a, f := w.c, w.a, w.f
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	atoms := ceilDiv(bc, 8)
	m, lt, o, q := w.m, w.lt, w.o, w.q
	s := make([]float32, bc) // the row's scores, kept units
	p16 := make([]float32, bc)

	for j := j0; j < j1; j++ {
		c0 := j * bc
		colsValid := min(bc, n-c0)
		k := roundBF16All(tileRows(w.in.K, d, c0, colsValid, bc))
		vT := transposed(roundBF16All(tileRows(w.in.V, d, c0, colsValid, bc)), bc, d) // [x][kv row]

		rec := &instrument.Record{Kind: instrument.KindFlashStep, BH: w.bh, I: w.i, J: j,
			RowsValid: w.rowsValid, ColsValid: colsValid,
			MOld: make([]float32, br), MNew: make([]float32, br), Alpha: make([]float32, br),
			L: make([]float32, br), S: make([]float32, br*bc), P: make([]float32, br*bc)}

		for r := range br {
			qr := q[r*d : (r+1)*d]
			mx := m[r]
			for col := range bc {
				sRaw := negInf
				if col < colsValid && !(c.Causal && c0+col > w.pos0+r) {
					var acc float32
					for k0 := 0; k0 < d; k0 += 16 {
						k1 := min(k0+16, d)
						acc = a.mma(acc, qr[k0:k1], k[col*d+k0:col*d+k1], 1)
					}
					sRaw = acc
				}
				s[col] = f.score(sRaw)
				mx = max(mx, s[col])
				rec.S[r*bc+col] = f.natural(s[col])
			}
			mb := f.base(mx)
			alpha := f.exp(m[r], mb)
			p := rec.P[r*bc : (r+1)*bc]
			for col := range bc {
				p[col] = f.exp(s[col], mb)
				p16[col] = RoundBF16(p[col])
			}
			for t := range quadThreads {
				var rs float32
				for ni := range atoms {
					rs = float32(rs + float32(colOrZero(p, ni*8+2*t)+colOrZero(p, ni*8+2*t+1)))
				}
				lt[r*quadThreads+t] = fma32(alpha, lt[r*quadThreads+t], rs)
			}
			or := o[r*d : (r+1)*d]
			for x := range d {
				acc := float32(or[x] * alpha)
				for k0 := 0; k0 < bc; k0 += 16 {
					k1 := min(k0+16, bc)
					acc = a.mma(acc, p16[k0:k1], vT[x*bc+k0:], 1)
				}
				or[x] = acc
			}
			rec.MOld[r], rec.MNew[r], rec.Alpha[r] = f.natural(m[r]), f.natural(mx), alpha
			rec.L[r] = quadSum(lt[r*quadThreads : (r+1)*quadThreads])
			m[r] = mx
		}
		rec.O = append([]float32(nil), o...)
		rec.BytesRead, rec.BytesWritten = w.traffic(c, rec)
		emit(phase, rec)
	}
}

// end is the walk's result as a record of the given kind (the epilogue, or
// a split's end, j its split): the quad's parts of l added, O·(1/l) and
// the LSE, 0 and −Inf for a row that saw no key.
func (w *fastWalk) end(kind instrument.Kind, j int) *instrument.Record {
	c := w.c
	br, d := c.Br, c.D
	rec := &instrument.Record{Kind: kind, BH: w.bh, I: w.i, J: j, RowsValid: w.rowsValid,
		O: make([]float32, br*d), LSE: make([]float32, br)}
	for r := range br {
		l := quadSum(w.lt[r*quadThreads : (r+1)*quadThreads])
		var inv float32
		rec.LSE[r] = negInf
		if l != 0 { // every score of the row masked: no output
			inv = float32(1 / l)
			rec.LSE[r] = w.f.lse(w.m[r], l)
		}
		for x := range d {
			rec.O[r*d+x] = float32(w.o[r*d+x] * inv)
		}
	}
	rec.BytesRead, rec.BytesWritten = w.traffic(c, rec)
	return rec
}

// quadSum adds a quad's four partial row sums as the two butterfly shuffles
// do: (l0 + l1) + (l2 + l3).
func quadSum(l []float32) float32 {
	return float32(float32(l[0]+l[1]) + float32(l[2]+l[3]))
}

// colOrZero is p[col], or 0 for a column past the tile (a partial last
// atom, which only the mirror's odd shapes have): adding 0 changes no sum.
func colOrZero(p []float32, col int) float32 {
	if col < len(p) {
		return p[col]
	}
	return 0
}

// FamilyFlash2Fast: bf16 products on tensor cores, exp2 with the scale folded in: rungs 6 to 11, whatever instructions and schedule carry it.
var FamilyFlash2Fast = &Family{Name: "flash2_fast", Traffic: flash2FastTraffic, block: flash2FastBlock}
