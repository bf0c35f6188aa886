package lessons

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
)

// The online softmax's asks: a row's m, l and α at a kv-tile, its p on a
// key, its final weight on a key, the key it attends to most, and the last
// kv-tile that raised its max. Each reads FlashAttention's flash steps from
// the trace of the checkpoint's run.

// rowAtKVTile is the attributes of an ask about a row after a kv-tile
// (bh, row, kv, tol): m, l and α.
type rowAtKVTile struct{}

func (rowAtKVTile) parse(c *Checkpoint, d *directive) {
	c.needFlashSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.readKV(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	if c.Ask == AskAlpha {
		c.Rel = d.rel()
	}
	c.needTracedRow(d)
}

// rowStep is the flash step of a checkpoint's row at its kv-tile.
type rowStep struct {
	k     int // the step's index in the trace, from 0
	r     *instrument.Record
	row   int    // the row within its q-tile
	where string // the step and row, as an explanation names them
}

func (c *Checkpoint) rowStep(t *Trace) (rowStep, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	k, r := t.find(instrument.KindFlashStep, c.BH, i, c.KV)
	if r == nil {
		return rowStep{}, fmt.Errorf("checkpoint %s: q-tile %d × kv-tile %d of batch-head %d: %w (a causal run skips tiles above the diagonal)", c.ID, i, c.KV, c.BH, errNotInTrace)
	}
	return rowStep{k: k, r: r, row: row,
		where: fmt.Sprintf("step %d (q-tile %d × kv-tile %d), row %d is row %d of the q-tile", k+1, i, c.KV, c.Row, row)}, nil
}

// runningMax asks for a row's running max m after a kv-tile. Its tolerance
// is ±tol (0.01): m is a logit, whose error counts the same at any size.
type runningMax struct{ rowAtKVTile }

func (runningMax) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	st, err := c.rowStep(t)
	if err != nil {
		return grading.Solution{}, err
	}
	r, row := st.r, st.row
	rowMax := float32(math.Inf(-1))
	for col := 0; col < r.ColsValid; col++ {
		rowMax = max(rowMax, r.S[row*t.H.Bc+col])
	}
	s := grading.Solution{Step: st.k + 1, Number: float64(r.MNew[row])}
	s.Explain = fmt.Sprintf("At %s. Before this tile m_old = %s; the largest score of the row in this tile is %s; so m_new = max(%s, %s) = %s.",
		st.where, f3(r.MOld[row]), f3(rowMax), f3(r.MOld[row]), f3(rowMax), f3(r.MNew[row]))
	// The bound is the first power of ten at least twice every score of
	// the run: an answer past it is absurd, and the bound, which a student
	// may find by trying answers, says only the scores' order of
	// magnitude, which the S panel shows anyway, and is never near the m
	// it bounds.
	largest := 0.0
	for _, step := range t.Steps {
		for _, v := range step.S {
			if !math.IsInf(float64(v), 0) {
				largest = max(largest, math.Abs(float64(v)))
			}
		}
	}
	bound := 10.0
	for bound < 2*largest {
		bound *= 10
	}
	s.Lo, s.Hi, s.Why = -bound, bound, fmt.Sprintf("m is one of the row's scores q·k/√d, and every score of this run lies between −%g and %g", bound, bound)
	s.Display = c.shown(s.Number)
	return s, nil
}

func (runningMax) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Absolute(c.Tol), grading.Plain, func(float64) string {
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 the running max starts from m_old = −∞, so m_new is the largest score of %s in that tile: find it in the S tile of kv-tile 0 (hover over a cell for its value).", c.rowWhere())
		}
		return fmt.Sprintf("Not quite. m_new is the larger of m_old and this tile's largest score: for %s at kv-tile %d, find m_old in the rows table and the row's largest score in %s, and keep the larger.", c.rowWhere(), c.KV, c.tileMaxWhere(c.KV))
	})
}

// runningSum asks for a row's running sum l after a kv-tile. Its
// tolerance is ±tol (0.01): l is at least 1, so that is at most 1% of it.
type runningSum struct{ rowAtKVTile }

func (runningSum) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	st, err := c.rowStep(t)
	if err != nil {
		return grading.Solution{}, err
	}
	h, r, row := t.H, st.r, st.row
	s := grading.Solution{Step: st.k + 1, Number: float64(r.L[row])}
	var sumP float32
	for col := 0; col < r.ColsValid; col++ {
		sumP += r.P[row*h.Bc+col]
	}
	s.Explain = fmt.Sprintf("At %s. α = exp(m_old − m_new) = %s rescales the old sum, and this tile's probabilities exp(S − m_new) add %s: l = α·l_old + Σp = %s.",
		st.where, f3(r.Alpha[row]), f3(sumP), f3(r.L[row]))
	seen := min(h.N, (c.KV+1)*h.Bc)
	s.Lo, s.Hi, s.Why = 1, float64(seen), fmt.Sprintf("l adds exp(s − m) ≤ 1 for each of the %d columns seen so far, and exactly 1 for the largest, so 1 ≤ l ≤ %d", seen, seen)
	s.Display = c.shown(s.Number)
	return s, nil
}

func (runningSum) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Absolute(c.Tol), grading.Plain, func(float64) string {
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 there is no old sum to rescale: l is the sum of the probabilities of %s in the P tile, each exp(s − m_new), the largest of them exactly 1.", c.rowWhere())
		}
		sum := "add up the row's probabilities in that tile's P, each exp(s − m_new)"
		if c.largeTiles() {
			sum = "add the rows table's Σp (this tile) for the row, the sum of its probabilities exp(s − m_new) in that tile"
		}
		return fmt.Sprintf("Not quite. l = α·l_old + Σp. l_old is the l of %s in the rows table at kv-tile %d, the step before. At kv-tile %d the table holds back m_new, α and l: work out m_new, the larger of m_old and the row's largest score in %s, then α = exp(m_old − m_new); multiply l_old by α, and %s.",
			c.rowWhere(), c.KV-1, c.KV, c.tileMaxWhere(c.KV), sum)
	})
}

// rescale asks for the rescale factor α = exp(m_old − m_new) at a kv-tile.
// Its tolerance is grading.SmallValue: α may be tiny and still mean
// something.
type rescale struct{ rowAtKVTile }

func (rescale) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	st, err := c.rowStep(t)
	if err != nil {
		return grading.Solution{}, err
	}
	r, row := st.r, st.row
	s := grading.Solution{Step: st.k + 1, Number: float64(r.Alpha[row])}
	s.Display = c.shown(s.Number)
	s.Explain = fmt.Sprintf("At %s. m_old = %s and m_new = %s, so α = exp(m_old − m_new) = exp(%s) = %s.",
		st.where, f3(r.MOld[row]), f3(r.MNew[row]), f3(r.MOld[row]-r.MNew[row]), s.Display)
	if c.KV == 0 {
		s.Explain += " At the first kv-tile m_old is −∞ and there is nothing yet to rescale."
	}
	s.Lo, s.Hi, s.Why = 0, 1, "m never decreases, so α = exp(m_old − m_new) is between 0 and 1"
	return s, nil
}

func (rescale) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(x float64) string {
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 the kernel has seen no score yet and starts from m_old = −∞: put that into α = exp(m_old − m_new) for %s.", c.rowWhere())
		}
		// At the step asked about the rows table holds m_new back: the
		// hint says where its inputs are.
		h := fmt.Sprintf("Not quite. α = exp(m_old − m_new): for %s at kv-tile %d, read m_old in the rows table; m_new, which the table holds back at this step, is the larger of m_old and the row's largest score in %s. Subtract, and raise e to that power (a calculator's exp; write a tiny result with its exponent).", c.rowWhere(), c.KV, c.tileMaxWhere(c.KV))
		// 0 and 1 are the two answers a student reaches by a rule
		// misapplied: these say which rule, of what was typed.
		switch x {
		case 0:
			h += " float32 rounds α to zero only when the max jumps by more than about 104: look at how far it jumps here."
		case 1:
			h += " α is one only where the tile leaves the row's max where it was: compare m_old and m_new."
		}
		return h
	})
}

// rowOnKey is the attributes of an ask about a row on a key (bh, row, key,
// tol): p and the final weight.
type rowOnKey struct{}

func (rowOnKey) parse(c *Checkpoint, d *directive) {
	c.needFlashSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.Key = d.whole("key", -1, 0, c.Run.N-1)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	c.Rel = d.rel()
	c.needTracedRow(d)
}

// probability asks for a row's p = exp(s − m_new) on a key, at that key's
// kv-tile. Its tolerance is grading.SmallValue: p lies in [0, 1].
type probability struct{ rowOnKey }

func (probability) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	j, col := c.Key/h.Bc, c.Key%h.Bc
	k, r := t.find(instrument.KindFlashStep, c.BH, i, j)
	if r == nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: q-tile %d × kv-tile %d of batch-head %d: %w (a causal run skips tiles above the diagonal)", c.ID, i, j, c.BH, errNotInTrace)
	}
	sv, m, p := r.S[row*h.Bc+col], r.MNew[row], r.P[row*h.Bc+col]
	show := c.shown(float64(p))
	s := grading.Solution{Number: float64(p), Display: show, Step: k + 1, Lo: 0, Hi: 1.001,
		Why: "p = exp(s − m_new), and m_new is at least every score of the row so far, so p lies between 0 and 1"}
	s.Explain = fmt.Sprintf("Key %d is column %d of kv-tile %d; at step %d (q-tile %d × kv-tile %d) row %d's score on it is S = %s and the row's max is m_new = %s, so p = exp(%s − %s) = exp(%s) = %s.",
		c.Key, col, j, k+1, i, j, c.Row, f3(sv), f3(m), f3(sv), f3(m), f3(sv-m), show)
	if h.Variant == instrument.VariantFlash2Fast {
		b := kernels.RoundBF16(p)
		if p > 0 {
			s.Explain += fmt.Sprintf(" The tensor-core kernel computes it as 2^(S·log₂e − m·log₂e) with ex2 and keeps it in float32 for l; the P·V product multiplies V by its bf16 rounding, %s (%s relative).",
				strconv.FormatFloat(float64(b), 'g', 8, 32), strconv.FormatFloat(float64((b-p)/p), 'e', 1, 32))
		}
	}
	return s, nil
}

func (probability) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(float64) string {
		bc := max(c.Run.Bc, 1)
		return fmt.Sprintf("Not quite. p = exp(s − m_new), with m_new the row's max after this tile, not the row's final max: for %s take the score on key %d (column %d of kv-tile %d's S tile, hover over it) and m_new from the rows table at the same step, subtract, and raise e to that power.",
			c.rowWhere(), c.Key, c.Key%bc, c.Key/bc)
	})
}

// rowScores are a row's scores on every key, gathered from every kv-tile
// step of its q-tile, and the step that finishes the row (its epilogue,
// which holds its log-sum-exp).
func (c *Checkpoint) rowScores(t *Trace) (scores []float32, end int, epilogue *instrument.Record, err error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	scores = make([]float32, h.N)
	for k := range scores {
		scores[k] = float32(math.Inf(-1))
	}
	for _, r := range t.Steps {
		if r.Kind == instrument.KindFlashStep && r.BH == c.BH && r.I == i {
			for col := 0; col < r.ColsValid; col++ {
				scores[r.J*h.Bc+col] = r.S[row*h.Bc+col]
			}
		}
	}
	end, epilogue = t.find(instrument.KindEpilogue, c.BH, i, -2)
	if epilogue == nil {
		return nil, 0, nil, fmt.Errorf("checkpoint %s: no epilogue of q-tile %d: %w", c.ID, i, errNotInTrace)
	}
	return scores, end, epilogue, nil
}

// attentionWeight asks for a row's final attention weight on a key. Its
// tolerance is grading.SmallValue: a weight lies in [0, 1], and a masked
// key's is 0.
type attentionWeight struct{ rowOnKey }

func (attentionWeight) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	scores, ek, epi, err := c.rowScores(t)
	if err != nil {
		return grading.Solution{}, err
	}
	row := c.Row % t.H.Br
	w := math.Exp(float64(scores[c.Key] - epi.LSE[row]))
	show := c.shown(w)
	return grading.Solution{Number: w, Display: show, Step: ek + 1, Lo: 0, Hi: 1, Why: "a softmax weight is between 0 and 1, and a row's weights add up to 1",
		Explain: fmt.Sprintf("Row %d's score on key %d is %s. Softmax divides exp of it by the sum of exp over the row's %d scores; the log of that sum is %s, which the kernel writes when the row is finished (step %d; lesson 5 calls it the log-sum-exp). The weight is exp(%s − %s) = %s.",
			c.Row, c.Key, f3(scores[c.Key]), t.H.N, f3(epi.LSE[row]), ek+1, f3(scores[c.Key]), f3(epi.LSE[row]), show)}, nil
}

func (attentionWeight) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(float64) string {
		return fmt.Sprintf("Not quite. A weight is the softmax of the row's scores: exp(score on key %d) over the sum of exp(score) across every key of row %d. Read row %d's scores in the S panel, every step of its rows.",
			c.Key, c.Row, c.Row)
	})
}

// mostAttended asks which key a row attends to most: one of its keys.
type mostAttended struct{}

func (mostAttended) parse(c *Checkpoint, d *directive) {
	c.needFlashSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.Format = grading.FormatChoice
	for k := 0; k < c.Run.N; k++ {
		c.Choices = append(c.Choices, grading.Option{Value: strconv.Itoa(k), Label: fmt.Sprintf("key %d", k)})
	}
	c.needTracedRow(d)
}

func (mostAttended) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	scores, ek, epi, err := c.rowScores(t)
	if err != nil {
		return grading.Solution{}, err
	}
	row := c.Row % t.H.Br
	best := 0
	for k, v := range scores {
		if v > scores[best] {
			best = k
		}
	}
	runnerUp := float32(math.Inf(-1))
	for k, v := range scores {
		if k != best {
			runnerUp = max(runnerUp, v)
		}
	}
	return grading.Solution{Choice: strconv.Itoa(best), Display: fmt.Sprintf("key %d", best), Step: ek + 1,
		Explain: fmt.Sprintf("Row %d's largest score is %s, on key %d (the next largest is %s), so softmax gives key %d the largest weight, exp(%s − LSE) = %s.",
			c.Row, f3(scores[best]), best, f3(runnerUp), best, f3(scores[best]), f3(float32(math.Exp(float64(scores[best]-epi.LSE[row])))))}, nil
}

func (mostAttended) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.choice(key, func(string) string {
		return fmt.Sprintf("Not that one. A row attends most to the key with its largest score, since exp keeps the scores' order: look along row %d in the S panel at every kv-tile (hover for the values) and find its largest score.", c.Row)
	})
}

// lastRaise asks for the last kv-tile that raised a row's m: one of the
// run's kv-tiles.
type lastRaise struct{}

func (lastRaise) parse(c *Checkpoint, d *directive) {
	c.needFlashSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.Format = grading.FormatChoice
	for j := 0; j < c.Run.Tc(); j++ {
		c.Choices = append(c.Choices, grading.Option{Value: strconv.Itoa(j), Label: fmt.Sprintf("kv-tile %d", j)})
	}
	c.needTracedRow(d)
}

func (lastRaise) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	i, row := c.Row/t.H.Br, c.Row%t.H.Br
	last, lastK := -1, -1
	var trail []string
	for k, r := range t.Steps {
		if r.Kind == instrument.KindFlashStep && r.BH == c.BH && r.I == i {
			if r.MNew[row] > r.MOld[row] {
				last, lastK = r.J, k
			}
			trail = append(trail, fmt.Sprintf("kv-tile %d: %s → %s", r.J, f3(r.MOld[row]), f3(r.MNew[row])))
		}
	}
	if last < 0 {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: row %d: %w", c.ID, c.Row, errNotInTrace)
	}
	return grading.Solution{Choice: strconv.Itoa(last), Display: fmt.Sprintf("kv-tile %d", last), Step: lastK + 1,
		Explain: fmt.Sprintf("Row %d's m at each kv-tile (m_old → m_new): %s. The last rise is at kv-tile %d (step %d); after it α = 1 and nothing is rescaled.",
			c.Row, strings.Join(trail, "; "), last, lastK+1)}, nil
}

func (lastRaise) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.choice(key, func(string) string {
		// The rows table may hold the row's m back from the step a
		// checkpoint of the same widget asks about: the scores decide.
		return fmt.Sprintf("Not that one. Row %d's m rises at a kv-tile when that tile holds a score above every earlier one: step through the kv-tiles and, for %s, compare the row's largest score in each tile (%s) with the largest of the tiles before it; the last tile whose largest score beats every earlier one is the last rise.", c.Row, c.rowWhere(), c.tileMaxIn())
	})
}
