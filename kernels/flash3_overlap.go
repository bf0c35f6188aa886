package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Rung 10 with each consumer warpgroup overlapping its own softmax with its
// own next product, bf16: the ladder's rung 11, flash3_overlap.cu. In one
// turn a consumer issues the next tile's S and this tile's P·V, waits for
// S alone and computes the next softmax while P·V runs (docs/LADDER.md,
// runs o and s). O still goes through α_j·O then + P_j·V_j per element,
// so the mirror is flash2_fast's block walk and the bound flash2_fast's.

// flash3OverlapRung is the ladder's eleventh rung.
var flash3OverlapRung = &VariantInfo{
	Variant:       instrument.VariantFlash3Overlap,
	Title:         "ping-pong + softmax under P·V (bf16)",
	Summary:       "Rung 10 with each consumer's softmax hidden under its own product: in one turn it issues the next tile's S = QKᵀ and this tile's O += PV, waits for S alone, and computes the next softmax while PV runs.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          11,
	Arch:          ArchHopper,
	Gist:          "the softmax under its own next product",
	Idea:          "Overlap within a warpgroup: a consumer issues S_{j+1} and P_j·V_j together in its turn, waits for S_{j+1} only, and computes tile j+1's max, P and l while P_j·V_j runs; O is scaled by α_{j+1} once P_j·V_j has landed. P_j·V_j reads P_j's registers until then, so P_{j+1} waits as floats in S's registers and is packed after.",
	Bench:         true,
	StepRun:       "/step?variant=flash3_overlap&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#004d40",
	GPURate:       350e12, CPURate: 0.4e9,
	// Rung 10's tiles (docs/LADDER.md). TestInstancesMatchSource checks
	// flash3_overlap.cu agrees.
	Tiles: []Tile{{128, 128, 64, 384}, {128, 128, 128, 384}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_OVERLAP_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		// Q_i and two stages of K_j and V_j (hopper::overlap_smem_bytes).
		return hopperLaunch(c, t, "flash3_overlap", 2*(t.Br*t.D+4*t.Bc*t.D)+1024)
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: flash2Records,
}
