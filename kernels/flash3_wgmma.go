package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// FlashAttention-2's loop on Hopper's warpgroup products (wgmma), bf16: the
// ladder's rung 7, flash3_wgmma.cu. Its mirror is flash2_fast's block walk,
// unchanged: each thread of a warpgroup holds the rows and columns of S and
// O that a rung-6 thread with one 16-row atom holds, so the masks, the
// softmax in exp2 form, the quad's partial sums of l and the rescale of O
// are the same operations in the same order. The products are wgmma's
// instead of mma.sync's; both add 16-term chunks of exact bf16 products to a
// float32 accumulator, in an order neither documents, which the GPU bound
// for flash2_fast allows (kernelstest).

// flash3WGMMARung is the ladder's seventh rung.
var flash3WGMMARung = &VariantInfo{
	Variant:       instrument.VariantFlash3WGMMA,
	Title:         "FlashAttention-2 loop, wgmma (bf16)", // the stepper's variant select holds about 50 characters (layout_test.go measures it)
	Summary:       "Rung 6's loop and softmax with Hopper's warpgroup products: each 64-row slice of S = QKᵀ and O += PV is one asynchronous wgmma reading its operands from shared memory, instead of 16×8 mma.sync tiles fed through ldmatrix.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          7,
	Arch:          ArchHopper,
	Gist:          "wgmma",
	Idea:          "wgmma: a warpgroup of four warps issues one 64×N product whose operands the tensor cores read from shared memory themselves, through a descriptor of the tile's swizzled layout; no ldmatrix, no fragments of Q, K or V in registers. P stays in registers as the A operand of P·V. K and V are double-buffered by cp.async; each product is still waited for before the softmax.",
	Bench:         true,
	StepRun:       "/step?variant=flash3_wgmma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#7a1fa2",
	GPURate:       350e12, CPURate: 0.4e9,
	// Two warpgroups of 64 rows each; at d=128, 64-column kv-tiles ran
	// 1.12× faster than 128 (docs/LADDER.md, run l). TestInstancesMatchSource
	// checks flash3_wgmma.cu agrees.
	Tiles: []Tile{{128, 128, 64, 256}, {128, 64, 128, 256}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_WGMMA_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		name := fmt.Sprintf("flash3_wgmma_br%d_bc%d_d%d", t.Br, t.Bc, t.D)
		if c.Causal {
			name += "_causal"
		}
		// Q_i and two stages of K_j and V_j in bf16, and 1024 bytes to
		// align the panels (hopper::smem_bytes).
		return Launches{Kernels: []Launch{{Name: name, Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1},
			Threads: t.Threads, Shared: 2*(t.Br*t.D+4*t.Bc*t.D) + 1024, Args: append(QKVO(), Val(c.N), ScaleArg(c))}}}
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: flash2Records,
}
