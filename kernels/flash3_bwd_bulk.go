package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// The Hopper backward with dQ added by the copy engine's bulk reduce, bf16:
// flash3_bwd_bulk.cu, the third rung of the backward's Hopper ladder. Its
// loads and products are flash3_bwd_tma's (the .cu includes them), and its
// adds into dQ's float32 accumulator are as unordered between blocks as an
// atomicAdd's, so its mirror and bound are flash2_bwd_mma's. What changes
// is how a warp's part of dQ_i reaches device memory: laid out in shared
// memory as the copy engine's boxes and added by one
// cp.reduce.async.bulk.tensor per box, where flash3_bwd_tma's threads
// issue an atomicAdd per float. With the atomics' padded staging gone it
// also keeps two q-tiles in flight, not three, so that three blocks fit an
// SM at 64×64, d = 64 (run av; each measured apart in docs/LADDER.md).
var flash3BwdBulkKernel = &VariantInfo{
	Variant:  instrument.VariantFlash3BwdBulk,
	Title:    "Backward, wgmma + TMA, bulk dQ (bf16)", // the stepper's variant select holds about 50 characters
	Summary:  "flash3_bwd_tma's loads and products, dQ added by the copy engine: each warp lays its 16 rows of dQ_i out in shared memory as the copy engine's boxes and one thread asks for a bulk reduce-add of each box into the float32 accumulator, where the rung below issues an atomicAdd per float; two q-tiles in flight instead of three, so that three blocks share an SM at d = 64; float32 gradients.",
	DType:    instrument.DTypeBF16,
	Backward: true,
	Loop:     LoopFused,
	Arch:     ArchHopper,
	StepRun:  "/step?variant=flash3_bwd_bulk&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	Colour:   "#9a55e0",
	BytesNote: "Each step reads Q_i and dO_i (bf16), L_i and D_i, copied by the TMA engine, and adds its float32 part of dQ_i into device memory by the copy engine's bulk reduce; K_j and V_j are read once per block, " +
		"dK_j and dV_j written once at its end, in float32. Nothing N×N is read or written.",
	Words:   flash2BwdKernel.Words,
	GPURate: 300e12, CPURate: 0.4e9, // 359–436 TFLOP/s measured at N=4096 on the H200 (docs/LADDER.md, run av)
	// flash3_bwd_tma's tiles (TestInstancesMatchSource checks
	// flash3_bwd_bulk.cu agrees), the faster of each d first.
	Tiles: []Tile{{64, 128, 128, 256}, {64, 64, 64, 128}, {64, 64, 128, 128}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_BWD_BULK_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		// flash3_bwd_tma's kernels and tensor maps, dQ's accumulator a
		// tensor map the warps add into.
		return tmaBwdLaunches(c, t, "flash3_bwd_bulk", Flash3BwdBulkSharedBytes(t), TAdd(BufDQ, c))
	},
	TraceSlots: &TraceSlots{Slot: flash2BwdSlot, Count: flash2BwdSlots}, // the same three kernels' grids
	Family:     FamilyFlash2BwdMMA,
	phases:     func(c *Config) int { return c.Tc() + 2 },
	records:    flash2BwdRecords,
}

// Flash3BwdBulkStages is how many q-tiles flash3_bwd_bulk's pipeline holds
// at once (BulkDQ::stages): two, one fewer than flash3_bwd_tma's, so that
// three blocks fit an SM at 64×64, d = 64 (run av).
const Flash3BwdBulkStages = 2

// Flash3BwdBulkSharedBytes is the main kernel's dynamic shared memory at t
// (flash3_bwd_bulk::smem_bytes): flash3_bwd_tma's at Flash3BwdBulkStages,
// with each warp's stage of dQ_i two unpadded boxes of 16 rows × 32 floats
// (4096 bytes) for each pass of 64 columns in place of its padded 16 × 72.
func Flash3BwdBulkSharedBytes(t Tile) int {
	const ns = Flash3BwdBulkStages
	// A pass per 64 of a warpgroup's columns of dQ; the planner also asks
	// of tiles no kernel is compiled for (the sweep's byte counts), which
	// get one.
	passes := 1
	if wg := t.Bc / 64; wg > 0 && t.D/wg >= 64 {
		passes = t.D / wg / 64
	}
	return 2*(2*t.Bc*t.D+2*ns*t.Br*t.D+t.Br*t.Bc) + (t.Bc/16)*passes*16*64*4 + 2*ns*t.Br*4 + 1024
}
