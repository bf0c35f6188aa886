package ladder

import "strings"

// Idea is one of rung 6's ideas measured apart: the ladder bench runs rung
// 6's block with that one idea taken away (a switch of flash2_fast_block),
// on the same shapes in the same run, so each figure says what the idea is
// worth with all the others in place.
type Idea struct {
	What string
	// Without is rung 6 without the idea, one cell per Shape (Missing where
	// the bench did not run it: skipping causal tiles has no plain shape).
	Without []Cell
	// Worth is rung 6's TFLOP/s over Without's, per Shape (0 where missing).
	Worth []float64
}

// rung6Ideas names each idea by the mark the bench's kernel without it
// carries (bench/ladder/bench.cu, make), in the order the rung's
// description gives them.
var rung6Ideas = []struct{ mark, what string }{
	{"_noswizzle", "shared tiles XOR-swizzled, so that ldmatrix hits no bank twice"},
	{"_sync", "K and V loaded by cp.async while the tensor cores work, not through registers"},
	{"_expf", "exp2 with the scale folded in, not exp of the scaled scores"},
	{"_br64_", "128-row tiles: each warp uses every K and V fragment for two row atoms (against 64-row tiles)"},
	{"_noskip", "causal tiles above the diagonal skipped, not computed and masked whole"},
}

// withoutIdea says whether a bench kernel is a rung with one of its ideas
// taken away: a control, never the rung's own figure.
func withoutIdea(kernel string) bool {
	for _, i := range rung6Ideas {
		if strings.Contains(kernel, i.mark) {
			return true
		}
	}
	return false
}

// ideas lays out rung 6's ideas from the bench's controls beside rung 6's
// own cells (rung, the row of the family the controls belong to).
func ideas(rec *BenchRecord, family string, rung []Cell) []Idea {
	if rec == nil {
		return nil
	}
	var out []Idea
	for _, i := range rung6Ideas {
		idea := Idea{What: i.what, Without: make([]Cell, len(Shapes)), Worth: make([]float64, len(Shapes))}
		found := false
		for s, sh := range Shapes {
			idea.Without[s].Missing = true
			for _, r := range rec.Rows {
				if !strings.HasPrefix(r.Kernel, family) || !strings.Contains(r.Kernel, i.mark) || r.D != sh.D || r.Causal != sh.Causal || (r.N != 0 && r.N != N) {
					continue
				}
				idea.Without[s] = Cell{Ms: r.Ms, TFLOPs: r.TFLOPs, Kernel: r.Kernel}
				if s < len(rung) && !rung[s].Missing && r.TFLOPs > 0 {
					idea.Worth[s] = rung[s].TFLOPs / r.TFLOPs
				}
				found = true
				break
			}
		}
		if found {
			out = append(out, idea)
		}
	}
	return out
}
