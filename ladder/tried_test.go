package ladder

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"sort"
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
	files, err := filepath.Glob(file)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no such raw file (%v)", file, err)
	}
	sort.Strings(files)
	var sum float64
	n := 0
	for _, name := range files {
		s, k := rawSum(t, name, at)
		sum, n = sum+s, n+k
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// rawSum is the sum of the rows of one raw file that at names, and their
// count; the file's name heads its first section.
func rawSum(t *testing.T, file string, at RawRows) (float64, int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum float64
	n := 0
	section := filepath.Base(file)
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
	return sum, n
}

// TestMeasuredIdeasAreTheirRuns: each measured idea's figures (tried and
// left out, or kept in flash3_bwd_bulk) are the means of the rows its raw
// files hold, and the rung it names is the one those rows time.
func TestMeasuredIdeasAreTheirRuns(t *testing.T) {
	t.Parallel()
	if len(BackwardTried) == 0 || len(BulkIdeas) != 2 {
		t.Fatalf("%d tried ideas, %d of the bulk rung's", len(BackwardTried), len(BulkIdeas))
	}
	for _, idea := range append(append([]MeasuredIdea{}, BackwardTried...), BulkIdeas...) {
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
// rows whose check passed, reads both row formats, and reads a pattern of
// files, each file's name heading its rows until a header.
func TestRawMeanReadsSections(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, raw := range map[string]string{
		"x.txt": "== old 1\nk_d64 1.0 100.0 1e-3 1e-3 1e-3 ok\nk_d64 1.0 999.0 1e-3 1e-3 1e-3 FAIL\n== new 1\nk_d64 1.0 110.0 1e-3 1e-3 1e-3 ok\n" +
			"## table\nk_d64 64 no 1.0 130.0 1 1 1 ok\n",
		"r-a1.txt": "# GPU\nk_d64 1.0 200.0 1e-3 1e-3 1e-3 ok\n",
		"r-b1.txt": "k_d64 1.0 220.0 1e-3 1e-3 1e-3 ok\n== later\nk_d64 1.0 999.0 1e-3 1e-3 1e-3 ok\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		file string
		at   RawRows
		want float64
		n    int
	}{
		{"x.txt", RawRows{"== old", "k_d64"}, 100, 1},
		{"x.txt", RawRows{"== new", "k_d64"}, 110, 1},
		{"x.txt", RawRows{"## table", "k_d64"}, 130, 1},
		{"x.txt", RawRows{"", "k_d64"}, (100 + 110 + 130) / 3.0, 3},
		{"x.txt", RawRows{"", "other_d64"}, 0, 0},
		{"r-[ab]1.txt", RawRows{"r-a", "k_d64"}, 200, 1},
		{"r-[ab]1.txt", RawRows{"r-b", "k_d64"}, 220, 1},
		{"r-[ab]1.txt", RawRows{"== later", "k_d64"}, 999, 1},
		{"r-[ab]1.txt", RawRows{"", "k_d64"}, (200 + 220 + 999) / 3.0, 3},
	} {
		if got, n := rawMean(t, filepath.Join(dir, c.file), c.at); n != c.n || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s %+v: %.3f over %d rows, want %.3f over %d", c.file, c.at, got, n, c.want, c.n)
		}
	}
}
