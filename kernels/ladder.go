package kernels

import "flashstep/instrument"

// Rung is one step of the kernel ladder, from the first kernel a student
// writes to FlashAttention-2's speed and past it on Hopper: one idea per rung, as the ladder page
// and the course show it. A rung not built yet says so (Built false) and
// names no variant.
type Rung struct {
	Number  int
	Name    string
	Variant instrument.Variant // the variant that runs it, when built
	DType   string
	Idea    string
	Gist    string // the idea in a few words
	Arch    Arch   // ArchHopper for a rung on Hopper's own instructions
	Built   bool
	// Bench names the rung's kernels in the ladder bench
	// (bench/ladder/bench.cu), whose recorded figures the page shows; empty
	// for the float32 rungs, which the recorded sweep times.
	Bench string
	// DiffsAgainst is, for the partner, the rung whose code its code is
	// shown against.
	DiffsAgainst instrument.Variant
}

// planned are the rungs to come, numbered after the built ones.
var planned = []Rung{}

// Ladder is the rungs in order: the registry's (VariantInfo.Rung), then the
// planned ones. NaiveMMA is the tensor-core naive partner: not a rung, the
// like-for-like comparison for the last ones.
var Ladder, NaiveMMA = ladder()

func ladder() (rungsInOrder []Rung, partner Rung) {
	for _, v := range rungs {
		if v.Backward || v.Decode { // the backward's and decoding's kernels climb no forward ladder
			continue
		}
		r := v.ladderRung()
		if v.Rung == 0 {
			partner = r
			continue
		}
		rungsInOrder = append(rungsInOrder, r)
	}
	for _, p := range planned {
		p.Number = len(rungsInOrder) + 1
		rungsInOrder = append(rungsInOrder, p)
	}
	return rungsInOrder, partner
}

func (v *VariantInfo) ladderRung() Rung {
	r := Rung{Number: v.Rung, Name: v.Name(), Variant: v.Variant, DType: v.DType.String(), Idea: v.Idea, Gist: v.Gist, Arch: v.Arch, Built: v.Rung > 0, DiffsAgainst: v.DiffsAgainst}
	if v.Bench {
		r.Bench = v.Name()
	}
	return r
}
