package kernels

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
)

// TestNaiveBwdTrace: the naive backward's records leave phase by phase over
// the whole grid (every dP tile, every q-tile's D, every dQ, then each
// kv-tile's block walking every q-tile, none skipped under a causal mask),
// and what phase 4 reads back is what phases 1 and 2 wrote: its dS tiles
// are P ∘ (dP − D), bit for bit, from the dP tiles and the rows' D.
func TestNaiveBwdTrace(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	v := instrument.VariantNaiveBwd
	for _, c := range runsOf(rng, []instrument.Variant{v}, 80, 15, withVariant(v)) {
		_, recs := runTrace(t, c)
		bhs, qs := c.TracedBH(), c.TracedQ()
		var want []string
		for bh := bhs.Lo; bh < bhs.Hi; bh++ {
			want = append(want, fmt.Sprintf("inputs %d", bh))
		}
		phase := func(kind string, perTile bool) {
			for bh := bhs.Lo; bh < bhs.Hi; bh++ {
				for i := qs.Lo; i < qs.Hi; i++ {
					if !perTile {
						want = append(want, fmt.Sprintf("%s %d %d", kind, bh, i))
						continue
					}
					for j := range c.Tc() {
						want = append(want, fmt.Sprintf("%s %d %d %d", kind, bh, i, j))
					}
				}
			}
		}
		phase("bwd_dp", true)
		phase("bwd_ds", false)
		phase("bwd_dq", false)
		for j := range c.Tc() {
			for bh := bhs.Lo; bh < bhs.Hi; bh++ {
				for i := qs.Lo; i < qs.Hi; i++ {
					want = append(want, fmt.Sprintf("bwd_kv %d %d %d", bh, i, j))
				}
			}
		}
		var got []string
		dp := map[[3]int]*instrument.Record{}
		delta := map[[2]int]*instrument.Record{}
		for _, r := range recs {
			switch r.Kind {
			case instrument.KindInputs:
				got = append(got, fmt.Sprintf("inputs %d", r.BH))
			case instrument.KindBwdDP, instrument.KindBwdKV:
				got = append(got, fmt.Sprintf("%s %d %d %d", r.Kind, r.BH, r.I, r.J))
			default:
				got = append(got, fmt.Sprintf("%s %d %d", r.Kind, r.BH, r.I))
			}
			switch r.Kind {
			case instrument.KindBwdDP:
				dp[[3]int{r.BH, r.I, r.J}] = r
			case instrument.KindBwdDS:
				delta[[2]int{r.BH, r.I}] = r
			case instrument.KindBwdKV:
				d, ds := dp[[3]int{r.BH, r.I, r.J}], delta[[2]int{r.BH, r.I}]
				for row := range r.RowsValid {
					for col := range r.ColsValid {
						e := row*c.Bc + col
						if want := float32(r.P[e] * float32(d.DP[e]-ds.Delta[row])); r.DS[e] != want {
							t.Fatalf("%+v (%d, %d) [%d,%d]: dS read back %v, P∘(dP − D) %v", c, r.I, r.J, row, col, r.DS[e], want)
						}
					}
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%+v: records\n%v\nwant\n%v", c, got, want)
		}
	}
}

// TestBackwardConstantsMatchSource ties the constants the .cu files and the
// registry each state: naive_bwd.cu's block size and the dQ elements a
// thread holds against naiveBwdThreads and naiveMaxOutPerThread (a smaller
// NAIVE_BWD_MAXQ would leave dQ elements unwritten), and flash2_bwd.cu's
// FLASH2_BWD_SMEM, evaluated at every compiled tile, against
// flash2BwdSharedBytes.
func TestBackwardConstantsMatchSource(t *testing.T) {
	t.Parallel()
	define := func(file, name string) string {
		b, err := cuSource(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^#define ` + name + `(\(BR, BC, D\))? (.*?)(\s*//.*)?$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s defines no %s", file, name)
		}
		return m[2]
	}
	for name, want := range map[string]int{"NAIVE_BWD_THREADS": naiveBwdThreads, "NAIVE_BWD_MAXQ": naiveMaxOutPerThread} {
		if got := define("naive_bwd.cu", name); got != strconv.Itoa(want) {
			t.Errorf("naive_bwd.cu: %s is %s, the registry's %d", name, got, want)
		}
	}
	smem := define("flash2_bwd.cu", "FLASH2_BWD_SMEM")
	for _, tile := range Float32Tiles {
		expr := strings.NewReplacer("BR", strconv.Itoa(tile.Br), "BC", strconv.Itoa(tile.Bc), "D", strconv.Itoa(tile.D)).Replace(smem)
		e, err := parser.ParseExpr(expr)
		if err != nil {
			t.Fatalf("FLASH2_BWD_SMEM %q: %v", expr, err)
		}
		if got, want := evalInt(t, e), flash2BwdSharedBytes(tile); got != want {
			t.Errorf("tile %v: FLASH2_BWD_SMEM is %d bytes, flash2BwdSharedBytes %d", tile, got, want)
		}
	}
}

// evalInt evaluates an integer expression of +, −, *, / and parentheses.
func evalInt(t *testing.T, e ast.Expr) int {
	switch e := e.(type) {
	case *ast.BasicLit:
		n, err := strconv.Atoi(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		return n
	case *ast.ParenExpr:
		return evalInt(t, e.X)
	case *ast.BinaryExpr:
		x, y := evalInt(t, e.X), evalInt(t, e.Y)
		switch e.Op {
		case token.ADD:
			return x + y
		case token.SUB:
			return x - y
		case token.MUL:
			return x * y
		case token.QUO:
			return x / y
		}
	}
	t.Fatalf("cannot evaluate %T", e)
	return 0
}
