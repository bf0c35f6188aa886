package traffic

import (
	"fmt"
	"math"

	"flashstep/instrument"
	"flashstep/kernels"
)

// MemoryPlan is what a run of attention holds in device memory, naive
// against flash, and where naive stops fitting. A byte count past
// math.MaxInt64 (8 EiB), which the calculator's limits allow, is
// math.MaxInt64: it fits no GPU either way.
type MemoryPlan struct {
	B, H, N, D int
	DType      string `json:"dtype"` // f32, or bf16 (the tensor-core kernels)

	InputsBytes   int64 `json:"inputs_bytes"`     // Q, K, V, O (in DType) and the LSE (float32)
	NaiveSPBytes  int64 `json:"naive_sp_bytes"`   // S (float32) and P (DType), N×N each, per batch-head
	NaiveBytes    int64 `json:"naive_bytes"`      // inputs + S and P
	FlashBytes    int64 `json:"flash_bytes"`      // inputs only
	FlashTileByte int64 `json:"flash_tile_bytes"` // one block's shared memory (Br=Bc=64), on chip
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

// PlanMemory works out the plan for batch b, heads h, length n, head dim d,
// elements of type dt, on a GPU of gpuBytes. In bf16, Q, K, V, O and the
// flash tiles take 2 bytes an element and naive's P too (naive_mma); S and
// the LSE stay float32.
func PlanMemory(b, h, n, d int, dt instrument.DType, gpuBytes int64) (MemoryPlan, error) {
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
	if len(errs) > 0 {
		return MemoryPlan{}, errs
	}
	e := int64(4)
	if dt == instrument.DTypeBF16 {
		e = 2
	}
	bh, d64 := int64(b)*int64(h), int64(d)
	inputs := func(n int64) int64 { return mul(bh, add(mul(4, n, d64, e), mul(n, 4))) }
	sp := func(n int64) int64 { return mul(bh, n, n, 4+e) }
	p := MemoryPlan{B: b, H: h, N: n, D: d, DType: dt.String(), GPUBytes: gpuBytes}
	p.InputsBytes = inputs(int64(n))
	p.NaiveSPBytes = sp(int64(n))
	p.NaiveBytes = add(p.InputsBytes, p.NaiveSPBytes)
	p.FlashBytes = p.InputsBytes
	// One flash block's tiles at Br = Bc = 64, in the kernels' layout: Q_i,
	// K_j (rows padded by one), V_j, the S/P tile (padded) and three
	// per-row arrays.
	const br, bc = 64, 64
	p.FlashTileByte = int64(br*d+bc*(d+1)+bc*d+br*(bc+1)+3*br) * e
	p.NaiveFits = p.NaiveBytes <= gpuBytes
	p.FlashFits = p.FlashBytes <= gpuBytes
	p.NaiveMaxN = largestN(gpuBytes, func(n int64) int64 { return add(inputs(n), sp(n)) })
	p.FlashMaxN = largestN(gpuBytes, inputs)
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
