//go:build !race

package webtest

// Slowdown: see race.go.
const Slowdown = 1
