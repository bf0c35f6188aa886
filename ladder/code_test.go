package ladder

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
)

// TestCodesOfTheLadder: every built rung and the partner have their source;
// each built rung's diff is from the previous built rung, the partner's from
// naive, and the counts agree with the files' lengths.
func TestCodesOfTheLadder(t *testing.T) {
	t.Parallel()
	all := Codes()
	var prev *kernels.Rung
	check := func(r kernels.Rung, below *kernels.Rung) {
		c := all[r.Name]
		if c == nil {
			t.Fatalf("%s has no code", r.Name)
		}
		ks, err := kernels.Source(r.Variant)
		if err != nil {
			// Built, but its .cu file not written yet: the page says so.
			if c.Missing == "" || c.Lines != nil {
				t.Errorf("%s has no source (%v), its code says %+v", r.Name, err, c)
			}
			return
		}
		if c.Missing != "" || c.File != ks.File || len(c.Lines) != len(ks.Lines) {
			t.Errorf("%s: code of %s, %d lines (%q); the source is %s, %d lines", r.Name, c.File, len(c.Lines), c.Missing, ks.File, len(ks.Lines))
		}
		if below == nil {
			if c.Below != nil || c.HasDiff() {
				t.Errorf("%s, the first built rung, has a diff from %v", r.Name, c.Below.Name)
			}
			return
		}
		if c.Below == nil || c.Below.Name != below.Name {
			t.Fatalf("%s: diff from %v, want from %s", r.Name, c.Below, below.Name)
		}
		b := all[below.Name]
		if b.Missing != "" {
			if c.HasDiff() {
				t.Errorf("%s: a diff from %s, which has no source", r.Name, below.Name)
			}
			return
		}
		if !c.HasDiff() || c.BelowFile != b.File {
			t.Fatalf("%s: no diff from %s: %q", r.Name, below.Name, c.DiffMissing)
		}
		// Both sides keep the same lines: a longest common subsequence.
		if len(b.Lines)-c.Removed != len(c.Lines)-c.Added || c.Added+c.Removed == 0 {
			t.Errorf("%s from %s: +%d −%d of %d and %d lines", r.Name, below.Name, c.Added, c.Removed, len(c.Lines), len(b.Lines))
		}
		if s := c.DiffSummary(); s != fmt.Sprintf("+%d −%d lines", c.Added, c.Removed) {
			t.Errorf("summary %q", s)
		}
	}
	var naive *kernels.Rung
	for _, r := range kernels.Ladder {
		if !r.Built {
			if all[r.Name] != nil {
				t.Errorf("%s is not built, and has code", r.Name)
			}
			continue
		}
		check(r, prev)
		if r.Variant == instrument.VariantNaive {
			naive = &r
		}
		prev = &r
	}
	if naive == nil {
		t.Fatal("no built naive rung")
	}
	check(kernels.NaiveMMA, naive)
}

// TestCodesMissingSources: a built rung whose .cu file is not written yet
// shows no source and no diff, and the rung above it says it has nothing to
// compare with; the first rung shows its whole source and no diff.
func TestCodesMissingSources(t *testing.T) {
	t.Parallel()
	rungs := []kernels.Rung{
		{Number: 1, Name: "one", Built: true},
		{Number: 2, Name: "two", Variant: instrument.VariantNaive, Built: true},
		{Number: 3, Name: "three", Built: false},
		{Number: 4, Name: "four", Built: true},
		{Number: 5, Name: "five", Built: true},
	}
	partner := kernels.Rung{Name: "partner", DiffsAgainst: instrument.VariantNaive}
	files := map[string]string{
		"one":     "a\nb\nc",
		"two":     "a\nB\nc\nd",
		"five":    "x",
		"partner": "a\nb\nc\nd",
	}
	source := func(r kernels.Rung) (*kernels.KernelSource, error) {
		text, ok := files[r.Name]
		if !ok {
			return nil, errors.New("no such file")
		}
		return &kernels.KernelSource{File: "kernels/" + r.Name + ".cu", Lines: strings.Split(text, "\n")}, nil
	}
	got := codes(rungs, partner, source)
	if c := got["one"]; c.Missing != "" || len(c.Lines) != 3 || c.Below != nil || c.HasDiff() {
		t.Errorf("one: %+v", c)
	}
	if c := got["two"]; !c.HasDiff() || c.Below.Name != "one" || c.Added != 2 || c.Removed != 1 || c.DiffSummary() != "+2 −1 lines" || c.BelowFile != "kernels/one.cu" {
		t.Errorf("two: %+v", c)
	}
	if _, ok := got["three"]; ok {
		t.Errorf("an unbuilt rung has code")
	}
	if c := got["four"]; c.Missing == "" || c.Lines != nil || c.HasDiff() || c.Below.Name != "two" || c.DiffMissing == "" {
		t.Errorf("four, with no source: %+v", c)
	}
	if c := got["five"]; c.Missing != "" || c.HasDiff() || c.Below.Name != "four" || !strings.Contains(c.DiffMissing, "Rung 4 (four) has no source") {
		t.Errorf("five, above a rung with no source: %+v", c)
	}
	if c := got["partner"]; !c.HasDiff() || c.Below.Name != "two" || c.Added != 1 || c.Removed != 1 {
		t.Errorf("partner: %+v", c)
	}
	// Nothing changed: a diff with no hunks says so.
	files["two"] = files["one"]
	if c := codes(rungs, partner, source)["two"]; !c.HasDiff() || len(c.Hunks) != 0 || c.DiffSummary() != "no change" {
		t.Errorf("two, the same as one: %+v", c)
	}
}
