package lessons

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
)

// The asks about a run's records as a whole, of any variant: the tiles it
// skips, how many records of a kind it has, the bytes a kind of step
// writes, and the SM that ran a block.

// skippedTiles asks which tiles a run never visits: a set of tiles.
type skippedTiles struct{}

func (skippedTiles) parse(c *Checkpoint, d *directive) {
	c.readBH(d)
	c.Format = grading.FormatTiles
	for i := 0; i < c.Run.Tr(); i++ {
		for j := 0; j < c.Run.Tc(); j++ {
			c.Choices = append(c.Choices, grading.Option{Value: fmt.Sprintf("%d,%d", i, j), Label: fmt.Sprintf("tile (%d, %d)", i, j)})
		}
	}
}

func (skippedTiles) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	visited := map[string]bool{}
	finished := map[int]bool{}
	for _, r := range t.Steps {
		if r.BH != c.BH {
			continue
		}
		// A backward's tile is visited by its kv-tile's block (bwd_step),
		// and its q-tile is finished when its dQ is (bwd_dq).
		switch r.Kind {
		case instrument.KindFlashStep, instrument.KindScores, instrument.KindPV, instrument.KindBwdStep:
			visited[fmt.Sprintf("%d,%d", r.I, r.J)] = true
		case instrument.KindEpilogue, instrument.KindBwdDQ:
			finished[r.I] = true
		case instrument.KindTiming:
			if r.J >= 0 {
				visited[fmt.Sprintf("%d,%d", r.I, r.J)] = true
			} else {
				finished[r.I] = true
			}
		}
	}
	var skipped []string
	for i := 0; i < h.Tr(); i++ {
		for j := 0; j < h.Tc(); j++ {
			if key := fmt.Sprintf("%d,%d", i, j); finished[i] && !visited[key] {
				skipped = append(skipped, key)
			}
		}
	}
	display := "none"
	if len(skipped) > 0 {
		display = strings.Join(skipped, "; ")
	}
	return grading.Solution{Tiles: skipped, Display: display,
		Explain: fmt.Sprintf("The trace holds a step for %d of the %d tiles of batch-head %d. The tiles without one, (q-tile, kv-tile) = %s, are the ones the kernel never loaded.",
			len(visited), h.Tr()*h.Tc(), c.BH, display)}, nil
}

func (skippedTiles) pose(c *Checkpoint, key grading.Solution) grading.Question {
	queries := "queries i·B_r to i·B_r + B_r − 1"
	if off := c.Run.QueryOffset(); off > 0 {
		// The queries are the last n_q of the N positions (lesson 15).
		queries = fmt.Sprintf("query rows i·B_r to i·B_r + B_r − 1, which are the last of the N positions: row r sits at position N − n_q + r = %d + r", off)
	}
	return c.tiles(key, fmt.Sprintf("Not quite. A causal mask skips a tile only when every key of its kv-tile comes after every query of its q-tile: with B_r = %d and B_c = %d, q-tile i holds %s, and kv-tile j keys j·B_c to j·B_c + B_c − 1. A tile with even one key at or before one of its queries is computed, its later keys masked to −∞; and without a mask nothing is skipped.",
		c.Run.Br, c.Run.Bc, queries))
}

// readKind reads kind=, a step's record kind.
func (c *Checkpoint) readKind(d *directive) {
	c.Kind = d.text("kind")
	k, ok := kindByName(c.Kind)
	if !ok || k == instrument.KindInputs || k == instrument.KindTiming {
		d.failf("kind must name a step's record kind (flash_step, scores, softmax, pv, epilogue; a backward's bwd_pre, bwd_step, bwd_dq), got %q", c.Kind)
	}
}

// recordCount asks how many records of a kind one batch-head has: a whole
// number, exactly.
type recordCount struct{}

func (recordCount) parse(c *Checkpoint, d *directive) {
	c.needFullTrace(d)
	c.readKind(d)
	c.Format = grading.FormatNumber
	c.readBH(d)
}

func (recordCount) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	kind, _ := kindByName(c.Kind)
	n, first := 0, -1
	for k, r := range t.Steps {
		if r.Kind == kind && r.BH == c.BH {
			n++
			if first < 0 {
				first = k
			}
		}
	}
	// No upper bound: the number of tiles would be one, and for a run
	// without a mask it is the answer itself, which a student could find
	// by trying answers until one is refused.
	return grading.Solution{Number: float64(n), Display: strconv.Itoa(n), Step: first + 1, Lo: 0, Hi: math.Inf(1),
		Why: "a count of records is not negative",
		Explain: fmt.Sprintf("Batch-head %d's trace holds %d %s records, out of %d steps of the whole trace (%d q-tiles × %d kv-tiles = %d tiles).",
			c.BH, n, c.Kind, len(t.Steps), h.Tr(), h.Tc(), h.Tr()*h.Tc())}, nil
}

func (recordCount) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Plain, func(float64) string { return "Not quite. " + c.countRule() })
}

// countRule says what to count for a count checkpoint, never the total.
func (c *Checkpoint) countRule() string {
	kinds := map[string]struct{ what, per string }{
		"flash_step": {"tile steps", "one for each tile, a group of rows against a group of keys, that the kernel computes"},
		"scores":     {"scores steps", "one each time the scores pass visits a tile, a group of rows against a group of keys"},
		"pv":         {"P·V steps", "one for each tile of P·V"},
		"softmax":    {"softmax steps", "one for each group of rows"},
		"epilogue":   {"closing steps", "one for each group of rows, when it is finished"},
		"bwd_step":   {"backward tile steps", "one each time a kv-tile's block, walking the groups of rows, visits one"},
		"bwd_pre":    {"preprocessing steps", "one for each group of rows, before the blocks of kv-tiles start"},
		"bwd_dq":     {"finishing steps", "one for each group of rows, once its dQ is whole"},
	}
	k, ok := kinds[c.Kind]
	if !ok {
		k.what, k.per = c.Kind+" steps", "one for each step of that kind"
	}
	whose := "the run's one head"
	if c.Run.Batch*c.Run.Heads > 1 {
		whose = fmt.Sprintf("batch-head %d", c.BH)
	}
	rows := "N rows in groups of Br make ⌈N / Br⌉ groups"
	if c.Run.Queries() < c.Run.N {
		rows = "n_q query rows in groups of Br make ⌈n_q / Br⌉ groups"
	}
	h := fmt.Sprintf("Count the %s of %s: there is %s. %s, N keys in groups of Bc make ⌈N / Bc⌉, and a tile is one of each, as the stepper's tile grid shows.", k.what, whose, k.per, rows)
	if c.Run.Causal {
		h += " Under the causal mask a tile whose every key comes after every query of its q-tile is skipped."
	}
	return h
}

// bytesWritten asks how many bytes a kind of step writes to device memory
// over the whole run. Its tolerance is relative (tol, 1%): bytes are
// counted by their size.
type bytesWritten struct{}

func (bytesWritten) parse(c *Checkpoint, d *directive) {
	c.needFullTrace(d)
	c.readKind(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
}

func (bytesWritten) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	kind, _ := kindByName(c.Kind)
	var sum uint64
	n := 0
	for _, r := range t.Steps {
		if r.Kind == kind {
			sum += r.BytesWritten
			n++
		}
	}
	return grading.Solution{Number: float64(sum), Display: fmt.Sprintf("%d bytes", sum), Lo: 0, Hi: math.Inf(1),
		Why:     "a count of bytes is not negative",
		Explain: fmt.Sprintf("The %d %s steps of the trace wrote %d bytes to device memory in all (each record counts what its step wrote).", n, c.Kind, sum)}, nil
}

func (bytesWritten) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Bytes, func(float64) string {
		return fmt.Sprintf("Not quite. Add up what the %s steps write to device memory: work out the elements one such step writes (4 bytes each in float32), then multiply by the number of %s steps in the trace.", c.Kind, c.Kind)
	})
}

// blockSM asks which SM ran a block of a timing run: a whole number,
// exactly.
type blockSM struct{}

func (blockSM) parse(c *Checkpoint, d *directive) {
	if !c.Run.Timing {
		d.failf("ask=sm needs a timing run (mode=timing); preset %q is not one", c.Preset)
	}
	c.BH = d.whole("bh", 0, 0, c.Run.Batch*c.Run.Heads-1)
	c.Q = d.whole("q", -1, 0, c.Run.Tr()-1)
	c.Format = grading.FormatNumber
}

func (blockSM) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	h := t.H
	for k, r := range t.Steps {
		if r.Kind == instrument.KindTiming && r.BH == c.BH && r.I == c.Q {
			hi := float64(max(h.NumSMs, 1) - 1)
			return grading.Solution{Number: float64(r.SM), Display: fmt.Sprintf("SM %d", r.SM), Step: k + 1, Lo: 0, Hi: hi,
				Why: fmt.Sprintf("%s has %d SMs, numbered from 0", strings.TrimSpace(h.Label), h.NumSMs),
				Explain: fmt.Sprintf("The timing trace stamps block (batch-head %d, q-tile %d) on SM %d: its first step is step %d of %d, starting %.1f µs after the grid's first step. A block never moves: all its kv-tiles run on that SM.",
					c.BH, c.Q, r.SM, k+1, len(t.Steps), float64(r.TStart-t.firstStart())/1000)}, nil
		}
	}
	return grading.Solution{}, fmt.Errorf("checkpoint %s: block (%d, %d): %w", c.ID, c.BH, c.Q, errNotInTrace)
}

func (blockSM) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.SM, func(float64) string {
		heads := max(c.Run.Heads, 1)
		return fmt.Sprintf("Not quite. Find the block in the timeline: hover over the marks, each names its SM, its batch and head (batch-head %d is b%d h%d) and its q-tile. Every step of a block, from its first kv-tile to its epilogue, sits on the row of the one SM that ran it.",
			c.BH, c.BH/heads, c.BH%heads)
	})
}

func (t *Trace) firstStart() uint64 {
	first := uint64(math.MaxUint64)
	for _, r := range t.Steps {
		first = min(first, r.TStart)
	}
	return first
}
