//go:build race

package webtest

// Slowdown stretches the tests' bounds on how soon the server answers:
// the race detector makes code 2 to 20 times slower, and the bounds hold
// the server's own speed, not the detector's.
const Slowdown = 10
