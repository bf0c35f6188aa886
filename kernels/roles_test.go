package kernels

import (
	"context"
	"errors"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// In roles mode every block's region is, per kv-tile, its timing record
// and the table's PerTile role records, then the epilogue's timing record
// and PerBlock: the order the kernel writes (kernels/cuda/hopper/warpspec.cuh,
// role_slots) and the worker reads (launch.PlaceRoles). Without the role
// records it is the timing schedule, record for record.
func TestRolesSchedule(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, v := range []instrument.Variant{instrument.VariantFlash3WS, instrument.VariantFlash3PingPong} {
		table := Info(v).Roles
		for range 40 {
			c := Config{Variant: v, N: 1 + rng.IntN(1200), D: 64, Br: 128, Bc: 128, Batch: 1 + rng.IntN(2), Heads: 1 + rng.IntN(3),
				Causal: rng.IntN(2) == 0, Pattern: instrument.PatternNormal, Seed: rng.Uint64(), Timing: true, Roles: true}
			c.N = max(c.N, 128)
			if err := c.Validate(); err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
			sched := Schedule(&c)
			timing := c
			timing.Roles = false
			plain := Schedule(&timing)
			k, p := 0, 0
			for bh := range c.Batch * c.Heads {
				for i := range c.Tr() {
					jEnd := flash2KVTiles(&c, i)
					want := func(kind instrument.Kind, j int, s RoleSlot) {
						t.Helper()
						got := sched[k]
						if got.Kind != kind || got.BH != bh || got.I != i || got.J != j || got.Role != s.Role || got.Event != s.Event {
							t.Fatalf("%s N=%d causal=%t record %d: %+v, want %s of %s (%d,%d,%d)", v, c.N, c.Causal, k, got, kind, s.Event, bh, i, j)
						}
						if kind == instrument.KindTiming {
							if plain[p] != got {
								t.Fatalf("%s record %d: %+v, the timing schedule has %+v", v, k, got, plain[p])
							}
							p++
						}
						k++
					}
					for j := range jEnd {
						want(instrument.KindTiming, j, RoleSlot{})
						for _, s := range table.PerTile {
							want(instrument.KindRole, j, s)
						}
					}
					want(instrument.KindTiming, -1, RoleSlot{})
					for _, s := range table.PerBlock {
						want(instrument.KindRole, -1, s)
					}
				}
			}
			if k != len(sched) || p != len(plain) {
				t.Fatalf("%s: %d of %d records, %d of %d timing records", v, k, len(sched), p, len(plain))
			}
			if h := c.Header(instrument.SourceGPU, ""); h.Records != len(sched) || c.TraceBytes() != int64(h.HeaderBytes()+56*len(sched)) {
				t.Fatalf("%s: header counts %d records and TraceBytes %d, the schedule %d records", v, h.Records, c.TraceBytes(), len(sched))
			}
		}
	}
}

// Rung 9's consumers record five spans a kv-tile, rung 10's seven (the two
// turns); the producer four; the closing group seven.
func TestRoleTables(t *testing.T) {
	for v, perTile := range map[instrument.Variant]int{instrument.VariantFlash3WS: 14, instrument.VariantFlash3PingPong: 18} {
		table := Info(v).Roles
		if len(table.PerTile) != perTile || len(table.PerBlock) != 7 {
			t.Errorf("%s: %d role records a kv-tile and %d a block, want %d and 7", v, len(table.PerTile), len(table.PerBlock), perTile)
		}
		for _, s := range append(append([]RoleSlot(nil), table.PerTile...), table.PerBlock...) {
			if !s.Role.HasEvent(s.Event) {
				t.Errorf("%s: %s has no event %s", v, s.Role, s.Event)
			}
		}
	}
	for _, info := range Variants() {
		if info.Roles != nil && info.Variant != instrument.VariantFlash3WS && info.Variant != instrument.VariantFlash3PingPong {
			t.Errorf("%s has a role table the kernels do not write", info.Variant)
		}
	}
}

// The mirror has no warps or clocks: it refuses roles mode with a reason.
func TestMirrorRefusesRoles(t *testing.T) {
	c := Config{Variant: instrument.VariantFlash3WS, N: 256, D: 64, Br: 128, Bc: 128, Batch: 1, Heads: 1,
		Pattern: instrument.PatternNormal, Timing: true, Roles: true}
	err := RunMirror(context.Background(), mustRun(t, c), func(*instrument.Record) error { return nil })
	var fe FieldErrors
	if !errors.As(err, &fe) || fe.ByField()[FieldMode] == "" {
		t.Fatalf("RunMirror in roles mode: %v, want an error on the mode field", err)
	}
}
