package lessons_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Sentences of lessons 13 and 15 that quote a measurement kept beside the
// worklog (docs/ladder-runs), held to that file.

// runFile is a raw measurement's lines.
func runFile(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "ladder-runs", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestClaimSplitDQTile: lesson 13 says the backward's two warpgroups on
// one q-tile ran at 0.80 times the 64-row tile: run al's bench, d = 64
// without a mask.
func TestClaimSplitDQTile(t *testing.T) {
	t.Parallel()
	tflops := map[string]float64{}
	for _, line := range runFile(t, "2026-11-28-bulk-split-dq-bench.txt") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.HasPrefix(f[0], "flash3_bwd_bulk_") {
			tflops[f[0]], _ = strconv.ParseFloat(f[4], 64)
		}
	}
	two, one := tflops["flash3_bwd_bulk_bc128_d64"], tflops["flash3_bwd_bulk_bc64_d64"]
	if two == 0 || one == 0 {
		t.Fatalf("run al's bench has no d = 64 rows of both tiles: %v", tflops)
	}
	said := fmt.Sprintf("ran at %.2f times the 64-row tile", two/one)
	if !strings.Contains(prose(lessonSource(t, "13-backward.md")), said) {
		t.Errorf("lesson 13 should say %q (run al: %.1f against %.1f TFLOP/s)", said, two, one)
	}
}

// TestClaimDecodeProfile: lesson 15 gives the DRAM throughput Nsight
// Compute measured for the split kernel and the read-only kernel (run ai).
func TestClaimDecodeProfile(t *testing.T) {
	t.Parallel()
	dram := func(file string) float64 {
		for _, line := range runFile(t, file) {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "DRAM" && f[1] == "Throughput" && f[2] == "%" {
				v, err := strconv.ParseFloat(f[3], 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		t.Fatalf("%s has no DRAM throughput", file)
		return 0
	}
	split, read := dram("2026-11-28-decode-split-ncu.txt"), dram("2026-11-28-decode-read-ncu.txt")
	said := fmt.Sprintf("the DRAM runs at %.0f%% of its peak where the read-only kernel holds %.0f%%", math.Round(split), math.Round(read))
	if !strings.Contains(prose(lessonSource(t, "15-inference.md")), said) {
		t.Errorf("lesson 15 should say %q (Nsight Compute, run ai)", said)
	}
}
