package kernels

import (
	"fmt"
	"strings"

	"flashstep/instrument"
)

// What the compiled CUDA kernels run, and where a traced launch writes each
// block's records. This file is pure Go: the GPU worker launches with it and
// the tests check it on any machine.

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

// GPUElementBytes is the size of one element of Q, K, V and O on the GPU:
// the variant's (2 for the bf16 kernels, 4 for the float32 ones).
func (c *Config) GPUElementBytes() int {
	if v := Info(c.Variant); v != nil {
		return v.ElementBytes()
	}
	return 4
}

// Flash2FastInstanceFor finds the instantiation that runs c, if any.
func Flash2FastInstanceFor(c *Config) (Flash2FastInstance, bool) {
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
func NaiveMMAInstanceFor(c *Config) (NaiveMMAInstance, bool) {
	for _, f := range NaiveMMAInstances {
		if c.Br == NaiveMMABr && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return NaiveMMAInstance{}, false
}

// NaiveMMARowStride is the row length of naive_mma's S and P buffers: N
// rounded up to whole kv-tiles, so every tile load is whole and aligned.
func NaiveMMARowStride(c *Config) int { return c.Tc() * c.Bc }

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

// ConfigFromHeader is the run a trace header describes, selection included.
func ConfigFromHeader(h *instrument.Header) Config {
	c := Config{Variant: h.Variant, N: h.N, D: h.D, Br: h.Br, Bc: h.Bc, Batch: h.Batch, Heads: h.Heads,
		Causal: h.Causal, Pattern: h.Pattern, Seed: h.Seed, Timing: h.Timing}
	if h.TracedBH != c.TracedBH() {
		c.TraceBH = h.TracedBH
	}
	if h.TracedQ != c.TracedQ() {
		c.TraceQ = h.TracedQ
	}
	return c
}

// Flash2InstanceFor finds the instantiation that runs c, if any.
func Flash2InstanceFor(c *Config) (Flash2Instance, bool) {
	for _, f := range Flash2Instances {
		if f.Br == c.Br && f.Bc == c.Bc && f.D == c.D {
			return f, true
		}
	}
	return Flash2Instance{}, false
}

// GPUTileChoices describes, for a form, the tile sizes the GPU runs.
func GPUTileChoices() string {
	var s []string
	for _, f := range Flash2Instances {
		s = append(s, fmt.Sprintf("%d×%d, d=%d", f.Br, f.Bc, f.D))
	}
	return strings.Join(s, "; ")
}

// MaxGPUElements bounds batch·heads·N·d of a GPU run: unlike the mirror, the
// GPU computes every batch-head, traced or not, and the worker draws all
// their inputs. 2²⁶ is four times the FlashAttention benchmark shapes
// (B·N = 16384, H·d = 2048).
const MaxGPUElements = 1 << 26

// ValidateGPU checks that the compiled kernels run c, beyond what Validate
// checks. The error is FieldErrors.
func (c *Config) ValidateGPU() error {
	if n := c.Batch * c.Heads * c.N * c.D; n > MaxGPUElements {
		return FieldErrors{{FieldHeads, fmt.Sprintf("the GPU computes every batch-head: batch·heads·N·d must be at most %d (got %d)", MaxGPUElements, n)}}
	}
	switch c.Variant {
	case instrument.VariantFlash2:
		if _, ok := Flash2InstanceFor(c); !ok {
			return FieldErrors{{FieldBr, fmt.Sprintf("the GPU runs flash2 with these compiled tiles (Br×Bc, d): %s; not %d×%d with d=%d", GPUTileChoices(), c.Br, c.Bc, c.D)}}
		}
	case instrument.VariantFlash2Fast:
		if _, ok := Flash2FastInstanceFor(c); !ok {
			var s []string
			for _, f := range Flash2FastInstances {
				s = append(s, fmt.Sprintf("%d×%d, d=%d", f.Br, f.Bc, f.D))
			}
			return FieldErrors{{FieldBr, fmt.Sprintf("the GPU runs flash2_fast with these compiled tiles (Br×Bc, d): %s; not %d×%d with d=%d", strings.Join(s, "; "), c.Br, c.Bc, c.D)}}
		}
	case instrument.VariantNaiveMMA:
		if _, ok := NaiveMMAInstanceFor(c); !ok {
			var s []string
			for _, f := range NaiveMMAInstances {
				s = append(s, fmt.Sprintf("%d×%d, d=%d", NaiveMMABr, f.Bc, f.D))
			}
			return FieldErrors{{FieldBr, fmt.Sprintf("the GPU runs naive_mma with these compiled tiles (Br×Bc, d): %s; not %d×%d with d=%d", strings.Join(s, "; "), c.Br, c.Bc, c.D)}}
		}
	case instrument.VariantNaive:
		scores, pv := NaiveSharedBytes(c.Br, c.Bc, c.D)
		if c.Br*c.D > naiveMaxOutPerThread*NaiveThreads {
			return FieldErrors{{FieldBr, fmt.Sprintf("the naive GPU kernel holds at most %d output values per q-tile: Br·d must be at most that (got %d)", naiveMaxOutPerThread*NaiveThreads, c.Br*c.D)}}
		}
		if max(scores, pv) > MaxSharedBytes {
			return FieldErrors{{FieldBc, fmt.Sprintf("tiles of Br=%d, Bc=%d with d=%d need %s of shared memory, above the GPU's %s", c.Br, c.Bc, c.D, FormatBytes(int64(max(scores, pv))), FormatBytes(MaxSharedBytes))}}
		}
	}
	return nil
}

// Launch is one kernel launch of a traced run: the grid, and where each block
// writes its records in the trace buffer (byte offsets; NotTraced for a block
// outside the selection).
type Launch struct {
	Kernel  string // symbol in the PTX
	GridX   int
	GridY   int
	GridZ   int
	Offsets []uint64
}

// NotTraced marks a block that writes no records.
const NotTraced = ^uint64(0)

// TraceLayout is where a traced GPU run's records land: one Launch per kernel
// in launch order, and the size of the trace buffer. The buffer's bytes, in
// order, are the trace's records after its inputs records, exactly as the
// mirror emits them.
type TraceLayout struct {
	Launches []Launch
	Bytes    uint64
}

// GPUTraceLayout lays out the records of c's traced selection in trace order.
// In timing mode every block of the whole grid writes one 56-byte timing
// record per step instead.
func GPUTraceLayout(c *Config) TraceLayout {
	timing := c.Timing
	h := instrument.Header{N: c.N, D: c.D, Br: c.Br, Bc: c.Bc}
	size := func(k instrument.Kind) uint64 {
		if timing {
			return uint64(h.RecordBytes(instrument.KindTiming))
		}
		return uint64(h.RecordBytes(k))
	}
	bhs, qs := c.TracedBH(), c.TracedQ()
	traced := func(bh, i int) bool { return timing || (bhs.Contains(bh) && qs.Contains(i)) }
	tr, tc, nbh := c.Tr(), c.Tc(), c.Batch*c.Heads
	var lay TraceLayout
	newLaunch := func(kernel string, gx, gy, gz int) *Launch {
		lay.Launches = append(lay.Launches, Launch{Kernel: kernel, GridX: gx, GridY: gy, GridZ: gz, Offsets: make([]uint64, gx*gy*gz)})
		l := &lay.Launches[len(lay.Launches)-1]
		for k := range l.Offsets {
			l.Offsets[k] = NotTraced
		}
		return l
	}
	switch c.Variant {
	case instrument.VariantFlash2, instrument.VariantFlash2Fast:
		// One block per (q-tile, batch-head), records in the mirror's order;
		// flash2_fast runs its q-tiles in reverse under a causal mask but
		// finds its records by (batch-head, q-tile), not by launch order.
		name := ""
		if c.Variant == instrument.VariantFlash2 {
			f, _ := Flash2InstanceFor(c)
			name = f.Name()
		} else {
			f, _ := Flash2FastInstanceFor(c)
			name = f.Name(c.Causal)
		}
		l := newLaunch(name, tr, nbh, 1)
		for bh := range nbh {
			for i := range tr {
				if !traced(bh, i) {
					continue
				}
				l.Offsets[bh*tr+i] = lay.Bytes
				lay.Bytes += uint64(flash2KVTiles(c, i))*size(instrument.KindFlashStep) + size(instrument.KindEpilogue)
			}
		}
	case instrument.VariantNaive, instrument.VariantNaiveMMA:
		name := func(phase string) string { return "naive_" + phase }
		if c.Variant == instrument.VariantNaiveMMA {
			f, _ := NaiveMMAInstanceFor(c)
			name = f.Kernel
		}
		scores := newLaunch(name("scores"), tc, tr, nbh)
		for bh := range nbh {
			for i := range tr {
				for j := range tc {
					if traced(bh, i) {
						scores.Offsets[(bh*tr+i)*tc+j] = lay.Bytes
						lay.Bytes += size(instrument.KindScores)
					}
				}
			}
		}
		softmax := newLaunch(name("softmax"), tr, nbh, 1)
		for bh := range nbh {
			for i := range tr {
				if traced(bh, i) {
					softmax.Offsets[bh*tr+i] = lay.Bytes
					lay.Bytes += size(instrument.KindSoftmax)
				}
			}
		}
		pv := newLaunch(name("pv"), tr, nbh, 1)
		for bh := range nbh {
			for i := range tr {
				if traced(bh, i) {
					pv.Offsets[bh*tr+i] = lay.Bytes
					lay.Bytes += uint64(tc)*size(instrument.KindPV) + size(instrument.KindEpilogue)
				}
			}
		}
	}
	return lay
}
