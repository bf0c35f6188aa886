package kernels

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hopperMarker is the first line of a source whose PTX needs sm_90a
// (scripts/ptx-hopper).
const hopperMarker = "// needs: sm_90a"

// TestHopperPTXMatchesSources: the rungs that need Hopper are exactly the
// sources marked for scripts/ptx-hopper, and each one's committed PTX was
// built from today's sources, as ptx/hopper.sum records (the hash the
// script takes: the .cu, any .cu it includes, then the .cuh and .h of
// kernels/cuda/common and the .cuh of the .cu's own folder). CI cannot
// rebuild this PTX, so a source changed without it fails here as well as
// in make check-ptx.
var includedCU = regexp.MustCompile(`(?m)^#include "([a-z0-9_]+\.cu)"$`)

func TestHopperPTXMatchesSources(t *testing.T) {
	t.Parallel()
	sum, err := os.ReadFile("ptx/hopper.sum")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sum)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			recorded[f[0]] = line
		}
	}
	common, _ := filepath.Glob("cuda/common/*.cuh")
	h2, _ := filepath.Glob("cuda/common/*.h")
	common = append(common, h2...) // each glob sorted, as the shell's
	short := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:])[:16] }
	hopper := 0
	for _, v := range rungs {
		file := SourcePath(v.Variant)
		src, err := os.ReadFile(strings.TrimPrefix(file, "kernels/"))
		if err != nil {
			t.Fatal(err)
		}
		marked := bytes.HasPrefix(src, []byte(hopperMarker+"\n"))
		if marked != (v.Arch == ArchHopper) {
			t.Errorf("%s: Arch %q, but its source marked for sm_90a: %t", v.Name(), v.Arch, marked)
			continue
		}
		if !marked {
			continue
		}
		hopper++
		all := append([]byte(nil), src...)
		dir := filepath.Dir(strings.TrimPrefix(file, "kernels/"))
		// Another rung's .cu of its folder that it includes, as
		// flash3_bwd_tma.cu includes flash3_bwd_wgmma.cu for its products.
		var included []string
		for _, m := range includedCU.FindAllSubmatch(src, -1) {
			included = append(included, filepath.Join(dir, string(m[1])))
		}
		own, _ := filepath.Glob(filepath.Join(dir, "*.cuh"))
		for _, h := range append(append(included, common...), own...) {
			b, _ := os.ReadFile(h)
			all = append(all, b...)
		}
		ptx, _ := committedPTX(v.Module())
		traced, _ := committedPTX(v.Module() + "_traced")
		want := v.Module() + " sources=" + short(all) + " ptx=" + short(ptx) + " traced=" + short(traced) + " nvcc="
		if got := recorded[v.Module()]; !strings.HasPrefix(got, want) {
			t.Errorf("%s's PTX is not its sources' build: hopper.sum says %q, the files give %q; run scripts/ptx-hopper build on the GPU machine", v.Name(), got, want)
		}
		for _, p := range []string{string(ptx), string(traced)} {
			if !strings.Contains(p, ".target sm_90a") {
				t.Errorf("%s: PTX not built for sm_90a", v.Name())
			}
		}
	}
	if hopper != len(recorded) {
		t.Errorf("hopper.sum records %d modules, the registry has %d Hopper rungs", len(recorded), hopper)
	}
}

// TestArchRuns: a Hopper rung runs on compute capability 9.0 only, and
// says why not elsewhere; the baseline runs everywhere the worker does.
func TestArchRuns(t *testing.T) {
	t.Parallel()
	if err := ArchHopper.Runs(9, 0); err != nil {
		t.Errorf("9.0: %v", err)
	}
	for _, cc := range [][2]int{{8, 0}, {8, 9}, {10, 0}, {12, 0}} {
		err := ArchHopper.Runs(cc[0], cc[1])
		if err == nil || !strings.Contains(err.Error(), "Hopper") || !strings.Contains(err.Error(), "compute capability") {
			t.Errorf("%d.%d: %v", cc[0], cc[1], err)
		}
		if err := Arch("").Runs(cc[0], cc[1]); err != nil {
			t.Errorf("baseline on %d.%d: %v", cc[0], cc[1], err)
		}
	}
	if ModuleArch("flash3_wgmma_traced") != ArchHopper || ModuleArch("flash2_fast") != "" {
		t.Error("ModuleArch does not follow the registry")
	}
}

// The worker runs a module that takes tensor maps only where the driver can
// encode one: ModuleUsesTMA (from the launches) must name exactly the
// modules whose PTX copies through a tensor map, traced build and all.
func TestModuleUsesTMA(t *testing.T) {
	t.Parallel()
	for _, m := range Modules {
		ptx, err := committedPTX(m)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Contains(ptx, []byte("cp.async.bulk.tensor"))
		if got := ModuleUsesTMA(m); got != want {
			t.Errorf("ModuleUsesTMA(%q) = %v, want %v", m, got, want)
		}
	}
	if ModuleUsesTMA("no_such_module") {
		t.Error("an unknown module takes tensor maps")
	}
}

// committedPTX is module's PTX text as committed (ptx/module.ptx.gz; package
// ptx reads it the same way, but imports this one).
func committedPTX(module string) ([]byte, error) {
	gz, err := os.ReadFile("ptx/" + module + ".ptx.gz")
	if err != nil {
		return nil, err
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
