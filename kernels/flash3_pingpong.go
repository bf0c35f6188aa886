package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Rung 9 with its two consumer warpgroups taking turns on the tensor cores,
// bf16: the ladder's rung 10, flash3_pingpong.cu. Named barriers order the
// consumers' products, one's then the other's, so that each computes its
// softmax while the other's product runs. A consumer thread computes what
// a rung-7 thread does, so the mirror is flash2_fast's block walk and the
// bound flash2_fast's.

// flash3PingPongRung is the ladder's tenth rung.
var flash3PingPongRung = &VariantInfo{
	Variant:       instrument.VariantFlash3PingPong,
	Title:         "warp-specialised, ping-pong (bf16)",
	Summary:       "Rung 9 with its two consumer warpgroups taking turns: each issues its product only on its turn and then passes the turn, so one computes its softmax while the other's product keeps the tensor cores busy.",
	DType:         instrument.DTypeBF16,
	Loop:          LoopFused,
	HeaviestFirst: true,
	Rung:          10,
	Arch:          ArchHopper,
	Roles:         pingPongRoles,
	Gist:          "ping-pong",
	Idea:          "Ping-pong: two named barriers pass a turn between the consumer warpgroups, which issue their products alternately (S of one, S of the other, P·V of one, P·V of the other), so one warpgroup's softmax runs under the other's products instead of beside them. Measured (docs/LADDER.md, run r): the turns hold, and cost rung 9 about 7%, since each consumer still waits for its own product at once.",
	Bench:         true,
	StepRun:       "/step?variant=flash3_pingpong&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	Colour:        "#1a237e",
	GPURate:       350e12, CPURate: 0.4e9,
	// Rung 9's tiles (docs/LADDER.md). TestInstancesMatchSource checks
	// flash3_pingpong.cu agrees.
	Tiles: []Tile{{128, 128, 64, 384}, {128, 128, 128, 384}},
	Instance: func(t Tile) string {
		return fmt.Sprintf("FLASH3_PINGPONG_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D)
	},
	Launches: func(c *Config, t Tile) Launches {
		// Q_i and two stages of K_j and V_j (hopper::pingpong_smem_bytes).
		return hopperLaunch(c, t, "flash3_pingpong", 2*(t.Br*t.D+4*t.Bc*t.D)+1024)
	},
	Family:  FamilyFlash2Fast,
	phases:  onePhase,
	records: pingPongRoles.records,
}
