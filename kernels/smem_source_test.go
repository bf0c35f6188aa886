package kernels

import (
	"go/parser"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
)

// A kernel's dynamic shared memory is stated twice: by its .cu, whose
// `constexpr int …smem_bytes(…)` carves the block's tiles (and sizes the
// bench's tuning experiments), and by its entry's Launches, which the
// worker and the ladder bench launch with. TestSharedBytesMatchSource
// evaluates the .cu's function at every compiled tile and holds the
// launch to it, so the two cannot drift; every Hopper rung must state one.

var (
	reSmemFunc  = regexp.MustCompile(`constexpr int (\w*smem_bytes)\(int (\w+), int (\w+), int (\w+)\)\s*\{\s*return ([^;]+);\s*\}`)
	reConstexpr = regexp.MustCompile(`constexpr int (\w+) = (\d+);`)
)

func TestSharedBytesMatchSource(t *testing.T) {
	t.Parallel()
	for _, v := range rungs {
		src, err := cuSource(v.Name() + ".cu")
		if err != nil {
			t.Fatal(err)
		}
		m := reSmemFunc.FindSubmatch(src)
		if m == nil {
			if v.Arch == ArchHopper {
				t.Errorf("%s.cu states no constexpr int …smem_bytes(int, int, int)", v.Name())
			}
			continue
		}
		if regexp.MustCompile(`\w\s*\(`).Match(m[5]) {
			// A size computed by other functions (flash2_bwd_mma's):
			// only the GPU tests hold it, a launch short of it failing there.
			if v.Arch == ArchHopper {
				t.Errorf("%s.cu: %s calls other functions: state it in numbers and names", v.Name(), m[1])
			}
			continue
		}
		consts := map[string]int{}
		for _, c := range reConstexpr.FindAllSubmatch(src, -1) {
			consts[string(c[1])], _ = strconv.Atoi(string(c[2]))
		}
		for _, tile := range v.Tiles {
			vars := map[string]int{}
			for k, p := range m[2:5] {
				switch name := string(p); {
				case name == "D":
					vars[name] = tile.D
				case strings.HasPrefix(name, "BR"):
					vars[name] = tile.Br
				case strings.HasPrefix(name, "BC"):
					vars[name] = tile.Bc
				default:
					t.Fatalf("%s.cu: %s's parameter %d is %q: D, BR or BC", v.Name(), m[1], k, name)
				}
			}
			// The names become numbers (evalInt, naive_bwd_test.go, reads
			// numbers alone).
			text := regexp.MustCompile(`\b\w+\b`).ReplaceAllStringFunc(string(m[5]), func(w string) string {
				if n, ok := vars[w]; ok {
					return strconv.Itoa(n)
				}
				if n, ok := consts[w]; ok {
					return strconv.Itoa(n)
				}
				return w
			})
			expr, err := parser.ParseExpr(text)
			if err != nil {
				t.Fatalf("%s.cu: %s: %v", v.Name(), text, err)
			}
			want := evalInt(t, expr)
			for _, causal := range []bool{false, true} {
				c := Config{Variant: v.Variant, N: 4 * tile.Br, D: tile.D, Br: tile.Br, Bc: tile.Bc, Batch: 1, Heads: 1, Causal: causal, Pattern: instrument.PatternNormal}
				found := false
				var got []int
				for _, k := range v.Launches(&c, tile).Kernels {
					found = found || k.Shared == want
					got = append(got, k.Shared)
				}
				if !found {
					t.Errorf("%s at %v: the .cu's %s is %d bytes, its launches ask %v", v.Name(), tile, m[1], want, got)
				}
			}
		}
	}
}
