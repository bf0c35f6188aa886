package lab

import (
	"context"
	"math"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
)

// asStudent is what a correct kernel of exercise e reports for run c: the
// mirror's records, thread by thread, and the float64 reference's O and LSE
// rounded to float32.
func asStudent(t *testing.T, c kernels.Config) (KernelRun, []*instrument.Record) {
	t.Helper()
	run, err := c.Check()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*instrument.Record
	if err := kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	var got KernelRun
	for _, r := range recs {
		if r.Kind != instrument.KindFlashStep {
			continue
		}
		for row := range r.RowsValid {
			got.Steps = append(got.Steps, StepSeen{BH: r.BH, I: r.I, J: r.J, R: row, M: Float(r.MNew[row]), L: Float(r.L[row]),
				O: append([]float32(nil), r.O[row*c.D:(row+1)*c.D]...)})
		}
	}
	for bh := range c.Batch * c.Heads {
		o, lse := kernels.Reference(kernels.GenerateInputs(&c, bh), c.N, c.D, c.Causal)
		for _, v := range o {
			got.O = append(got.O, float32(v))
		}
		for _, v := range lse {
			got.LSE = append(got.LSE, float32(v))
		}
	}
	return got, recs
}

// TestGradeKernelRun holds the kernel track's grader to its edges: a
// kernel that reports the reference kernel's own numbers passes; one
// element poisoned (off by twice the tolerance, or NaN), a record missing,
// a tile the kernel skips recorded, or one output off fails there.
func TestGradeKernelRun(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, e := range All() {
		if e.Track != TrackKernel {
			continue
		}
		got, recs := asStudent(t, e.Run)
		if m := GradeKernelRun(e.Run, got, recs, true); m != nil {
			t.Fatalf("%s: the reference's own numbers fail: %+v", e.ID, *m)
		}
		// One step's O element, just outside and just inside the tolerance.
		k := rng.IntN(len(got.Steps))
		s := &got.Steps[k]
		x := rng.IntN(len(s.O))
		old := s.O[x]
		scale := 0.0
		for _, v := range s.O {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		bound := REL*math.Abs(float64(old)) + ABS*scale
		for _, tc := range []struct {
			v    float32
			fail bool
		}{{old + float32(2*bound), true}, {old + float32(0.5*bound), false}, {float32(math.NaN()), true}} {
			s.O[x] = tc.v
			m := GradeKernelRun(e.Run, got, recs, true)
			if (m != nil) != tc.fail || (m != nil && (m.I != s.I || m.J != s.J || m.Row != s.I*e.Run.Br+s.R || m.Quantity != "O" || m.X != x)) {
				t.Errorf("%s: O[%d] of row %d, kv-tile %d set to %v (kernel %v, bound %.3g): %+v", e.ID, x, s.R, s.J, tc.v, old, bound, m)
			}
		}
		s.O[x] = old
		// A missing record, then an extra one.
		missing := *s
		got.Steps = append(got.Steps[:k:k], got.Steps[k+1:]...)
		if m := GradeKernelRun(e.Run, got, recs, true); m == nil || m.Message == "" || m.J != missing.J {
			t.Errorf("%s: a missing record: %+v", e.ID, m)
		}
		got.Steps = append(got.Steps, missing, StepSeen{BH: 0, I: 0, J: e.Run.Tc() - 1, R: 0, O: make([]float32, e.Run.D)})
		m := GradeKernelRun(e.Run, got, recs, true)
		if e.Run.Causal && (m == nil || m.J != e.Run.Tc()-1) {
			t.Errorf("%s: a record of a tile the kernel skips: %+v", e.ID, m)
		}
		got.Steps = got.Steps[:len(got.Steps)-1]
		// The output: one LSE off.
		got.LSE[3] += 0.01
		if m := GradeKernelRun(e.Run, got, recs, true); m == nil || m.Quantity != "LSE" || m.Row != 3 {
			t.Errorf("%s: an LSE off by 0.01: %+v", e.ID, m)
		}
	}
}
