package launch

import (
	"fmt"
	"net/url"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The compiled instantiations of every kernel, and the checks that a run
// fits one.

// Flash2Instance is one compiled instantiation of flash2.cu.
type Flash2Instance struct {
	Br, Bc, D int
	Threads   int
}

// Flash2Instances lists the instantiations compiled into flash2.cu, in its
// order (TestFlash2InstancesMatchSource checks the two agree).
var Flash2Instances = []Flash2Instance{
	{2, 2, 4, 8},
	{4, 4, 8, 32},
	{16, 16, 32, 64},
	{32, 32, 64, 128},
	{64, 64, 64, 256},
	{64, 64, 128, 256},
	{32, 64, 128, 256},
}

// Name is the kernel's symbol in the PTX.
func (f Flash2Instance) Name() string { return fmt.Sprintf("flash2_br%d_bc%d_d%d", f.Br, f.Bc, f.D) }

// SharedBytes is the dynamic shared memory a block uses (FLASH2_SMEM in
// flash2.cu): Q_i, K_j (rows padded by one), V_j, the S/P tile (padded) and
// three per-row arrays.
func (f Flash2Instance) SharedBytes() int {
	return 4 * (f.Br*f.D + f.Bc*(f.D+1) + f.Bc*f.D + f.Br*(f.Bc+1) + 3*f.Br)
}

// Flash2FastInstance is one compiled instantiation of flash2_fast.cu: the
// tensor-core kernel's tiles and warps for one head dim, each compiled as a
// plain and a causal kernel.
type Flash2FastInstance struct {
	Br, Bc, D, Warps int
}

// Flash2FastInstances lists the instantiations compiled into flash2_fast.cu,
// in its order (TestFlash2FastInstancesMatchSource checks the two agree):
// the fastest tiles measured per head dim (docs/LADDER.md).
var Flash2FastInstances = []Flash2FastInstance{
	{128, 128, 64, 4},
	{128, 48, 128, 4},
}

// Name is the kernel's symbol in the PTX.
func (f Flash2FastInstance) Name(causal bool) string {
	n := fmt.Sprintf("flash2_fast_br%d_bc%d_d%d", f.Br, f.Bc, f.D)
	if causal {
		n += "_causal"
	}
	return n
}

// Threads is the block size: 32 per warp.
func (f Flash2FastInstance) Threads() int { return 32 * f.Warps }

// SharedBytes is the dynamic shared memory a block uses: Q_i, K_j and V_j in
// bf16 (fast::smem_bytes in flash2_fast.cu).
func (f Flash2FastInstance) SharedBytes() int { return 2 * (f.Br*f.D + 2*f.Bc*f.D) }

// Flash2FastInstanceFor finds the instantiation that runs c, if any.
func Flash2FastInstanceFor(c *kernels.Config) (Flash2FastInstance, bool) {
	for _, f := range Flash2FastInstances {
		if f.Br == c.Br && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return Flash2FastInstance{}, false
}

// NaiveMMAInstance is one compiled instantiation of naive_mma.cu: flash2_fast's
// tiles (Br = 128) for one head dim, so the two step over the same tiles.
type NaiveMMAInstance struct {
	Bc, D int
}

// NaiveMMABr is naive_mma's q-tile: 4 warps of 32 rows.
const NaiveMMABr = 128

// NaiveMMAInstances lists the instantiations compiled into naive_mma.cu, in
// its order (TestNaiveMMAInstancesMatchSource checks the two agree).
var NaiveMMAInstances = []NaiveMMAInstance{{128, 64}, {48, 128}}

// Kernel names the instance's kernel of a phase: scores, softmax or pv.
func (f NaiveMMAInstance) Kernel(phase string) string {
	return fmt.Sprintf("naive_mma_%s_bc%d_d%d", phase, f.Bc, f.D)
}

// SharedBytes is the dynamic shared memory of the scores and pv kernels
// (naive_mma::scores_smem and pv_smem in naive_mma.cu): bf16 tiles, P's rows
// padded by 8 elements.
func (f NaiveMMAInstance) SharedBytes() (scores, pv int) {
	return 2 * (NaiveMMABr*f.D + f.Bc*f.D), 2 * (NaiveMMABr*(f.Bc+8) + f.Bc*f.D)
}

// NaiveMMAInstanceFor finds the instantiation that runs c, if any.
func NaiveMMAInstanceFor(c *kernels.Config) (NaiveMMAInstance, bool) {
	for _, f := range NaiveMMAInstances {
		if c.Br == NaiveMMABr && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return NaiveMMAInstance{}, false
}

// NaiveMMARowStride is the row length of naive_mma's S and P buffers: N
// rounded up to whole kv-tiles, so every tile load is whole and aligned.
func NaiveMMARowStride(c *kernels.Config) int { return c.Tc() * c.Bc }

// NaiveThreads is the block size of every naive kernel.
const NaiveThreads = 256

// Limits of the naive kernels: each thread of naive_pv holds at most 32
// output elements, and shared memory holds the tiles.
const naiveMaxOutPerThread = 32

// NaiveSharedBytes is the dynamic shared memory of naive_scores and naive_pv.
func NaiveSharedBytes(br, bc, d int) (scores, pv int) {
	return 4 * (br*d + bc*(d+1)), 4 * (br*bc + bc*d)
}

// MaxSharedBytes is what a block may opt into on the reference GPU (H100).
const MaxSharedBytes = 227 << 10

// Flash2InstanceFor finds the instantiation that runs c, if any. naive_row
// and flash1 compile at flash2's tiles too, so that the float32 rungs step
// over the same tiles.
func Flash2InstanceFor(c *kernels.Config) (Flash2Instance, bool) {
	for _, f := range Flash2Instances {
		if f.Br == c.Br && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return Flash2Instance{}, false
}

// Flash2MMAInstance is one compiled instantiation of flash2_mma.cu: one
// 16-row atom per warp.
type Flash2MMAInstance struct {
	Br, Bc, D, Warps int
}

// Flash2MMAInstances lists the instantiations compiled into flash2_mma.cu,
// in its order (TestInstancesMatchSource checks the two agree).
var Flash2MMAInstances = []Flash2MMAInstance{
	{64, 64, 64, 4},
	{64, 64, 128, 4},
}

// Name is the kernel's symbol in the PTX.
func (f Flash2MMAInstance) Name() string {
	return fmt.Sprintf("flash2_mma_br%d_bc%d_d%d", f.Br, f.Bc, f.D)
}

// Threads is the block size: 32 per warp.
func (f Flash2MMAInstance) Threads() int { return 32 * f.Warps }

// SharedBytes is the dynamic shared memory a block uses: Q_i, K_j and V_j in
// bf16, unpadded.
func (f Flash2MMAInstance) SharedBytes() int { return 2 * (f.Br*f.D + 2*f.Bc*f.D) }

// Flash2MMAInstanceFor finds the instantiation that runs c, if any.
func Flash2MMAInstanceFor(c *kernels.Config) (Flash2MMAInstance, bool) {
	for _, f := range Flash2MMAInstances {
		if f.Br == c.Br && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return Flash2MMAInstance{}, false
}

// Flash1SharedBytes is flash1's dynamic shared memory (FLASH1_SMEM in
// flash1.cu): Q_i, K_j (rows padded by one), V_j, the S/P tile (padded) and
// two per-row arrays (α·l_old and l_new).
func Flash1SharedBytes(f Flash2Instance) int {
	return 4 * (f.Br*f.D + f.Bc*(f.D+1) + f.Bc*f.D + f.Br*(f.Bc+1) + 2*f.Br)
}

// Tiles lists, for a form or an error, the tiles (Br×Bc, d) the GPU runs
// variant v at; nil for naive, which runs any tile its limits allow.
func Tiles(v instrument.Variant) []string {
	var s []string
	switch v {
	case instrument.VariantFlash2, instrument.VariantNaiveRow, instrument.VariantFlash1:
		for _, f := range Flash2Instances {
			s = append(s, fmt.Sprintf("%d×%d, d=%d", f.Br, f.Bc, f.D))
		}
	case instrument.VariantFlash2MMA:
		for _, f := range Flash2MMAInstances {
			s = append(s, fmt.Sprintf("%d×%d, d=%d", f.Br, f.Bc, f.D))
		}
	case instrument.VariantFlash2Fast:
		for _, f := range Flash2FastInstances {
			s = append(s, fmt.Sprintf("%d×%d, d=%d", f.Br, f.Bc, f.D))
		}
	case instrument.VariantNaiveMMA:
		for _, f := range NaiveMMAInstances {
			s = append(s, fmt.Sprintf("%d×%d, d=%d", NaiveMMABr, f.Bc, f.D))
		}
	}
	return s
}

// GPUTileChoices describes, for a form, the tile sizes the GPU runs flash2 at.
func GPUTileChoices() string { return strings.Join(Tiles(instrument.VariantFlash2), "; ") }

// MaxGPUElements bounds batch·heads·N·d of a GPU run: unlike the mirror, the
// GPU computes every batch-head, traced or not, and the worker draws all
// their inputs. 2²⁶ is four times the FlashAttention benchmark shapes
// (B·N = 16384, H·d = 2048).
const MaxGPUElements = 1 << 26

// MaxGridY is CUDA's limit on a grid's second and third dimensions, where
// the kernels put the batch-heads (and naive's scores kernel its q-tiles).
const MaxGridY = 65535

// MaxOffsetBytes bounds the table of trace offsets a traced run uploads:
// 8 bytes per block, or for flash1 per record, and for naive's scores
// kernel per tile, of the whole grid, whatever the selection traces.
const MaxOffsetBytes = 128 << 20

// Validate checks that the compiled kernels run c, beyond what c.Validate
// checks. The error is kernels.FieldErrors.
func Validate(c *kernels.Config) error {
	if c.Batch < 1 || c.Heads < 1 || c.N < 1 || c.D < 1 || c.Br < 1 || c.Bc < 1 {
		return kernels.FieldErrors{{Field: kernels.FieldN, Message: "every size must be positive"}}
	}
	if n := int64(c.Batch) * int64(c.Heads) * int64(c.N) * int64(c.D); n > MaxGPUElements {
		return kernels.FieldErrors{{Field: kernels.FieldHeads, Message: fmt.Sprintf("the GPU computes every batch-head: batch·heads·N·d must be at most %d (got %d)", MaxGPUElements, n)}}
	}
	if bh := c.Batch * c.Heads; bh > MaxGridY {
		return kernels.FieldErrors{{Field: kernels.FieldHeads, Message: fmt.Sprintf("the kernels give each batch-head its own row of the grid: batch·heads must be at most %d (got %d)", MaxGridY, bh)}}
	}
	if c.Variant == instrument.VariantNaive && c.Tr() > MaxGridY {
		return kernels.FieldErrors{{Field: kernels.FieldBr, Message: fmt.Sprintf("naive's scores kernel gives each q-tile a row of its grid: N/Br must be at most %d (got %d)", MaxGridY, c.Tr())}}
	}
	if b := offsetBytes(c); b > MaxOffsetBytes {
		return kernels.FieldErrors{{Field: kernels.FieldBatch, Message: fmt.Sprintf("a traced GPU run uploads an 8-byte trace offset for every %s of the whole grid, %s here; at most %s: fewer batch-heads, or larger tiles",
			map[bool]string{true: "record", false: "block"}[c.Variant == instrument.VariantFlash1], kernels.FormatBytes(b), kernels.FormatBytes(MaxOffsetBytes))}}
	}
	if c.Variant == instrument.VariantNaive {
		scores, pv := NaiveSharedBytes(c.Br, c.Bc, c.D)
		if c.Br*c.D > naiveMaxOutPerThread*NaiveThreads {
			return kernels.FieldErrors{{Field: kernels.FieldBr, Message: fmt.Sprintf("the naive GPU kernel holds at most %d output values per q-tile: Br·d must be at most that (got %d)", naiveMaxOutPerThread*NaiveThreads, c.Br*c.D)}}
		}
		if max(scores, pv) > MaxSharedBytes {
			return kernels.FieldErrors{{Field: kernels.FieldBc, Message: fmt.Sprintf("tiles of Br=%d, Bc=%d with d=%d need %s of shared memory, above the GPU's %s", c.Br, c.Bc, c.D, kernels.FormatBytes(int64(max(scores, pv))), kernels.FormatBytes(MaxSharedBytes))}}
		}
		return nil
	}
	var ok bool
	switch c.Variant {
	case instrument.VariantFlash2, instrument.VariantNaiveRow, instrument.VariantFlash1:
		_, ok = Flash2InstanceFor(c)
	case instrument.VariantFlash2MMA:
		_, ok = Flash2MMAInstanceFor(c)
	case instrument.VariantFlash2Fast:
		_, ok = Flash2FastInstanceFor(c)
	case instrument.VariantNaiveMMA:
		_, ok = NaiveMMAInstanceFor(c)
	}
	if !ok {
		return kernels.FieldErrors{{Field: kernels.FieldBr, Message: fmt.Sprintf("the GPU runs %s with these compiled tiles (Br×Bc, d): %s; not %d×%d with d=%d",
			c.Variant, strings.Join(Tiles(c.Variant), "; "), c.Br, c.Bc, c.D)}}
	}
	return nil
}

// ParseBenchConfig reads a configuration for an untraced GPU run: the
// stepper's limits (which bound a trace) do not apply, the GPU's do.
func ParseBenchConfig(v url.Values) (kernels.Config, error) {
	c, err := kernels.ParseBenchFields(v)
	if err != nil {
		return c, err
	}
	return c, Validate(&c)
}
