package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// The Hopper backward with its loads done by the tensor memory accelerator
// (TMA), bf16: flash3_bwd_tma.cu, the second rung of the backward's Hopper
// ladder. Its products are flash3_bwd_wgmma's, line for line (the .cu
// includes them), so its mirror is flash2_bwd_mma's, as that rung's is.
// What changes is how Q_i, dO_i, L_i and D_i arrive: one thread asks the
// copy engine for each q-tile's four pieces into three stages, counted
// off an mbarrier per stage, where flash3_bwd_wgmma's threads each copy
// their share by cp.async one q-tile ahead and meet at a barrier.
var flash3BwdTMAKernel = &VariantInfo{
	Variant:  instrument.VariantFlash3BwdTMA,
	Title:    "Backward, wgmma + TMA (bf16)", // the stepper's variant select holds about 50 characters
	Summary:  "flash3_bwd_wgmma's products, its loads done by the copy engine: one thread asks for Q_i, dO_i, L_i and D_i into three stages (two q-tiles on their way while one is multiplied), each stage's bytes counted off an mbarrier the warpgroups wait on; dQ added atomically; float32 gradients.",
	DType:    instrument.DTypeBF16,
	Backward: true,
	Loop:     LoopFused,
	Arch:     ArchHopper,
	StepRun:  "/step?variant=flash3_bwd_tma&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:   "#7a3fc0",
	BytesNote: "Each step reads Q_i and dO_i (bf16), L_i and D_i, copied by the TMA engine, and adds its float32 part of dQ_i into device memory; K_j and V_j are read once per block, " +
		"dK_j and dV_j written once at its end, in float32. Nothing N×N is read or written.",
	Words:   flash2BwdKernel.Words,
	GPURate: 280e12, CPURate: 0.4e9, // 281–425 TFLOP/s measured at N=4096 on the H100 (docs/LADDER.md)
	// flash3_bwd_wgmma's tiles (TestInstancesMatchSource checks
	// flash3_bwd_tma.cu agrees), the faster of each d first.
	Tiles: []Tile{{64, 128, 128, 256}, {64, 64, 64, 128}, {64, 64, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_BWD_TMA_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		return tmaBwdLaunches(c, t, "flash3_bwd_tma", Flash3BwdTMASharedBytes(t), Buf(BufDQ))
	},
	TraceSlots: &TraceSlots{Slot: flash2BwdSlot, Count: flash2BwdSlots}, // the same three kernels' grids
	Family:     FamilyFlash2BwdMMA,
	phases:     func(c *Config) int { return c.Tc() + 2 },
	records:    flash2BwdRecords,
}

// Flash3BwdTMAStages is how many q-tiles the pipeline holds at once
// (flash3_bwd_tma::NS).
const Flash3BwdTMAStages = 3

// Flash3BwdTMASharedBytes is the main kernel's dynamic shared memory at t
// (flash3_bwd_tma::smem_bytes): K_j and V_j, three stages each of Q_i and
// dO_i, and dSᵀ, in bf16 panels; three stages each of L_i and D_i and each
// warp's staged 16 × 72 part of dQ_i, float32; 1024 bytes to align the
// panels.
func Flash3BwdTMASharedBytes(t Tile) int {
	const ns = Flash3BwdTMAStages
	return 2*(2*t.Bc*t.D+2*ns*t.Br*t.D+t.Br*t.Bc) + 2*ns*t.Br*4 + (t.Bc/16)*16*(64+8)*4 + 1024
}

// tmaBwdLaunches are the three kernels of a backward rung that copies by
// TMA (flash3_bwd_tma, flash3_bwd_bulk): the pre kernel lays D and L·log2 e
// out in whole q-tiles (BufLT), and the main kernel reads them, Q, K, V and
// dO through tensor maps; dq is how it reaches dQ's accumulator (its
// address, or a tensor map it adds into).
func tmaBwdLaunches(c *Config, t Tile, prefix string, shared int, dq Arg) Launches {
	l := fusedBwdLaunches(c, t, prefix, shared, 2)
	tiled := int64(c.Batch*c.Heads) * int64(c.Tr()*c.Br) * 4
	l.Extra[BufDelta], l.Extra[BufLT] = tiled, tiled
	l.Kernels[0].Args = append(l.Kernels[0].Args, Buf(BufLT))
	l.Kernels[1].Args = []Arg{TMap(BufQ, c, t.Br), TMap(BufK, c, t.Bc), TMap(BufV, c, t.Bc), TMap(BufDO, c, t.Br),
		TRun(BufLT, c), TRun(BufDelta, c), dq, Buf(BufDK), Buf(BufDV),
		Val(c.N), ScaleArg(c), CausalArg(c)}
	return l
}
