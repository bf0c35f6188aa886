package templates

import "flashstep/kernels"

// PageRoleTable is what the stepper's script needs of a warp-specialised
// rung's role records (kernels.RoleTable) to count a roles trace's steps
// before every record has arrived: how many role records follow each
// kv-tile's timing record, and how many the epilogue's. A roles trace of B
// blocks and R records then has (R − B·(1 + PerBlock)) / (1 + PerTile)
// kv-tile steps, and B epilogues.
type PageRoleTable struct {
	PerTile  int  `json:"per_tile"`
	PerBlock int  `json:"per_block"`
	Turns    bool `json:"turns"` // the consumers take turns (rung 10): turn_s and turn_pv spans
}

// RoleTablesForPages is the role table of every rung that records warp
// roles, by the rung's name.
func RoleTablesForPages() map[string]PageRoleTable {
	out := map[string]PageRoleTable{}
	for _, v := range kernels.Variants() {
		if v.Roles == nil {
			continue
		}
		out[v.Name()] = PageRoleTable{PerTile: len(v.Roles.PerTile), PerBlock: len(v.Roles.PerBlock), Turns: v.Roles.Turns}
	}
	return out
}
