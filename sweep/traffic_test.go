package sweep

import (
	"net/url"
	"testing"

	"flashstep/launch"
	"flashstep/recordings"
	"flashstep/traffic"
)

// TestTrafficModelAgainstCounters holds the two-figure traffic model to the
// counters Nsight Compute read on an H100 (recordings/traffic-h100.json), with
// the tolerances and the known deviations docs/TRAFFIC.md explains:
//
//   - L2 writes and DRAM reads agree within a few per cent;
//   - DRAM writes: the model counts every store, and up to one L2's worth can
//     still be in L2 when a kernel ends, so the counter may be lower;
//   - L2 reads: the model counts every load issued; the counter sees up to a
//     third fewer where many blocks read the same K or V tile at once;
//   - naive_softmax's re-reads partly hit L2 where its rows in flight come
//     near L2's size (N=1024): the counter lies between one and three passes;
//   - toy runs fit in L2: no DRAM writes at all.
func TestTrafficModelAgainstCounters(t *testing.T) {
	t.Parallel()
	m, err := LoadTraffic(recordings.Files)
	if err != nil || m == nil || len(m.Runs) < 8 {
		t.Fatalf("recorded counters: %v", err)
	}
	within := func(what string, model, counter uint64, lo, hi float64) {
		t.Helper()
		if r := float64(model) / float64(counter); !(r >= lo && r <= hi) {
			t.Errorf("%s: model %d, counter %d: ratio %.3f outside [%.2f, %.2f]", what, model, counter, r, lo, hi)
		}
	}
	for _, run := range m.Runs {
		v, _ := url.ParseQuery(run.Query)
		c, err := launch.ParseBenchConfig(v)
		if err != nil {
			t.Fatal(err)
		}
		model := traffic.H100.RunTraffic(c)
		if len(model) != len(run.Kernels) {
			t.Fatalf("%s: %d launches modelled, %d measured", run.Query, len(model), len(run.Kernels))
		}
		toy := c.N*c.N*c.Batch*c.Heads*4 < 1<<20
		for k, got := range run.Kernels {
			mod := model[k]
			what := run.Query + " " + got.Kernel
			if mod.Kernel != got.Kernel {
				t.Fatalf("%s: modelled %s", what, mod.Kernel)
			}
			if toy {
				if got.DRAMWrite != 0 {
					t.Errorf("%s: a toy run wrote %d bytes to DRAM", what, got.DRAMWrite)
				}
				continue
			}
			within(what+" L2 write", mod.L2Write, got.L2Write, 0.98, 1.02)
			within(what+" L2 read", mod.L2Read, got.L2Read, 0.99, 1.5)
			within(what+" DRAM write", mod.DRAMWrite, got.DRAMWrite, 0.97, 1.10)
			if got.Kernel == "naive_softmax" && c.N == 1024 {
				sBytes := uint64(c.Batch*c.Heads) * uint64(c.N) * uint64(c.N) * 4
				within(what+" DRAM read, between one and three passes over S", sBytes, got.DRAMRead, 1.0/3, 1.0)
				continue
			}
			within(what+" DRAM read", mod.DRAMRead, got.DRAMRead, 0.97, 1.05)
		}
	}
}
