package kernels

import "flashstep/instrument"

// Roles mode (docs/ROLES.md): the traced build of a warp-specialised rung
// records, beside a timing record per step, when each warp role did what:
// the producer's copies issued and landed, each consumer's waits, turns,
// products, softmax and epilogue. The CPU mirror has no warps or clocks to
// record, so a roles trace comes from the GPU or a recording of it.

// RoleSlot is one role record of a block's group: whose span, which span.
type RoleSlot struct {
	Role  instrument.Role
	Event instrument.Event
}

// RoleTable is the role records a warp-specialised block writes: PerTile
// after each kv-tile's timing record, PerBlock after its epilogue's. The
// kernels' source (warpspec.cuh, role_slots) numbers the slots in the same
// order, which TestRoleSlotsMatchSource holds it to.
type RoleTable struct {
	PerTile  []RoleSlot
	PerBlock []RoleSlot
	// Turns: the consumers take turns on the tensor cores and record their
	// waits for a turn (rung 10).
	Turns bool
}

// newRoleTable is the table of a block of one producer and two consumer
// warpgroups (rungs 9 and 10), with or without turns.
func newRoleTable(turns bool) *RoleTable {
	t := &RoleTable{Turns: turns}
	for _, e := range []instrument.Event{instrument.EventFreeK, instrument.EventCopyK, instrument.EventFreeV, instrument.EventCopyV} {
		t.PerTile = append(t.PerTile, RoleSlot{instrument.RoleProducer, e})
	}
	consumer := []instrument.Event{instrument.EventWaitK, instrument.EventProductS, instrument.EventSoftmax, instrument.EventWaitV, instrument.EventProductPV}
	if turns {
		consumer = []instrument.Event{instrument.EventWaitK, instrument.EventTurnS, instrument.EventProductS, instrument.EventSoftmax,
			instrument.EventWaitV, instrument.EventTurnPV, instrument.EventProductPV}
	}
	for _, r := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
		for _, e := range consumer {
			t.PerTile = append(t.PerTile, RoleSlot{r, e})
		}
	}
	t.PerBlock = []RoleSlot{
		{instrument.RoleProducer, instrument.EventCopyQ},
		{instrument.RoleConsumer0, instrument.EventWaitQ}, {instrument.RoleConsumer1, instrument.EventWaitQ},
		{instrument.RoleConsumer0, instrument.EventEpilogue}, {instrument.RoleConsumer1, instrument.EventEpilogue},
		{instrument.RoleConsumer0, instrument.EventClock}, {instrument.RoleConsumer0, instrument.EventClock},
	}
	return t
}

// Each warp-specialised rung's table.
var (
	wsRoles       = newRoleTable(false) // rung 9's
	pingPongRoles = newRoleTable(true)  // rung 10's
)

// records is a warp-specialised rung's records of q-tile i: flash2's, and
// in roles mode each step's and the epilogue's role records after it.
func (t *RoleTable) records(c *Config, i int) []kindCount {
	if !c.Roles {
		return flash2Records(c, i)
	}
	var out []kindCount
	for j := range flash2KVTiles(c, i) {
		out = append(out, kindCount{kind: instrument.KindFlashStep, n: 1, j0: j})
		for _, s := range t.PerTile {
			out = append(out, kindCount{kind: instrument.KindRole, n: 1, j0: j, role: s.Role, event: s.Event})
		}
	}
	out = append(out, kindCount{kind: instrument.KindEpilogue, n: 1})
	for _, s := range t.PerBlock {
		out = append(out, kindCount{kind: instrument.KindRole, n: 1, noTile: true, role: s.Role, event: s.Event})
	}
	return out
}

// roleBytes is what a role record's span moved: a copy the bytes its
// barrier was told to expect (whole boxes, zero-filled rows included).
func (c *Config) roleBytes(e instrument.Event) uint64 {
	switch e {
	case instrument.EventCopyQ:
		return uint64(c.Br * c.D * 2)
	case instrument.EventCopyK, instrument.EventCopyV:
		return uint64(c.Bc * c.D * 2)
	}
	return 0
}

// roleVariants names the rungs that record warp roles.
func roleVariants() []string {
	var out []string
	for _, v := range rungs {
		if v.Roles != nil {
			out = append(out, v.Variant.String())
		}
	}
	return out
}
