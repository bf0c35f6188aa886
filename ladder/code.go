package ladder

import (
	"fmt"
	"sync"

	"flashstep/kernels"
	"flashstep/srcdiff"
)

// DiffContext is how many unchanged lines the page shows either side of a
// change, as diff -u does.
const DiffContext = 3

// Code is a rung's CUDA source and what changed from the rung below: the
// previous built rung of kernels.Ladder (the naive_mma partner's is rung 2,
// naive). A rung whose .cu file is not written yet has no Lines, and says so
// in Missing.
type Code struct {
	File    string
	Lines   []string
	Missing string // why there is no source, when there is none
	// Below is the rung the diff is from; nil for the first built rung,
	// which shows its whole source.
	Below     *kernels.Rung
	BelowFile string
	// DiffMissing says why there is no diff from Below (its source, or this
	// rung's, is not written yet).
	DiffMissing    string
	Hunks          []srcdiff.Hunk
	Added, Removed int
}

// HasDiff says whether the page can show a diff from the rung below.
func (c *Code) HasDiff() bool { return c != nil && c.Below != nil && c.DiffMissing == "" }

// DiffSummary is the diff's one line: "+120 −80 lines".
func (c *Code) DiffSummary() string {
	if len(c.Hunks) == 0 {
		return "no change"
	}
	return fmt.Sprintf("+%d −%d lines", c.Added, c.Removed)
}

// Codes is every built rung's Code, and the naive_mma partner's, by rung
// name: worked out once, from the sources embedded in the binary.
var Codes = sync.OnceValue(func() map[string]*Code {
	return codes(kernels.Ladder, kernels.NaiveMMA, func(r kernels.Rung) (*kernels.KernelSource, error) {
		return kernels.Source(r.Variant)
	})
})

// codes lays out each built rung's source and its diff from the one below;
// source reads a rung's .cu file.
func codes(rungs []kernels.Rung, partner kernels.Rung, source func(kernels.Rung) (*kernels.KernelSource, error)) map[string]*Code {
	out := map[string]*Code{}
	read := func(r kernels.Rung) *Code {
		c := &Code{}
		ks, err := source(r)
		if err != nil || len(ks.Lines) == 0 {
			c.Missing = fmt.Sprintf("The source of %s is not written yet.", r.Name)
			return c
		}
		c.File, c.Lines = ks.File, ks.Lines
		return c
	}
	diff := func(c, below *Code, r kernels.Rung) {
		c.Below, c.BelowFile = &r, below.File
		switch {
		case c.Missing != "":
			c.DiffMissing = c.Missing
		case below.Missing != "":
			c.DiffMissing = fmt.Sprintf("Rung %d (%s) has no source yet to compare with.", r.Number, r.Name)
		default:
			c.Hunks = srcdiff.Hunks(below.Lines, c.Lines, DiffContext)
			c.Added, c.Removed = srcdiff.Count(c.Hunks)
		}
	}
	var prev *kernels.Rung
	for _, r := range rungs {
		if !r.Built {
			continue
		}
		c := read(r)
		if prev != nil {
			diff(c, out[prev.Name], *prev)
		}
		out[r.Name] = c
		prev = &r
	}
	p := read(partner)
	for _, r := range rungs {
		if r.Variant == partner.DiffsAgainst && r.Built {
			diff(p, out[r.Name], r)
		}
	}
	out[partner.Name] = p
	return out
}
