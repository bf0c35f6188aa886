package kernelstest

import (
	"testing"

	"flashstep/internal/testrand"
)

// TestRandomGPUConfigAnyMaxN: the GPU suite's -maxn may be below a rung's
// tile (-maxn 100 against a 128-row tile once panicked in rand.IntN); every
// draw stays within it and is a run the kernels take.
func TestRandomGPUConfigAnyMaxN(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for maxN := 1; maxN <= 300; maxN += 1 + rng.IntN(7) {
		for range 20 {
			c := RandomGPUConfig(rng, maxN)
			if c.N < 1 || c.N > maxN {
				t.Fatalf("maxN %d: drew N = %d", maxN, c.N)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("maxN %d: %s: %v", maxN, c.Values().Encode(), err)
			}
		}
	}
}
