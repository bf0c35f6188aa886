package kernels

import (
	"context"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
)

// The schedule is the mirror's record sequence, without the numbers.
func TestScheduleIsTheMirrorsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 9))
	for range 200 {
		c := randomConfig(rng)
		sched := Schedule(&c)
		k := 0
		err := RunMirror(context.Background(), c, func(r *instrument.Record) error {
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
