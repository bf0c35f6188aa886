package ladder

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
)

// rawMean is the mean TFLOP/s of the rows of a raw bench output (file) that at
// names (RawRows), and how many there were. A row is a kernel's line of
// bench/backward/bench.cu (name, ms, TFLOP/s, the errors, "ok") or of
// scripts/bench-backward's table (name, d, causal, ms, TFLOP/s, …, "ok").
func rawMean(t *testing.T, file string, at RawRows) (float64, int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum float64
	n := 0
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "== ") || strings.HasPrefix(line, "## ") {
			section = line
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 5 || fs[0] != at.Kernel || fs[len(fs)-1] != "ok" || !strings.Contains(section, at.Section) {
			continue
		}
		col := 2
		if fs[2] == "no" || fs[2] == "yes" {
			col = 4
		}
		v, err := strconv.ParseFloat(fs[col], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", file, line, err)
		}
		sum += v
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// TestTriedIdeasAreTheirRuns: each tried idea's figures are the means of
// the rows its raw file holds, and the rung it names is the one those rows
// time.
func TestTriedIdeasAreTheirRuns(t *testing.T) {
	t.Parallel()
	if len(BackwardTried) == 0 {
		t.Fatal("no tried ideas")
	}
	for _, idea := range BackwardTried {
		counts := map[string]int{}
		for _, c := range []struct {
			what string
			at   RawRows
			want float64
		}{{"before", idea.BeforeAt, idea.Before}, {"after", idea.AfterAt, idea.After}} {
			got, n := rawMean(t, filepath.Join("..", "docs", "ladder-runs", idea.Raw), c.at)
			counts[c.what] = n
			if n == 0 {
				t.Errorf("run %s: %s has no checked row of %+v", idea.Run, idea.Raw, c.at)
				continue
			}
			if math.Abs(got-c.want) > 0.005 {
				t.Errorf("run %s, %s: %.3f TFLOP/s in Go, the mean of %d rows of %s is %.3f", idea.Run, c.what, c.want, n, idea.Raw, got)
			}
		}
		// Rounds that alternated the two come in pairs: a row more on one
		// side is a stray (timed elsewhere in the call, or another build).
		if counts["before"] != counts["after"] {
			t.Errorf("run %s: %d rows without the idea, %d with it", idea.Run, counts["before"], counts["after"])
		}
		if v, ok := instrument.ParseVariant(idea.On); !ok || !kernels.Info(v).Backward {
			t.Errorf("run %s: %s is not a backward rung of the registry", idea.Run, idea.On)
		}
		if !strings.HasPrefix(idea.BeforeAt.Kernel, idea.On+"_") {
			t.Errorf("run %s: the rung is %s, its rows %s", idea.Run, idea.On, idea.BeforeAt.Kernel)
		}
		if !strings.HasSuffix(idea.BeforeAt.Kernel, "_d64") || !strings.HasSuffix(idea.AfterAt.Kernel, "_d64") {
			t.Errorf("run %s: not the d = 64 shape without a mask: %s, %s", idea.Run, idea.BeforeAt.Kernel, idea.AfterAt.Kernel)
		}
	}
}

// TestRawMeanReadsSections: the reader keeps to its section and to the
// rows whose check passed, and reads both row formats.
func TestRawMeanReadsSections(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "x.txt")
	raw := "== old 1\nk_d64 1.0 100.0 1e-3 1e-3 1e-3 ok\nk_d64 1.0 999.0 1e-3 1e-3 1e-3 FAIL\n== new 1\nk_d64 1.0 110.0 1e-3 1e-3 1e-3 ok\n" +
		"## table\nk_d64 64 no 1.0 130.0 1 1 1 ok\n"
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   RawRows
		want float64
		n    int
	}{
		{RawRows{"== old", "k_d64"}, 100, 1},
		{RawRows{"== new", "k_d64"}, 110, 1},
		{RawRows{"## table", "k_d64"}, 130, 1},
		{RawRows{"", "k_d64"}, (100 + 110 + 130) / 3.0, 3},
		{RawRows{"", "other_d64"}, 0, 0},
	} {
		if got, n := rawMean(t, file, c.at); n != c.n || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: %.3f over %d rows, want %.3f over %d", c.at, got, n, c.want, c.n)
		}
	}
}
