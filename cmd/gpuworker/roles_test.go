//go:build gpu

package main

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/recordings"
	"flashstep/roles"
)

// Roles mode on the GPU (docs/ROLES.md): the warp-specialised rungs' role
// records, checked against what the kernels' barriers guarantee.

// TestGPURoles runs rungs 9 and 10 in roles mode at both head dims, plain
// and causal, ragged and not, and holds every trace to checkRoles.
func TestGPURoles(t *testing.T) {
	for _, v := range []instrument.Variant{instrument.VariantFlash3WS, instrument.VariantFlash3PingPong} {
		for _, f := range kernels.Info(v).Tiles {
			for _, n := range []int{1000, 2048} {
				for _, causal := range []bool{false, true} {
					c := kernels.Config{Variant: v, N: n, D: f.D, Br: f.Br, Bc: f.Bc, Batch: 2, Heads: 2, Causal: causal,
						Pattern: instrument.PatternNormal, Seed: rand.Uint64(), Timing: true, Roles: true}
					tr, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(c) })
					if err != nil {
						t.Fatalf("%s: %v", c.Values().Encode(), err)
					}
					h, recs, err := instrument.ReadAll(bytes.NewReader(tr.bytes))
					if err != nil {
						t.Fatalf("%s: %v", c.Values().Encode(), err)
					}
					msg, err := roles.Check(c, h, recs)
					if err != nil {
						t.Fatalf("%s: %v", c.Values().Encode(), err)
					}
					t.Logf("%s d=%d N=%d causal=%t: kernel %.3f ms; %s", v, f.D, n, causal, tr.kernelMs, msg)
				}
			}
		}
	}
}

var (
	recordList = flag.String("record-list", "", "TestRecordRoles: lines of 'name query' to record")
	recordOut  = flag.String("record-out", "", "TestRecordRoles: folder for the .fstrace files")
)

// TestRecordRoles records the runs of -record-list into -record-out from
// the PTX this binary loaded (-ptx-dir: the PTX just built, in the same
// call), each roles run checked as TestGPURoles checks its runs.
func TestRecordRoles(t *testing.T) {
	if *recordList == "" || *recordOut == "" {
		t.Skip("needs -record-list and -record-out")
	}
	f, err := os.Open(*recordList)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := recordings.ParseList(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		v, err := url.ParseQuery(e.Query)
		if err != nil {
			t.Fatal(err)
		}
		r, err := kernels.ParseRun(v)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		tr, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceRun(r) })
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		h, recs, err := instrument.ReadAll(bytes.NewReader(tr.bytes))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := asRecording(tr, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(*recordOut, e.Name+".fstrace")
		// A roles run is held to its barriers' order here; any other run
		// to its mirror by the recordings' own tests, in CI.
		msg, err := "not a roles run", error(nil)
		if r.Config().Roles {
			msg, err = roles.Check(r.Config(), h, recs)
		}
		if err != nil { // kept beside the others, for a look at what broke
			path += ".failed"
			t.Errorf("%s: %v", e.Name, err)
		}
		if err := os.WriteFile(path, rec, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d records, kernel %.3f ms; %s", path, len(recs), tr.kernelMs, msg)
	}
}
