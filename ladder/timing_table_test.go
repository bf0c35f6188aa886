package ladder

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBackwardTimingTableIsItsRun holds docs/LADDER.md's table of runs be
// and bh (flash3_bwd_bulk beside SDPA's backward, SDPA timed on the GPU's
// work alone) to the raw tables of run bh and run av: every TFLOP/s, every
// ratio, and run av's SDPA figures beside them.
func TestBackwardTimingTableIsItsRun(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "LADDER.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	at := strings.Index(doc, "### The backward timed on the GPU's work alone (runs be, bh)")
	if at < 0 {
		t.Fatal("docs/LADDER.md has no section on runs be and bh")
	}
	table := func(file string) map[string][]string {
		b, err := os.ReadFile(filepath.Join("..", "docs", "ladder-runs", file))
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string][]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 9 && f[8] == "ok" {
				rows[f[0]] = f
			}
		}
		return rows
	}
	bh, av := table("2026-11-28-bwd-timing-bh-table.txt"), table("2026-11-28-bwd-stages-av-table.txt")
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q is no figure", s)
		}
		return v
	}
	checked := 0
	for _, line := range strings.Split(doc[at:], "\n")[1:] {
		if strings.HasPrefix(line, "###") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if !strings.HasPrefix(line, "| d=") || len(cells) != 7 {
			continue
		}
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		kernel := "flash3_bwd_bulk_bc64_d64"
		if strings.HasPrefix(cells[0], "d=128") {
			kernel = "flash3_bwd_bulk_bc128_d128"
		}
		if strings.HasSuffix(cells[0], "causal") {
			kernel += "_causal"
		}
		r, old := bh[kernel], av[kernel]
		if r == nil || old == nil {
			t.Fatalf("%s: no row in run bh's or run av's table", kernel)
		}
		tf, fa, cu := num(r[4]), num(r[5]), num(r[6])
		want := []string{fmt.Sprintf("%.1f", tf), fmt.Sprintf("%.1f", fa), fmt.Sprintf("%.1f", cu), fmt.Sprintf("%.2f", tf/fa), fmt.Sprintf("%.2f", tf/cu), old[5] + ", " + old[6]}
		if got := cells[1:]; strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("%s: docs/LADDER.md reads %q, the raw tables give %q", cells[0], strings.Join(got, " | "), strings.Join(want, " | "))
		}
		checked++
	}
	if checked != 4 {
		t.Errorf("checked %d rows of the table; it has four shapes", checked)
	}
	// The prose under the table: how much less time a call SDPA's backward
	// took in run bh than in run av, in ms and in percent of each backend's
	// rate, and how far every rung moved.
	section := strings.Join(strings.Fields(doc[at:]), " ")
	msLo, msHi, faLo, faHi, cuLo, cuHi := 1e9, 0.0, 1e9, 0.0, 1e9, 0.0
	for _, k := range []string{"flash3_bwd_bulk_bc64_d64", "flash3_bwd_bulk_bc64_d64_causal", "flash3_bwd_bulk_bc128_d128", "flash3_bwd_bulk_bc128_d128_causal"} {
		d := num(bh[k][1])
		flops := 2.5 * 4 * 4 * (2048 / d) * 4096 * 4096 * d // B = 4, H·d = 2048, N = 4096
		if bh[k][2] == "yes" {
			flops /= 2
		}
		for _, col := range []int{5, 6} {
			was, now := num(av[k][col]), num(bh[k][col])
			less := flops/(was*1e9) - flops/(now*1e9) // ms
			msLo, msHi = min(msLo, less), max(msHi, less)
			gain := 100 * (now/was - 1)
			if col == 5 {
				faLo, faHi = min(faLo, gain), max(faHi, gain)
			} else {
				cuLo, cuHi = min(cuLo, gain), max(cuHi, gain)
			}
		}
	}
	moveLo, moveHi := 1e9, 0.0
	for k, r := range bh {
		if old := av[k]; old != nil {
			move := 100 * (num(r[4])/num(old[4]) - 1)
			moveLo, moveHi = min(moveLo, move), max(moveHi, move)
		}
	}
	for _, said := range []string{
		fmt.Sprintf("took %.2f–%.2f ms less a call", msLo, msHi),
		fmt.Sprintf("FlashAttention-2 backward %.0f–%.0f%% faster, its cuDNN backward %.0f–%.0f%%", faLo, faHi, cuLo, cuHi),
		fmt.Sprintf("every rung moved by %.1f–%.1f%%", moveLo, moveHi),
	} {
		if !strings.Contains(section, said) {
			t.Errorf("docs/LADDER.md's run bh section should say %q (runs av and bh's raw tables)", said)
		}
	}
}
