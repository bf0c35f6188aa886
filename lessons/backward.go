package lessons

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
)

// The backward lesson's asks, read from the trace of a backward run
// (kernels/flash2_bwd.go): its bwd_pre records (a q-tile's L and D), its
// bwd_step records (kv-tile j's block at q-tile i: S, P, dP, dS, and the
// part it adds into dQ_i) and its bwd_dq records (a q-tile's finished dQ).
// They ask what the kv-tiles still to come add to a row's sum of P, a
// row's dS on a key, a row's finished dQ in a column, and the step at
// which a kv-tile's block loads K_j and V_j. As with every ask, the answer
// is never in the lesson.
//
//	::: checkpoint id=bwd-p-left preset=bwd-16 ask=p-left row=5 kv=1 widget=bwd-rows
//	How much will the later kv-tiles add to row 5's Σp?
//	:::

// backwardVariant says whether v's trace holds a fused backward's steps: a
// bwd_pre per q-tile, a bwd_step for each (kv-tile, q-tile) its blocks
// visit, a bwd_dq per q-tile (flash2_bwd), as the registry says.
func backwardVariant(v instrument.Variant) bool {
	info := kernels.Info(v)
	return info != nil && info.Backward && info.Loop == kernels.LoopFused && !info.Materialised
}

// needBackwardSteps: the ask reads a fused backward's steps.
func (c *Checkpoint) needBackwardSteps(d *directive) {
	c.needFullTrace(d)
	if !backwardVariant(c.Run.Variant) {
		d.failf("ask=%s reads a backward run's steps (flash2_bwd); preset %q runs %s", c.Ask, c.Preset, c.Run.Variant)
	}
}

// needTracedBwdRow: the row's q-tile is one the backward run traces. Read
// last, once the row is.
func (c *Checkpoint) needTracedBwdRow(d *directive) {
	if len(d.errs) == 0 && !c.Run.TracedQ().Contains(c.Row/c.Run.Br) {
		d.failf("row %d is in q-tile %d, which preset %q does not trace", c.Row, c.Row/c.Run.Br, c.Preset)
	}
}

// bwdVisits are the kv-tiles whose blocks visit q-tile i of batch-head bh,
// in trace order, from the run's schedule: every kv-tile, or under a
// causal mask those whose first key some row of the q-tile may see.
func (c *Checkpoint) bwdVisits(bh, i int) []int {
	var js []int
	for _, st := range kernels.Schedule(&c.Run) {
		if st.Kind == instrument.KindBwdStep && st.BH == bh && st.I == i {
			js = append(js, st.J)
		}
	}
	return js
}

// bwdBound is the first power of ten, from 10 on, at least twice every
// |x| of xs: a plausible bound that says only the values' order of
// magnitude, which the panels' colour scales show anyway, and is never
// near a value it bounds.
func bwdBound(xs []float64) float64 {
	largest := 0.0
	for _, x := range xs {
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			largest = max(largest, math.Abs(x))
		}
	}
	bound := 10.0
	for bound < 2*largest {
		bound *= 10
	}
	return bound
}

// pRowSum is row's sum of p over a step's real columns, in float64 as the
// stepper's rows table adds them.
func pRowSum(r *instrument.Record, bc, row int) float64 {
	s := 0.0
	for col := 0; col < r.ColsValid; col++ {
		s += float64(r.P[row*bc+col])
	}
	return s
}

func f4(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

// pLeft asks what the kv-tiles after kv-tile j add to a row's Σp: P =
// exp(S − L) is divided by the row's whole sum from the start, so its row
// sums over every kv-tile reach one, and what is left is one minus the sum
// so far. Its tolerance is ±tol (0.01), as l's: a sum of probabilities.
type pLeft struct{}

func (pLeft) parse(c *Checkpoint, d *directive) {
	c.needBackwardSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.readKV(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	c.needTracedBwdRow(d)
	if len(d.errs) > 0 {
		return
	}
	visits := c.bwdVisits(c.BH, c.Row/c.Run.Br)
	switch k := slices.Index(visits, c.KV); {
	case k < 0:
		d.failf("kv-tile %d's block never visits row %d's q-tile (a causal block starts at the first q-tile that sees its keys)", c.KV, c.Row)
	case k == len(visits)-1:
		d.failf("kv-tile %d is the last to visit row %d: no kv-tile is left to add anything", c.KV, c.Row)
	}
}

func (pLeft) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	var soFar, left float64
	at, last := -1, -1
	var adds []string
	for k, r := range t.Steps {
		if r.Kind != instrument.KindBwdStep || r.BH != c.BH || r.I != i {
			continue
		}
		sum := pRowSum(r, h.Bc, row)
		if r.J <= c.KV {
			soFar += sum
		} else {
			left += sum
			last = k
			adds = append(adds, fmt.Sprintf("kv-tile %d adds %s (step %d)", r.J, f4(sum), k+1))
		}
		if r.J == c.KV {
			at = k
		}
	}
	if at < 0 || last < 0 {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: kv-tile %d and a later one at q-tile %d of batch-head %d: %w", c.ID, c.KV, i, c.BH, errNotInTrace)
	}
	// The bound leaves room for float32's rounding of a sum that is one;
	// its reason is in words, since a digit in it could be the answer.
	s := grading.Solution{Number: left, Step: last + 1, Lo: 0, Hi: 1.001,
		Why: "a row's p are never negative and add up to one over all its kv-tiles, so what some of them add lies between zero and one"}
	s.Display = c.shown(left)
	if left > 0 && left < 1e-3 {
		// ±0.01 needs three decimals, which would show a tiny sum as
		// zeros: its exponent says what it is.
		s.Display = strconv.FormatFloat(left, 'e', 2, 64)
	}
	s.Explain = fmt.Sprintf("At step %d (kv-tile %d's block at q-tile %d) the rows table gives %s a Σp so far of %s, the p of the kv-tiles up to %d. L is the log of the row's whole sum of exp(S), written by the forward, so P = exp(S − L) is divided by that sum from the start: over every kv-tile that visits the row its p add up to one, to float32's rounding, and the rest add 1 − %s = %s. The trace agrees: %s, %s in all, and Σp so far reaches %s at step %d. No running max, no α: nothing is ever rescaled.",
		at+1, c.KV, i, c.rowWhere(), f4(soFar), c.KV, f4(soFar), f4(1-soFar), strings.Join(adds, ", "), f4(left), f4(soFar+left), last+1)
	return s, nil
}

func (pLeft) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Absolute(c.Tol), grading.Plain, func(float64) string {
		return fmt.Sprintf("Not quite. L is the log of the row's whole sum of exp(S), from the forward, so P = exp(S − L) is already divided by it: over every kv-tile that visits row %d, its p add up to exactly one. Read the Σp so far of %s at kv-tile %d's step; what it lacks of one is what the later kv-tiles add.",
			c.Row, c.rowWhere(), c.KV)
	})
}

// scoreGradient asks for a row's dS on a key, p·(dP − D), at the step of
// that key's kv-tile. Its tolerance is grading.SmallValue (±tol, 0.01, and
// at most 2% of the value): dS is of order one or less, and a small one
// still means something.
type scoreGradient struct{}

func (scoreGradient) parse(c *Checkpoint, d *directive) {
	c.needBackwardSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.Key = d.whole("key", -1, 0, c.Run.N-1)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	c.Rel = d.rel()
	c.needTracedBwdRow(d)
	if c.Run.Causal && c.Key > c.Row {
		d.failf("key %d comes after row %d: under the causal mask its p, and so its dS, is 0", c.Key, c.Row)
	}
}

func (scoreGradient) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	j, col := c.Key/h.Bc, c.Key%h.Bc
	pk, pre := t.find(instrument.KindBwdPre, c.BH, i, -2)
	k, r := t.find(instrument.KindBwdStep, c.BH, i, j)
	if pre == nil || r == nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: the preprocessing of q-tile %d, or kv-tile %d's block at it, of batch-head %d: %w", c.ID, i, j, c.BH, errNotInTrace)
	}
	e := row*h.Bc + col
	p, dp, ds, delta := r.P[e], r.DP[e], r.DS[e], pre.Delta[row]
	var all []float64
	for _, st := range t.Steps {
		for _, v := range st.DS {
			all = append(all, float64(v))
		}
	}
	bound := bwdBound(all)
	s := grading.Solution{Number: float64(ds), Step: k + 1, Lo: -bound, Hi: bound,
		Why: fmt.Sprintf("every dS of this run lies between −%g and %g", bound, bound)}
	s.Display = c.shown(s.Number)
	s.Explain = fmt.Sprintf("Key %d is column %d of kv-tile %d. At step %d (kv-tile %d's block at q-tile %d) %s has p = %s on it and dP = %s; its D = rowsum(dO ∘ O) = %s was written at step %d, from dO and O alone, before any block had recomputed a p. So dS = p·(dP − D) = %s · (%s − (%s)) = %s · %s = %s.",
		c.Key, col, j, k+1, j, i, c.rowWhere(), f32(p), f32(dp), f32(delta), pk+1, f32(p), f32(dp), f32(delta), f32(p), f32(dp-delta), s.Display)
	return s, nil
}

func (scoreGradient) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(float64) string {
		bc := max(c.Run.Bc, 1)
		return fmt.Sprintf("Not quite. dS = P ∘ (dP − D), element by element: for %s on key %d (column %d of kv-tile %d) take its p in the P tile, its dP in the block's dP pane (hover over a cell for all its digits) and the row's D in the rows table; subtract D from dP, then multiply by p. D is one number for the whole row, the same at every kv-tile.",
			c.rowWhere(), c.Key, c.Key%bc, c.Key/bc)
	})
}

// finishedDQ asks for a row's finished dQ in one column: the parts every
// kv-tile's block adds into it, summed, times the scale 1/√d, which the
// last pass applies once. Its tolerance is grading.SmallValue, as dS's.
type finishedDQ struct{}

func (finishedDQ) parse(c *Checkpoint, d *directive) {
	c.needBackwardSteps(d)
	c.readBH(d)
	c.readRow(d)
	c.Col = d.whole("col", -1, 0, max(c.Run.D-1, 0))
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	c.Rel = d.rel()
	c.needTracedBwdRow(d)
}

func (finishedDQ) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	e := row*h.D + c.Col
	var sum float64
	var parts []string
	for k, r := range t.Steps {
		if r.Kind == instrument.KindBwdStep && r.BH == c.BH && r.I == i {
			sum += float64(r.DQ[e])
			parts = append(parts, fmt.Sprintf("%s from kv-tile %d (step %d)", f32(r.DQ[e]), r.J, k+1))
		}
	}
	k, fin := t.find(instrument.KindBwdDQ, c.BH, i, -2)
	if fin == nil || len(parts) == 0 {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: q-tile %d's steps or its finished dQ, batch-head %d: %w", c.ID, i, c.BH, errNotInTrace)
	}
	scale := 1 / math.Sqrt(float64(h.D))
	// The bound covers every row's dQ before the scale too: an answer
	// that forgets it is wrong, with a hint, not out of range.
	var all []float64
	for _, r := range t.Steps {
		if r.Kind == instrument.KindBwdDQ {
			for _, v := range r.DQ {
				all = append(all, float64(v)/scale)
			}
		}
	}
	bound := bwdBound(all)
	x := float64(fin.DQ[e])
	s := grading.Solution{Number: x, Step: k + 1, Lo: -bound, Hi: bound,
		Why: fmt.Sprintf("every dQ of this run, with or without its scale, lies between −%g and %g", bound, bound)}
	s.Display = c.shown(x)
	s.Explain = fmt.Sprintf("Every kv-tile's block that visits q-tile %d adds its part dS·K_j, unscaled, into dQ in device memory. In column %d, %s gets %s: %s in all. The last pass (step %d) multiplies that once by the scale 1/√d = 1/√%d = %s: dQ = %s · %s = %s.",
		i, c.Col, c.rowWhere(), strings.Join(parts, ", "), f4(sum), k+1, h.D, strconv.FormatFloat(scale, 'f', 5, 64), f4(sum), strconv.FormatFloat(scale, 'f', 5, 64), s.Display)
	return s, nil
}

// pose's hint writes the scale in words: a digit in it could lie within
// the tolerance of the answer.
func (finishedDQ) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(float64) string {
		br := max(c.Run.Br, 1)
		return fmt.Sprintf("Not quite. Every kv-tile's block that visits q-tile %d adds its part dS·K_j into dQ, unscaled: find the part of %s in column %d in the block's pane of what it adds into dQ at each of those steps (hover over a cell for all its digits), add the parts up, and multiply the sum once by the scale, one over √d.",
			c.Row/br, c.rowWhere(), c.Col)
	})
}

// firstLoad asks at which step a kv-tile's block loads K_j and V_j: the
// first step of its walk over the q-tiles. A whole number, exactly.
type firstLoad struct{}

func (firstLoad) parse(c *Checkpoint, d *directive) {
	c.needBackwardSteps(d)
	c.readBH(d)
	c.readKV(d)
	c.Format = grading.FormatNumber
}

func (firstLoad) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	// The trace's steps, grouped into its stretches: the preprocessing,
	// then one stretch per block, each walking its q-tiles.
	type stretch struct {
		bh, j, from, to, iFrom, iTo int
	}
	var pre int
	var blocks []stretch
	at := -1
	for k, r := range t.Steps {
		switch r.Kind {
		case instrument.KindBwdPre:
			pre++
		case instrument.KindBwdStep:
			if n := len(blocks); n > 0 && blocks[n-1].bh == r.BH && blocks[n-1].j == r.J {
				blocks[n-1].to, blocks[n-1].iTo = k+1, r.I
			} else {
				blocks = append(blocks, stretch{r.BH, r.J, k + 1, k + 1, r.I, r.I})
			}
			if at < 0 && r.BH == c.BH && r.J == c.KV {
				at = k
			}
		}
	}
	if at < 0 {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: kv-tile %d's block of batch-head %d: %w", c.ID, c.KV, c.BH, errNotInTrace)
	}
	var before []string
	var first stretch
	for _, b := range blocks {
		if b.from > at+1 {
			break
		}
		if b.from == at+1 {
			first = b
			break
		}
		who := fmt.Sprintf("kv-tile %d's block", b.j)
		if t.H.Batch*t.H.Heads > 1 {
			who += fmt.Sprintf(" of batch-head %d", b.bh)
		}
		before = append(before, fmt.Sprintf("%s, steps %d to %d (q-tiles %d to %d)", who, b.from, b.to, b.iFrom, b.iTo))
	}
	walk := "no block comes before it"
	if len(before) > 0 {
		walk = "before it come " + strings.Join(before, "; ")
	}
	where := fmt.Sprintf("q-tile %d", first.iFrom)
	if t.H.Causal {
		where += fmt.Sprintf(", the first with a row at or after key %d, the kv-tile's first: a causal block skips the q-tiles above it", c.KV*t.H.Bc)
	}
	s := grading.Solution{Number: float64(at + 1), Display: strconv.Itoa(at + 1), Step: at + 1, Lo: 1, Hi: float64(len(t.Steps)),
		Why: fmt.Sprintf("the trace has %d steps, numbered from 1", len(t.Steps))}
	s.Explain = fmt.Sprintf("Steps 1 to %d preprocess the q-tiles (D and a zeroed dQ). Then the blocks of the kv-tiles follow one another, each walking its q-tiles: %s. So kv-tile %d's block begins at step %d, at %s. There it loads K_%d and V_%d, once for its whole walk, and they stay on chip with dK_%d and dV_%d until its last q-tile, step %d.",
		pre, walk, c.KV, at+1, where, c.KV, c.KV, c.KV, c.KV, first.to)
	return s, nil
}

func (firstLoad) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Plain, func(float64) string {
		h := "Not quite. Count the steps that come before it in the trace: first one preprocessing step for each q-tile, then the blocks of the earlier kv-tiles one after another, each taking one step for each q-tile it visits. The block's first step is the one after those."
		if c.Run.Causal {
			h += " Under the causal mask a kv-tile's block starts at the first q-tile that holds a row at or after the kv-tile's first key, so the later blocks visit fewer q-tiles: the tile grid marks the ones a block skips."
		}
		return h
	})
}
