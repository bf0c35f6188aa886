package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2 on tensor cores with nothing tuned, bf16: the CPU mirror
// of flash2_mma.cu, the ladder's rung 5.
//
// The block walk is flash2_fast's (fastArith.block: the same tiles, mma
// chunks, masks, per-thread partial sums of l and rescale of O); only the
// softmax is in other units, flash2's natural ones, operation by operation
// as the kernel writes it:
//
//	Q, K, V    bf16 (InputsFor rounds them)
//	S_raw      float32, d/16 mma chunks of 16 exact bf16 products (mmaChunk)
//	x          float32(S_raw·scale), −Inf where col ≥ N, or causal and
//	           col > row
//	m_new      max(m_old, max_c x), natural-log units, exact
//	mb         m_new, 0 while m_new = −Inf
//	α          expf(float32(m_old − mb))
//	p          expf(float32(x − mb))
//	l_t        fma(α, l_t, rs_t), rs_t = Σ_ni (p0 + p1) over thread t's
//	           columns ni·8+2t and ni·8+2t+1, in atom order
//	l          (l_0 + l_1) + (l_2 + l_3), where the trace or the end needs it
//	O          float32(O·α), then Bc/16 mma chunks of bf16(p)·V
//	end        inv = float32(1/l), out = float32(O·inv),
//	           LSE = float32(m + logf(l))
//
// The trace holds these values as they are: S = x, m, α, P the float32 p
// before its rounding to bf16, the full l, O after the step; the epilogue's
// O is O·inv in float32. expf and logf are exp32 and log32 here, within
// 2 ulp and 1 ulp of CUDA's, which the GPU comparison's bound allows for.

// flash2MMARung is the ladder's fifth rung.
var flash2MMARung = &VariantInfo{
	Variant: instrument.VariantFlash2MMA,
	Title:   "FlashAttention-2, plain mma (bf16)",
	Summary: "flash2's loop on tensor cores, nothing tuned: bf16 Q, K, V and P through mma.sync and ldmatrix, plain shared tiles, loads that wait, expf.",
	DType:   instrument.DTypeBF16,
	Loop:    LoopFused,
	Rung:    5,
	Gist:    "tensor cores",
	Idea:    "The same loop on tensor cores: bf16 Q, K, V, mma.sync m16n8k16 with float32 accumulation, fragments through ldmatrix, P converted to bf16 in registers as the A operand of P·V. Nothing else changes: plain row-major shared tiles (ldmatrix hits the same banks), loads that wait for every thread, expf on scaled scores, 64-row tiles.",
	Bench:   true,
	StepRun: "/step?variant=flash2_mma&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:  "#00a6ed",
	GPURate: 100e12, CPURate: 0.4e9,
	// One 16-row atom per warp, 4 warps (TestInstancesMatchSource checks
	// flash2_mma.cu agrees).
	Tiles: []Tile{{64, 64, 64, 128}, {64, 64, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH2_MMA_INSTANCE(%d, %d, %d, %d)", t.Br, t.Bc, t.D, t.Threads/32)
	},
	Launches: func(c *Config, t Tile) Launches {
		return Launches{Kernels: []Launch{{Name: fmt.Sprintf("flash2_mma_br%d_bc%d_d%d", t.Br, t.Bc, t.D), Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
			Threads: t.Threads, Shared: Flash2MMASharedBytes(t), Args: append(QKVO(), Val(c.N), ScaleArg(c), CausalArg(c))}}}
	},
	Family:  FamilyFlash2MMA,
	phases:  onePhase,
	records: flash2Records,
}

// Flash2MMASharedBytes is flash2_mma's dynamic shared memory at t
// (flash2_mma::smem_bytes): Q_i, K_j and V_j in bf16, unpadded; S and P
// stay in registers.
func Flash2MMASharedBytes(t Tile) int {
	return 2 * (t.Br*t.D + 2*t.Bc*t.D)
}

// naturalForm is flash2_mma's softmax: each score scaled by one float32
// multiply as soon as it exists, the row max kept in natural-log units, and
// expf of the difference.
type naturalForm struct {
	scale float32
	expf  func(float32) float32
}

func (f naturalForm) score(sRaw float32) float32 { return float32(sRaw * f.scale) }
func (f naturalForm) natural(v float32) float32  { return v }
func (f naturalForm) base(m float32) float32     { return softmaxBase(m) }
func (f naturalForm) exp(v, mb float32) float32  { return f.expf(float32(v - mb)) }
func (f naturalForm) lse(m, l float32) float32   { return float32(m + log32(l)) }

// flash2MMABlock runs the block of (bh, q-tile i) and emits its records:
// fastArith.block, which takes naturalForm for a flash2_mma config.
func flash2MMABlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	mirrorArith.block(c, in, bh, i, emit)
}

// FamilyFlash2MMA: bf16 products on tensor cores, the softmax in natural units (expf of scaled scores).
var FamilyFlash2MMA = &Family{Name: "flash2_mma", Traffic: flash2FastTraffic, block: flash2MMABlock}
