//go:build !race

package web

// raceSlowdown: see race_test.go.
const raceSlowdown = 1
