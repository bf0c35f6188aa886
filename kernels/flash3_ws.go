package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Rung 8 with warp specialisation, bf16: the ladder's rung 9, flash3_ws.cu.
// A producer warpgroup only issues the TMA copies; the consumer warpgroups
// only compute, passing stages back through mbarriers instead of meeting at
// a __syncthreads; setmaxnreg moves registers from the producer to the
// consumers. A consumer thread computes what a rung-7 thread does, so the
// mirror is flash2_fast's block walk and the bound flash2_fast's.

// flash3WSRung is the ladder's ninth rung.
var flash3WSRung = &VariantInfo{
	Variant:       instrument.VariantFlash3WS,
	Title:         "wgmma + TMA, warp-specialised (bf16)",
	Summary:       "Rung 8 split by role: a producer warpgroup only asks for copies, two consumer warpgroups only compute, full and empty mbarriers hand each K and V stage between them, and setmaxnreg gives the producer's registers to the consumers.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          9,
	Arch:          ArchHopper,
	Roles:         wsRoles,
	Gist:          "warp specialisation",
	Idea:          "Warp specialisation: a producer warpgroup only issues TMA copies and consumer warpgroups only compute; full and empty mbarriers pass each stage between them, so no warpgroup waits for another, only for its data; setmaxnreg takes the producer down to 24 registers a thread and the consumers up to 240.",
	Bench:         true,
	StepRun:       "/step?variant=flash3_ws&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#4a148c",
	GPURate:       350e12, CPURate: 0.4e9,
	// Two consumer warpgroups and the producer's: 384 threads, one block
	// an SM (docs/LADDER.md). TestInstancesMatchSource checks flash3_ws.cu
	// agrees.
	Tiles: []Tile{{128, 128, 64, 384}, {128, 128, 128, 384}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_WS_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		// Q_i and two stages of K_j and V_j (hopper::ws_smem_bytes).
		return hopperLaunch(c, t, "flash3_ws", 2*(t.Br*t.D+4*t.Bc*t.D)+1024)
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: wsRoles.records,
}
