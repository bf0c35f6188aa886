package jstest

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"flashstep/kernels"
)

var update = flag.Bool("update", false, "write the fixtures in testdata/ afresh")

// TestFixtures writes what the Node tests hold static/js to, from the Go
// side: traces from the Go encoder and their every field (traces/), the
// figures package roles computes for the recorded roles runs (roles.json),
// the playground's arithmetic (playground.json), the lab's tolerance
// (lab.json), the rungs the pages carry (rungs.json), where split-KV
// cuts a run's kv-tiles (splits.json) and a paged cache's block tables
// (pages.json). With -update it
// writes them; without, it fails naming each fixture that is stale or that
// nothing here writes any more.
func TestFixtures(t *testing.T) {
	files := map[string][]byte{}
	traceFixtures(t, files)
	roleFixtures(t, files)
	playgroundFixtures(t, files)
	labFixtures(t, files)
	rungFixtures(t, files)
	splitFixtures(t, files)
	pageFixtures(t, files)

	var stale []string
	for name, want := range files {
		path := filepath.Join("testdata", filepath.FromSlash(name))
		if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, want) {
			continue
		}
		if !*update {
			stale = append(stale, name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := filepath.ToSlash(strings.TrimPrefix(path, "testdata"+string(filepath.Separator)))
		if _, ok := files[name]; ok {
			return nil
		}
		if *update {
			return os.Remove(path)
		}
		stale = append(stale, name+" (written by nothing)")
		return nil
	})
	if err != nil && !(*update && os.IsNotExist(err)) {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		t.Errorf("jstest/testdata is stale: %s; run make generate", strings.Join(stale, ", "))
	}
}

// jsonFile is v as a fixture: compact JSON and a newline.
func jsonFile(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// num is a float64 in a fixture: a JSON number, or for the values JSON
// has none for the strings JavaScript's Number reads back ("Infinity",
// "-Infinity", "NaN"). −0 is written -0, which JSON.parse keeps.
type num float64

func (x num) MarshalJSON() ([]byte, error) {
	f := float64(x)
	switch {
	case f != f:
		return []byte(`"NaN"`), nil
	case f > 1.7976931348623157e308:
		return []byte(`"Infinity"`), nil
	case f < -1.7976931348623157e308:
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

func nums(xs []float64) []num {
	out := make([]num, len(xs))
	for k, x := range xs {
		out[k] = num(x)
	}
	return out
}

// splitCase is one shape and how kernels.DecodeSplits cuts its kv-tiles:
// static/js/splits.js's decodeSplits is held to it.
type splitCase struct {
	Batch   int `json:"batch"`
	KVHeads int `json:"kvHeads"`
	Tr      int `json:"Tr"`
	Tc      int `json:"Tc"`
	Splits  int `json:"splits"`
	Per     int `json:"per"`
}

// splitFixtures writes splits.json: DecodeSplits over the corners (one
// block, a wave's worth, more blocks than a wave) and random shapes within
// the mirror's limits.
func splitFixtures(t *testing.T, files map[string][]byte) {
	rng := rand.New(rand.NewPCG(34, 2)) // fixed: the fixture is committed
	shapes := [][4]int{{1, 1, 1, 4}, {1, 1, 1, 1}, {1, 8, 1, 64}, {1, 1, 72, 9}, {8, 8, 1, 512}, {1, 1, 264, 64}, {1, 1, 265, 64}, {16, 8, 8, 4096}, {1, 1, 133, 7}}
	for range 300 {
		shapes = append(shapes, [4]int{1 + rng.IntN(16), 1 << rng.IntN(4), 1 + rng.IntN(300), 1 + rng.IntN(4096)})
	}
	var out []splitCase
	for _, s := range shapes {
		c := kernels.Config{Variant: variant(t, "decode_split"), N: s[3], Bc: 1, Nq: s[2], Br: 1, Batch: s[0], Heads: s[1], KVHeads: s[1]}
		if c.Tr() != s[2] || c.Tc() != s[3] || c.KVHeadCount() != s[1] {
			t.Fatalf("%v: Tr %d, Tc %d, kv-heads %d", s, c.Tr(), c.Tc(), c.KVHeadCount())
		}
		splits, per := kernels.DecodeSplits(&c)
		out = append(out, splitCase{Batch: s[0], KVHeads: s[1], Tr: s[2], Tc: s[3], Splits: splits, Per: per})
	}
	files["splits.json"] = jsonFile(t, out)
}

// pageCase is one shape's block tables, as static/js/pages.js reads a
// header: every batch row's, row after row.
type pageCase struct {
	Batch int     `json:"batch"`
	Tc    int     `json:"Tc"`
	Seed  string  `json:"seed"` // decimal: a uint64 is past a double's integers
	Table []int32 `json:"table"`
}

// pageFixtures writes pages.json: kernels.PageTable over the corners (one
// page, a prime and a power of two of pages, the largest seed) and random
// shapes with seeds across the 64 bits.
func pageFixtures(t *testing.T, files map[string][]byte) {
	rng := rand.New(rand.NewPCG(35, 3)) // fixed: the fixture is committed
	type shape struct {
		batch, tc int
		seed      uint64
	}
	shapes := []shape{{1, 1, 0}, {1, 2, 1}, {1, 7, 3}, {1, 8, 9}, {2, 4, math.MaxUint64}, {64, 40, math.MaxUint64 - 1}, {3, 1, 5}}
	for range 80 {
		shapes = append(shapes, shape{1 + rng.IntN(8), 1 + rng.IntN(60), rng.Uint64() >> rng.IntN(64)})
	}
	var out []pageCase
	for _, s := range shapes {
		c := kernels.Config{Variant: variant(t, "decode_paged"), N: s.tc, Bc: 1, Br: 1, Batch: s.batch, Heads: 1, Seed: s.seed}
		out = append(out, pageCase{Batch: s.batch, Tc: s.tc, Seed: strconv.FormatUint(s.seed, 10), Table: kernels.PageTable(&c)})
	}
	files["pages.json"] = jsonFile(t, out)
}
