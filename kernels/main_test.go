package kernels

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the package's tests with the collector at 400% (unless
// GOGC says otherwise). The tests allocate traces by the gigabyte and keep
// little of them: at the default 100% the heap stays under 100 MB and the
// collector, its preemptions and the pages it hands back and faults in
// again took about a third of the package's CPU under -short; at 400% the
// heap peaks near 130 MB. What the tests compute and check is the same.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
