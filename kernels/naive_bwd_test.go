package kernels

import (
	"fmt"
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
