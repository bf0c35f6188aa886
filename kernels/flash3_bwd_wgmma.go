package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// The backward pass on Hopper's warpgroup products (wgmma), bf16:
// flash3_bwd_wgmma.cu, the first rung of the backward's Hopper ladder. Its
// mirror is flash2_bwd_mma's, unchanged: each thread of a warpgroup holds
// the kv rows, q rows and columns of every tile that a flash2_bwd_mma
// thread holds, so the exponentials, dS and the order of every product's
// 16-term chunks are the same operations; wgmma's sum inside a chunk, like
// mma.sync's, is left to the GPU and the family's bound allows for it.
// What changes is who feeds the tensor cores: warpgroups reading K_j, V_j,
// Q_i, dO_i and dSᵀ from swizzled shared panels through descriptors, where
// flash2_bwd_mma's warps read fragments with ldmatrix.
var flash3BwdWGMMAKernel = &VariantInfo{
	Variant:  instrument.VariantFlash3BwdWGMMA,
	Title:    "Backward, wgmma (bf16)", // the stepper's variant select holds about 50 characters
	Summary:  "flash2_bwd_mma's loop and arithmetic on Hopper's warpgroup products: Sᵀ, dPᵀ and dQ read both operands from shared memory through descriptors, dV and dK take Pᵀ and dSᵀ from registers; Q_i and dO_i streamed by cp.async, dQ added atomically; float32 gradients.",
	DType:    instrument.DTypeBF16,
	Backward: true,
	Loop:     LoopFused,
	Arch:     ArchHopper,
	StepRun:  "/step?variant=flash3_bwd_wgmma&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:   "#5b2a9e",
	BytesNote: "Each step reads Q_i and dO_i (bf16), L_i and D_i, and adds its float32 part of dQ_i into device memory; K_j and V_j are read once per block, " +
		"dK_j and dV_j written once at its end, in float32. Nothing N×N is read or written.",
	Words:   flash2BwdKernel.Words,
	GPURate: 250e12, CPURate: 0.4e9, // 246–369 TFLOP/s measured at N=4096 (docs/LADDER.md, run v)
	// A warpgroup per 64 kv rows (TestInstancesMatchSource checks
	// flash3_bwd_wgmma.cu agrees); the q-tile is 64 rows, one m64n64 Sᵀ.
	// The faster tile of each d comes first (the sweep runs it): 64×128 at
	// d = 128 ran 1.77× the 64×64 tile on the H100.
	Tiles: []Tile{{64, 128, 128, 256}, {64, 64, 64, 128}, {64, 64, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_BWD_WGMMA_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		return fusedBwdLaunches(c, t, "flash3_bwd_wgmma", Flash3BwdWGMMASharedBytes(t), 2)
	},
	TraceSlots: &TraceSlots{Slot: flash2BwdSlot, Count: flash2BwdSlots}, // the same three kernels' grids
	Family:     FamilyFlash2BwdMMA,
	phases:     func(c *Config) int { return c.Tc() + 2 },
	records:    flash2BwdRecords,
}

// Flash3BwdWGMMASharedBytes is the main kernel's dynamic shared memory at t
// (flash3_bwd_wgmma::smem_bytes): K_j and V_j, two buffers each of Q_i and
// dO_i, and dSᵀ, in bf16 panels; two buffers each of L_i·log2 e and D_i and
// each warp's staged 16 × 72 part of dQ_i, float32; 1024 bytes to align the
// panels.
func Flash3BwdWGMMASharedBytes(t Tile) int {
	return 2*(2*t.Bc*t.D+4*t.Br*t.D+t.Br*t.Bc) + 4*4*t.Br + (t.Bc/16)*16*(64+8)*4 + 1024
}
