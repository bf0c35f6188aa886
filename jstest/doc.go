// Package jstest holds the front end's unit tests. Node's own test runner
// runs them (make test: node --test jstest/*.test.mjs); they import the
// modules of static/js that touch no page (the trace decoder, the trace
// model and the steps' words, the role lanes' span arithmetic, the
// playground's arithmetic, the lab's tolerance, the number formats) and
// hold them to fixtures in testdata/ that the Go side writes: traces from
// the Go encoder with every field and element they hold, the figures
// package roles computes for the recorded roles runs, the playground's and
// the lab's arithmetic in Go.
//
// TestFixtures writes the fixtures with -update and otherwise fails when
// one is stale:
//
//	go test ./jstest -run TestFixtures -update
//
// The Node tests draw fresh random inputs where they can; a failure
// prints its seed, and JSTEST_SEED=N replays it.
package jstest
