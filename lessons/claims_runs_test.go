package lessons_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
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

// TestClaimBackwardOverlap: lesson 13 says the backward's warpgroup that
// asks for the next q-tile's products before its elementwise work ran at
// 0.94 times the bulk rung: run am's three rounds at d = 64 without a
// mask, each kernel's mean.
func TestClaimBackwardOverlap(t *testing.T) {
	t.Parallel()
	sum, n := map[string]float64{}, map[string]int{}
	for _, line := range runFile(t, "2026-11-28-bwd-overlap-am.txt") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[0] == "flash3_bwd_bulk_bc64_d64" || f[0] == "flash3_bwd_overlap_bc64_d64") {
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("run am: %q: %v", line, err)
			}
			sum[f[0]] += v
			n[f[0]]++
		}
	}
	if n["flash3_bwd_bulk_bc64_d64"] != 3 || n["flash3_bwd_overlap_bc64_d64"] != 3 {
		t.Fatalf("run am should time each kernel three times: %v", n)
	}
	ratio := sum["flash3_bwd_overlap_bc64_d64"] / sum["flash3_bwd_bulk_bc64_d64"]
	said := fmt.Sprintf("ran at %.2f times the bulk rung", ratio)
	if !strings.Contains(prose(lessonSource(t, "13-backward.md")), said) {
		t.Errorf("lesson 13 should say %q (run am's means)", said)
	}
}

// TestClaimBackwardProfile: lesson 13 gives the tensor pipe's share that
// Nsight Compute measured for the bulk rung's main kernel at d = 64 (run
// ao: the block of lines after that kernel's timing line).
func TestClaimBackwardProfile(t *testing.T) {
	t.Parallel()
	const marker = "Tensor is the highest-utilized pipeline ("
	in := false
	for _, line := range runFile(t, "2026-11-28-bwd-ncu-ao.txt") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "flash3_bwd_") {
			in = f[0] == "flash3_bwd_bulk_bc64_d64"
			continue
		}
		at := strings.Index(line, marker)
		if !in || at < 0 {
			continue
		}
		rest := line[at+len(marker):]
		end := strings.Index(rest, "%")
		if end < 0 {
			t.Fatalf("run ao: no share in %q", line)
		}
		pct, err := strconv.ParseFloat(rest[:end], 64)
		if err != nil {
			t.Fatalf("run ao: %q: %v", line, err)
		}
		said := fmt.Sprintf("the tensor pipe %.0f%% busy", math.Round(pct))
		if !strings.Contains(prose(lessonSource(t, "13-backward.md")), said) {
			t.Errorf("lesson 13 should say %q (run ao)", said)
		}
		return
	}
	t.Fatal("run ao names no tensor pipe's share for flash3_bwd_bulk at d = 64")
}

// TestClaimBackwardStages: lesson 13 gives what each of flash3_bwd_bulk's
// two changes was worth at d = 64, each from its run: two q-tiles in
// flight and a third block an SM (run av's alternated builds, the means of
// its three rounds each) and, before it, the bulk reduce alone against
// flash3_bwd_tma (run ah's backward table).
func TestClaimBackwardStages(t *testing.T) {
	t.Parallel()
	mean := func(build string) float64 {
		var sum float64
		for k := 1; k <= 3; k++ {
			found := false
			for _, line := range runFile(t, fmt.Sprintf("2026-11-28-bwd-stages-av-ab-%s%d.txt", build, k)) {
				if f := strings.Fields(line); len(f) >= 3 && f[0] == "flash3_bwd_bulk_bc64_d64" {
					v, err := strconv.ParseFloat(f[2], 64)
					if err != nil {
						t.Fatalf("run av: %q: %v", line, err)
					}
					sum, found = sum+v, true
				}
			}
			if !found {
				t.Fatalf("run av's round %s%d times no flash3_bwd_bulk_bc64_d64", build, k)
			}
		}
		return sum / 3
	}
	said := fmt.Sprintf("made it %.2f times faster again (run av)", mean("b")/mean("a"))
	if !strings.Contains(prose(lessonSource(t, "13-backward.md")), said) {
		t.Errorf("lesson 13 should say %q (run av's means)", said)
	}
	ah := map[string]float64{}
	for _, line := range runFile(t, "2026-11-28-bulk-h200-backward-table.txt") {
		if f := strings.Fields(line); len(f) >= 5 && (f[0] == "flash3_bwd_bulk_bc64_d64" || f[0] == "flash3_bwd_tma_bc64_d64") {
			ah[f[0]], _ = strconv.ParseFloat(f[4], 64)
		}
	}
	if ah["flash3_bwd_bulk_bc64_d64"] == 0 || ah["flash3_bwd_tma_bc64_d64"] == 0 {
		t.Fatalf("run ah's table times the two rungs at d = 64 as %v", ah)
	}
	if said := fmt.Sprintf("alone made the rung %.2f times `flash3_bwd_tma` at $d = 64$ (run ah)", ah["flash3_bwd_bulk_bc64_d64"]/ah["flash3_bwd_tma_bc64_d64"]); !strings.Contains(prose(lessonSource(t, "13-backward.md")), said) {
		t.Errorf("lesson 13 should say %q (run ah)", said)
	}
}

// TestClaimBackwardProducer holds lesson 13's figures for the producer
// warp (run ay) to the call's raw file: each the mean of its three
// alternated rounds, with the producer over without it.
func TestClaimBackwardProducer(t *testing.T) {
	t.Parallel()
	mean := func(build, kernel string) float64 {
		var sum float64
		n := 0
		section := ""
		for _, line := range runFile(t, "2026-11-28-bwd-producer-ay.txt") {
			if strings.HasPrefix(line, "== ") {
				section = line
				continue
			}
			if f := strings.Fields(line); len(f) >= 5 && f[0] == kernel && f[len(f)-1] == "ok" && strings.HasPrefix(section, "== "+build+" ") {
				v, err := strconv.ParseFloat(f[2], 64)
				if err != nil {
					t.Fatalf("run ay: %q: %v", line, err)
				}
				sum, n = sum+v, n+1
			}
		}
		if n != 3 {
			t.Fatalf("run ay times %s in %d rounds of %s, want 3", kernel, n, build)
		}
		return sum / 3
	}
	lesson := prose(lessonSource(t, "13-backward.md"))
	for _, c := range []struct{ kernel, context string }{
		{"flash3_bwd_bulk_bc64_d64", "$d = 64$ it ran at %.2f times the rung"},
		{"flash3_bwd_bulk_bc128_d128", "consumers (`setmaxnreg` moving its registers to them) ran at %.2f times"},
		{"flash3_bwd_bulk_bc64_d128", "one consumer warpgroup an SM, gained (%.2f times)"},
	} {
		if said := fmt.Sprintf(c.context, mean("b", c.kernel)/mean("a", c.kernel)); !strings.Contains(lesson, said) {
			t.Errorf("lesson 13 should say %q (run ay's means)", said)
		}
	}
}

// TestClaimDecodeParts holds lesson 15's account of what bounds the split
// kernel at batch 1 (8 K/V heads, 32,768 keys, the rule's 32 splits) to
// run bi's raw files: the split kernel built whole, with its copies alone
// and with its arithmetic alone, each the mean of its two rounds, the
// read-only kernel on the same bytes in the copies' own processes, the
// merge's cost in the stream (split kernel and merge together, less the
// split kernel alone); and the ten copy walks' pace against the
// read-only kernel.
func TestClaimDecodeParts(t *testing.T) {
	t.Parallel()
	const cache = 2 * 8 * 32768 * 128 * 2 // bytes of K and V
	split := map[string][]float64{}       // µs of the split kernel, by part
	both := map[string][]float64{}        // µs of split kernel and merge
	var read []float64                    // µs of the read-only kernel, in the copies' processes
	part := ""
	for _, line := range runFile(t, "2026-11-28-decode-parts-bi.txt") {
		if strings.HasPrefix(line, "== DECODE_PART=") {
			part = strings.TrimSuffix(strings.Fields(line)[1], ",")
			continue
		}
		f := strings.Fields(line)
		if part == "" || len(f) != 9 || f[0] != "8" || f[1] != "32768" || f[2] != "32" {
			continue
		}
		ms, err1 := strconv.ParseFloat(f[4], 64)
		bms, err2 := strconv.ParseFloat(f[6], 64)
		tbs, err3 := strconv.ParseFloat(f[8], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("run bi: %q", line)
		}
		split[part] = append(split[part], ms*1000)
		both[part] = append(both[part], bms*1000)
		if part == "DECODE_PART=1" {
			read = append(read, cache/(tbs*1e12)*1e6)
		}
	}
	mean := func(xs []float64) float64 {
		if len(xs) != 2 {
			t.Fatalf("run bi: %d rounds, want 2 (%v)", len(xs), split)
		}
		return (xs[0] + xs[1]) / 2
	}
	whole, copies, arith, rd := mean(split["DECODE_PART=0"]), mean(split["DECODE_PART=1"]), mean(split["DECODE_PART=2"]), mean(read)
	merge := mean(both["DECODE_PART=0"]) - whole
	lesson := prose(lessonSource(t, "15-inference.md"))
	said := fmt.Sprintf("its copies alone, with no arithmetic, take %.1f µs where the read-only kernel reads the bytes in %.1f µs in the same processes, %.2f of its pace; its arithmetic alone takes %.1f µs, and under the copies it adds about %.0f µs to them; the merge, a second kernel, adds about %.0f µs more",
		copies, rd, rd/copies, arith, whole-copies, merge)
	if !strings.Contains(lesson, said) {
		t.Errorf("lesson 15 should say %q (run bi's means)", said)
	}
	// The ten walks of copies.cu at batch 1, 8 K/V heads, 32k keys: their
	// read-only ÷ walk, the least and the most.
	lo, hi, walks := math.Inf(1), 0.0, 0
	for _, line := range runFile(t, "2026-11-28-decode-copies-bi.txt") {
		if f := strings.Fields(line); len(f) == 12 && f[0] == "8" && f[1] == "32768" {
			r, err := strconv.ParseFloat(f[11], 64)
			if err != nil {
				t.Fatalf("run bi: %q", line)
			}
			lo, hi, walks = min(lo, r), max(hi, r), walks+1
		}
	}
	if walks != 10 {
		t.Fatalf("run bi timed %d walks at batch 1, 8 K/V heads, 32k keys; the lesson says ten", walks)
	}
	if said := fmt.Sprintf("all read at %.2f to %.2f of the read-only kernel", lo, hi); !strings.Contains(lesson, said) {
		t.Errorf("lesson 15 should say %q (run bi's copies.cu)", said)
	}
	// The step's budget for the goal: the read-only kernel's time in the
	// same processes over 0.85, less the split kernel alone.
	if said := fmt.Sprintf("For 0.85 the step must take %.1f µs, which leaves the merge under %.0f µs", rd/0.85, rd/0.85-whole); !strings.Contains(lesson, said) {
		t.Errorf("lesson 15 should say %q (run bi's read-only kernel over 0.85, less the split kernel)", said)
	}
}

// TestClaimAnchorLaunch holds lesson 12's caution on its ratios to SDPA to
// run bf's raw file: the forward anchor as shipped against the same file
// with the GPU held and the L2 flushed, cuDNN's TFLOP/s by shape (the
// mean of the two rounds each), the least and most it gains, and what a
// ratio of 1 to the shipped figure is then.
func TestClaimAnchorLaunch(t *testing.T) {
	t.Parallel()
	row := regexp.MustCompile(`^\d+ \d+ \d+ (\d+) (\d) \| flash \S+ \d+ cudnn \S+ (\d+)`)
	sum := map[string]float64{}
	n := map[string]int{}
	build := ""
	for _, line := range runFile(t, "2026-11-28-fwd-anchor-bf.txt") {
		if strings.HasPrefix(line, "== ") {
			build = "shipped"
			if strings.Contains(line, "held") {
				build = "held"
			}
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && build != "" {
			v, _ := strconv.ParseFloat(m[3], 64)
			key := build + " " + m[1] + " " + m[2]
			sum[key] += v
			n[key]++
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, shape := range []string{"64 0", "64 1", "128 0", "128 1"} {
		if n["shipped "+shape] != 2 || n["held "+shape] != 2 {
			t.Fatalf("run bf: %d and %d rounds of d, causal = %s", n["shipped "+shape], n["held "+shape], shape)
		}
		gain := (sum["held "+shape]/2)/(sum["shipped "+shape]/2) - 1
		lo, hi = min(lo, gain), max(hi, gain)
	}
	said := fmt.Sprintf("cuDNN's forward is %.0f to %.0f%% faster than that (docs/LADDER.md, run bf), so \"about cuDNN's speed\" is nearer %.2f to %.2f of it",
		100*lo, 100*hi, 1/(1+hi), 1/(1+lo))
	if !strings.Contains(prose(lessonSource(t, "12-hopper.md")), said) {
		t.Errorf("lesson 12 should say %q (run bf's means)", said)
	}
}
