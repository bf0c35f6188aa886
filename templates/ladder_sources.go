package templates

import (
	"fmt"
	"strings"

	"flashstep/ladder"
)

// hopperSources is the backward recording's Hopper rungs' sources and PTX
// as benched, each "; file sha256 …, its PTX …", for the provenance line.
func hopperSources(rec *ladder.BackwardRecord) string {
	var b strings.Builder
	for _, h := range rec.Hopper {
		fmt.Fprintf(&b, "; %s sha256 %s, its PTX %s", h.File, h.Sha, h.PTXSha)
	}
	return b.String()
}
