package traffic

import (
	"fmt"
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Pass is the pass of attention a memory plan describes.
type Pass string

// The passes the calculator plans.
const (
	PassForward  Pass = "forward"
	PassBackward Pass = "backward"
)

// Passes are the passes the calculator plans, the default first.
var Passes = []Pass{PassForward, PassBackward}

// ParsePass reads a pass by its name; "" is the forward.
func ParsePass(s string) (Pass, bool) {
	if s == "" {
		return PassForward, true
	}
	for _, p := range Passes {
		if string(p) == s {
			return p, true
		}
	}
	return "", false
}

// MemoryPlan is what a pass of attention holds in device memory, naive
// against flash, and where naive stops fitting: the buffers that
// launch.For plans for the kernels it names (NaiveKernel, FlashKernel).
//
// The forward: both hold Q, K, V, O and the LSE; naive adds S and P, N×N
// each per batch-head (naive_mma rounds their rows up to whole kv-tiles;
// the plan counts N).
//
// The backward: both hold Q, K, V, O, dO, the LSE L (the forward's inputs
// and outputs, and the gradient of O) and the gradients dQ, dK and dV.
// naive_bwd adds the forward's P, which it reads back, and the dP and dS it
// writes, N×N each per batch-head (its D stays in a register); a flash
// backward (flash2_bwd, flash2_bwd_mma) adds D = rowsum(dO ∘ O), one float32
// a row, and nothing N×N. In bf16 (flash2_bwd_mma) Q, K, V, O and dO take 2
// bytes an element; L, D and the gradients stay float32. No naive backward
// runs in bf16: its bf16 plan (NaiveKernel "") is a model, naive_bwd's
// buffers with Q, K, V, O, dO and the forward's P in bf16, as naive_mma's
// forward leaves P, and dP and dS float32, as every backward computes its
// gradients.
//
// A byte count past math.MaxInt64 (8 EiB), which the calculator's limits
// allow, is math.MaxInt64: it fits no GPU either way.
type MemoryPlan struct {
	B, H, N, D int
	DType      string `json:"dtype"` // f32, or bf16 (the tensor-core kernels)
	Pass       Pass   `json:"pass"`
	// NaiveKernel and FlashKernel name the kernels whose buffers the plan
	// counts; NaiveKernel is "" where no naive kernel runs the pass in
	// DType (the bf16 backward), and the naive figures are a model.
	NaiveKernel string `json:"naive_kernel"`
	FlashKernel string `json:"flash_kernel"`

	// InputsBytes is what both kernels hold: Q, K, V, O (in DType) and the
	// LSE (float32); in the backward also dO (in DType) and dQ, dK, dV
	// (float32).
	InputsBytes int64 `json:"inputs_bytes"`
	// NaiveNNBytes are naive's N×N matrices: the forward's S (float32) and
	// P (DType); the backward's P (DType), dP and dS (float32).
	NaiveNNBytes int64 `json:"naive_nn_bytes"`
	// NaiveSPBytes is NaiveNNBytes under the forward's own name, S and P;
	// absent from a backward plan.
	NaiveSPBytes int64 `json:"naive_sp_bytes,omitempty"`
	// FlashDeltaBytes is a flash backward's D (float32, one a row); absent
	// from a forward plan.
	FlashDeltaBytes int64 `json:"flash_delta_bytes,omitempty"`
	NaiveBytes      int64 `json:"naive_bytes"` // inputs + the N×N matrices
	FlashBytes      int64 `json:"flash_bytes"` // inputs (+ D in the backward)
	// FlashTileByte is one flash block's shared memory (Br=Bc=64), on chip,
	// as FlashKernel launches it: flash2's float32 tiles (f32) or
	// flash2_mma's bf16 Q_i, K_j and V_j (bf16); in the backward, the main
	// kernel's of flash2_bwd (f32) or flash2_bwd_mma (bf16, at the tile the
	// sweep runs: 64×128 at d = 128).
	FlashTileByte int64 `json:"flash_tile_bytes"`
	GPUBytes      int64 `json:"gpu_bytes"`
	NaiveFits     bool  `json:"naive_fits"`
	FlashFits     bool  `json:"flash_fits"`
	NaiveMaxN     int   `json:"naive_max_n"` // the largest N naive fits at, these B, H and d
	FlashMaxN     int   `json:"flash_max_n"`
}

// Limits of the calculator's inputs.
const (
	MaxCalcB = 1 << 16
	MaxCalcH = 1 << 12
	MaxCalcN = 1 << 22
	MaxCalcD = 1 << 12
)

// mul is the product of non-negative counts, math.MaxInt64 where it would
// overflow.
func mul(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		if x != 0 && p > math.MaxInt64/x {
			return math.MaxInt64
		}
		p *= x
	}
	return p
}

// add is the sum of non-negative counts, math.MaxInt64 where it would
// overflow.
func add(xs ...int64) int64 {
	s := int64(0)
	for _, x := range xs {
		if s > math.MaxInt64-x {
			return math.MaxInt64
		}
		s += x
	}
	return s
}

// PlanMemory works out the forward's plan for batch b, heads h, length n,
// head dim d, elements of type dt, on a GPU of gpuBytes. In bf16, Q, K, V,
// O and the flash tiles take 2 bytes an element and naive's P too
// (naive_mma); S and the LSE stay float32, and flash2_mma keeps S and P in
// registers.
func PlanMemory(b, h, n, d int, dt instrument.DType, gpuBytes int64) (MemoryPlan, error) {
	return PlanPass(PassForward, b, h, n, d, dt, gpuBytes)
}

// PlanPass works out the plan of pass ("" is the forward) for batch b,
// heads h, length n, head dim d, elements of type dt, on a GPU of gpuBytes
// (MemoryPlan says what each pass holds).
func PlanPass(pass Pass, b, h, n, d int, dt instrument.DType, gpuBytes int64) (MemoryPlan, error) {
	var errs kernels.FieldErrors
	check := func(field, name string, v, hi int) {
		if v < 1 || v > hi {
			errs = append(errs, kernels.FieldError{Field: field, Message: fmt.Sprintf("%s must be between 1 and %d (got %d)", name, hi, v)})
		}
	}
	check("b", "B", b, MaxCalcB)
	check("h", "H", h, MaxCalcH)
	check("n", "N", n, MaxCalcN)
	check("d", "d", d, MaxCalcD)
	pass, ok := ParsePass(string(pass))
	if !ok {
		errs = append(errs, kernels.FieldError{Field: "pass", Message: fmt.Sprintf("pass must be %s or %s (got %q)", PassForward, PassBackward, pass)})
	}
	if len(errs) > 0 {
		return MemoryPlan{}, errs
	}
	bf16 := dt == instrument.DTypeBF16
	e := int64(4)
	if bf16 {
		e = 2
	}
	bh, d64 := int64(b)*int64(h), int64(d)
	p := MemoryPlan{B: b, H: h, N: n, D: d, DType: dt.String(), Pass: pass, GPUBytes: gpuBytes}
	// The bytes at length n: both kernels', naive's N×N matrices, flash's
	// own.
	var inputs, nn, own func(n int64) int64
	const br, bc = 64, 64
	if pass == PassForward {
		p.NaiveKernel, p.FlashKernel = instrument.VariantNaive.String(), instrument.VariantFlash2.String()
		if bf16 {
			p.NaiveKernel, p.FlashKernel = instrument.VariantNaiveMMA.String(), instrument.VariantFlash2MMA.String()
		}
		// Q, K, V, O; the LSE.
		inputs = func(n int64) int64 { return mul(bh, add(mul(4, n, d64, e), mul(n, 4))) }
		// S float32, P in DType.
		nn = func(n int64) int64 { return mul(bh, n, n, 4+e) }
		own = func(int64) int64 { return 0 }
		// One flash block's tiles. flash2: Q_i, K_j (rows padded by one),
		// V_j, the S/P tile (padded) and three per-row arrays, float32.
		// flash2_mma's at its compiled tile for d (64×64 where none is):
		// the kernel's own count, S and P in registers.
		p.FlashTileByte = 4 * int64(br*d+bc*(d+1)+bc*d+br*(bc+1)+3*br)
		if bf16 {
			t, ok := kernels.Info(instrument.VariantFlash2MMA).SweepTile(d)
			if !ok {
				t = kernels.Tile{Br: br, Bc: bc, D: d, Threads: 128}
			}
			p.FlashTileByte = int64(kernels.Flash2MMASharedBytes(t))
		}
	} else {
		p.NaiveKernel, p.FlashKernel = instrument.VariantNaiveBwd.String(), instrument.VariantFlash2Bwd.String()
		if bf16 {
			p.NaiveKernel, p.FlashKernel = "", instrument.VariantFlash2BwdMMA.String()
		}
		// Q, K, V, O, dO in DType; the LSE; dQ, dK, dV float32.
		inputs = func(n int64) int64 { return mul(bh, add(mul(5, n, d64, e), mul(n, 4), mul(3, n, d64, 4))) }
		// P in DType, dP and dS float32.
		nn = func(n int64) int64 { return mul(bh, n, n, e+8) }
		// D, float32.
		own = func(n int64) int64 { return mul(bh, n, 4) }
		// The main kernel's shared memory. flash2_bwd: K_j and V_j (rows
		// padded by one), Q_i and dO_i, the P and dS tiles (padded), L_i
		// and D_i, float32. flash2_bwd_mma's at the tile the sweep runs d
		// at (64×64 where none is compiled): the kernel's own count.
		p.FlashTileByte = 4 * int64(2*bc*(d+1)+2*br*d+2*br*(bc+1)+2*br)
		if bf16 {
			t, ok := kernels.Info(instrument.VariantFlash2BwdMMA).SweepTile(d)
			if !ok {
				t = kernels.Tile{Br: br, Bc: bc, D: d, Threads: 128}
			}
			p.FlashTileByte = int64(kernels.Flash2BwdMMASharedBytes(t))
		}
		p.FlashDeltaBytes = own(int64(n))
	}
	p.InputsBytes = inputs(int64(n))
	p.NaiveNNBytes = nn(int64(n))
	if pass == PassForward {
		p.NaiveSPBytes = p.NaiveNNBytes
	}
	p.NaiveBytes = add(p.InputsBytes, p.NaiveNNBytes)
	p.FlashBytes = add(p.InputsBytes, own(int64(n)))
	p.NaiveFits = p.NaiveBytes <= gpuBytes
	p.FlashFits = p.FlashBytes <= gpuBytes
	p.NaiveMaxN = largestN(gpuBytes, func(n int64) int64 { return add(inputs(n), nn(n)) })
	p.FlashMaxN = largestN(gpuBytes, func(n int64) int64 { return add(inputs(n), own(n)) })
	return p, nil
}

// largestN is the largest N whose bytes fit in gpuBytes: every footprint
// grows with N, so bisect.
func largestN(gpuBytes int64, bytes func(n int64) int64) int {
	lo, hi := int64(0), int64(1)
	for bytes(hi) <= gpuBytes && hi < 1<<40 {
		hi *= 2
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if bytes(mid) <= gpuBytes {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(lo)
}
