package roles_test

import (
	"bytes"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/recordings"
	"flashstep/roles"
)

// recorded is a shipped roles recording, decoded afresh for each case.
func recorded(t *testing.T, name string) (kernels.Config, *instrument.Header, []*instrument.Record) {
	t.Helper()
	raw, err := recordings.Files.ReadFile(name + ".fstrace")
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return kernels.ConfigFromHeader(h), h, recs
}

// find is the role record of (bh, i) with role, event and kv-tile j.
func find(t *testing.T, recs []*instrument.Record, bh, i int, role instrument.Role, e instrument.Event, j int) *instrument.Record {
	t.Helper()
	for _, r := range recs {
		if r.Kind == instrument.KindRole && r.BH == bh && r.I == i && r.Role == role && r.Event == e && r.J == j {
			return r
		}
	}
	t.Fatalf("no %s %s at (%d, %d, %d)", role, e, bh, i, j)
	return nil
}

// Check passes the shipped recordings and names what is wrong with each
// broken copy of rung 10's: products out of turn, a stage refilled before
// its products ended, a copy landing after a product read it, spans out of
// program order, a step's spans outside its timing record.
func TestCheckCatchesBrokenTraces(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"ws-roles", "pingpong-roles"} {
		c, h, recs := recorded(t, name)
		if _, err := roles.Check(c, h, recs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	const bh, i, j = 2, 5, 4
	c0, c1, prod := instrument.RoleConsumer0, instrument.RoleConsumer1, instrument.RoleProducer
	for _, tc := range []struct {
		says   string
		break_ func(t *testing.T, recs []*instrument.Record)
	}{
		{"turns", func(t *testing.T, recs []*instrument.Record) {
			// Consumer 1 issues S_j at the moment consumer 0 does.
			s0, s1 := find(t, recs, bh, i, c0, instrument.EventProductS, j), find(t, recs, bh, i, c1, instrument.EventProductS, j)
			turn := find(t, recs, bh, i, c1, instrument.EventTurnS, j)
			s1.TStart, turn.TEnd = s0.TStart, s0.TStart
			turn.TStart = min(turn.TStart, turn.TEnd)
		}},
		{"stage refilled early", func(t *testing.T, recs []*instrument.Record) {
			// K_j's stage freed before consumer 0's S_{j-2} had ended.
			f := find(t, recs, bh, i, prod, instrument.EventFreeK, j)
			s := find(t, recs, bh, i, c0, instrument.EventProductS, j-2)
			f.TEnd = s.TEnd - 1
			f.TStart = min(f.TStart, f.TEnd)
		}},
		{"copy landed after a read", func(t *testing.T, recs []*instrument.Record) {
			// V_j lands a microsecond after consumer 1's P·V_j began.
			cp := find(t, recs, bh, i, prod, instrument.EventCopyV, j)
			cp.TEnd = find(t, recs, bh, i, c1, instrument.EventProductPV, j).TStart + 1000
		}},
		{"program order", func(t *testing.T, recs []*instrument.Record) {
			// Consumer 0's softmax begins before its S product ended.
			sm := find(t, recs, bh, i, c0, instrument.EventSoftmax, j)
			sm.TStart = find(t, recs, bh, i, c0, instrument.EventProductS, j).TEnd - 50
		}},
		{"timing record", func(t *testing.T, recs []*instrument.Record) {
			// The step's timing record ends a microsecond before consumer 0's P·V did.
			pv := find(t, recs, bh, i, c0, instrument.EventProductPV, j)
			for _, r := range recs {
				if r.Kind == instrument.KindTiming && r.BH == bh && r.I == i && r.J == j {
					r.TEnd = pv.TEnd - 1000
				}
			}
		}},
	} {
		c, h, recs := recorded(t, "pingpong-roles")
		tc.break_(t, recs)
		_, err := roles.Check(c, h, recs)
		if err == nil || !strings.Contains(err.Error(), tc.says+":") {
			t.Errorf("a trace broken for %q: Check says %v", tc.says, err)
		}
	}
}
