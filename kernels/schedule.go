package kernels

import "flashstep/instrument"

// StepRef names one step of a trace, without its numbers.
type StepRef struct {
	Kind                 instrument.Kind
	BH, I, J             int
	RowsValid, ColsValid int
	// A role record's role, event and the bytes its copy moved.
	Role      instrument.Role
	Event     instrument.Event
	BytesRead uint64
}

// Schedule lists the steps of c's trace (every record after the inputs) in
// trace order: what the mirror emits and where the GPU writes, without
// computing anything.
func Schedule(c *Config) []StepRef {
	info := variantInfo[c.Variant]
	bhs, qs := c.TracedBH(), c.TracedQ()
	var phases [][]StepRef
	for range info.phases(c) {
		phases = append(phases, nil)
	}
	for bh := bhs.Lo; bh < bhs.Hi; bh++ {
		for i := qs.Lo; i < qs.Hi; i++ {
			rows := c.RowsValidOf(i)
			for _, kc := range info.records(c, i) {
				for j := range kc.n {
					ref := StepRef{Kind: kc.kind, BH: bh, I: i, J: -1, RowsValid: rows}
					if spec, _ := instrument.Spec(kc.kind); spec.HasJ && !kc.noTile {
						ref.J, ref.ColsValid = kc.j0+j, c.ColsValidOf(kc.j0+j)
						if kc.noCols { // a split: no columns, and in a timing trace no kv-tile
							ref.ColsValid = 0
							if c.Timing {
								ref.J = -1
							}
						}
					}
					if kc.kind == instrument.KindRole {
						ref.Role, ref.Event, ref.BytesRead = kc.role, kc.event, c.roleBytes(kc.event)
					} else if c.Timing {
						ref.Kind = instrument.KindTiming
					}
					phases[kc.phase] = append(phases[kc.phase], ref)
				}
			}
		}
	}
	var out []StepRef
	for _, p := range phases {
		out = append(out, p...)
	}
	return out
}

// Record is the step as a record without arrays, for the traffic models.
func (s StepRef) Record() *instrument.Record {
	return &instrument.Record{Kind: s.Kind, BH: s.BH, I: s.I, J: s.J, RowsValid: s.RowsValid, ColsValid: s.ColsValid,
		Role: s.Role, Event: s.Event, BytesRead: s.BytesRead}
}

// RowsValidOf and ColsValidOf are the data rows of q-tile i and columns of
// kv-tile j.
func (c *Config) RowsValidOf(i int) int { return min(c.Br, c.Queries()-i*c.Br) }
func (c *Config) ColsValidOf(j int) int { return min(c.Bc, c.N-j*c.Bc) }
