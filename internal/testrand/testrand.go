// Package testrand gives each test its random inputs from one seed that a
// failure prints and the -seed flag replays. A test's stream is drawn from
// the seed and the test's name, so `go test -run '^TestX$' -seed=S`
// gives TestX the very inputs it failed on, whichever tests run beside it.
package testrand

import (
	"flag"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "the random tests' seed (0: a fresh one, printed when a test fails)")

var fresh = sync.OnceValue(func() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return rand.Uint64()
})

// Seed is this run's seed: -seed's, or a fresh one.
func Seed() uint64 { return fresh() }

// New is t's random source. When t fails it logs the seed and the command
// that replays it.
func New(t testing.TB) *rand.Rand {
	t.Helper()
	seed := fresh()
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from seed %d: replay with go test -run '^%s$' -seed=%d", seed, t.Name(), seed)
		}
	})
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Runs is how many random cases a test draws: all of them in a full run,
// a tenth (at least min) under -short, where make test trims the random
// searches that make test-long (and CI, after make test) runs whole. Each
// make test draws afresh, so its searches add up over a day's runs; a
// tenth keeps the loop near a minute on two cores (README).
func Runs(full, min int) int {
	if testing.Short() {
		return max(min, full/10)
	}
	return full
}
