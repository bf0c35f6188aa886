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
}
