package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Rung 7's loop with its loads done by Hopper's tensor memory accelerator
// (TMA), bf16: the ladder's rung 8, flash3_tma.cu. One thread asks the copy
// engine for each whole tile, which lands swizzled and is counted off an
// mbarrier the warpgroups wait on. What a thread computes is rung 7's, so
// its mirror is flash2_fast's block walk and its bound flash2_fast's.

// flash3TMARung is the ladder's eighth rung.
var flash3TMARung = &VariantInfo{
	Variant:       instrument.VariantFlash3TMA,
	Title:         "wgmma loop, TMA loads (bf16)",
	Summary:       "Rung 7 with its loads handed to the SM's TMA unit: one thread asks for a whole K or V tile with one instruction, the tile lands swizzled, and an mbarrier tells the warpgroups when its bytes are in.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          8,
	Arch:          ArchHopper,
	Gist:          "TMA copies",
	Idea:          "TMA: one thread asks the SM's TMA unit for a whole tile (one instruction a 64-column panel, swizzled on arrival, rows past N zero-filled) and an mbarrier counts its bytes in; the warpgroups wait for K before S and for V before P·V, and no thread computes a load address.",
	Bench:         true,
	StepRun:       "/step?variant=flash3_tma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#ad1457",
	GPURate:       350e12, CPURate: 0.4e9,
	// Rung 7's tiles (docs/LADDER.md). TestInstancesMatchSource checks
	// flash3_tma.cu agrees.
	Tiles: []Tile{{128, 128, 64, 256}, {128, 64, 128, 256}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_TMA_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		return hopperLaunch(c, t, "flash3_tma", 2*(t.Br*t.D+4*t.Bc*t.D)+1024)
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: flash2Records,
}
