package kernels

import (
	"context"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// The schedule is the mirror's record sequence, without the numbers.
func TestScheduleIsTheMirrorsOrder(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for _, c := range runsOf(rng, instrument.Variants, 200, 20, randomConfig) {
		sched := Schedule(&c)
		k := 0
		err := RunMirror(context.Background(), mustRun(t, c), func(r *instrument.Record) error {
			if r.Kind == instrument.KindInputs {
				return nil
			}
			s := sched[k]
			if s.Kind != r.Kind || s.BH != r.BH || s.I != r.I || s.J != r.J || s.RowsValid != r.RowsValid || s.ColsValid != r.ColsValid {
				t.Fatalf("%+v step %d: schedule %+v, mirror %s (%d,%d,%d)", c, k, s, r.Kind, r.BH, r.I, r.J)
			}
			k++
			return nil
		})
		if err != nil || k != len(sched) {
			t.Fatalf("%+v: %v, %d mirror steps, %d scheduled", c, err, k, len(sched))
		}
	}
}
