package lessons

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flashstep/lessons/loop"
	"flashstep/lessons/playground"
)

// The checkpoints whose answers come from arithmetic the server does
// itself: the playground's row (lesson 6) and the debugging lesson's loop, with and
// without its slips. Like the trace's asks, the answer is never written in
// the lesson; it is worked out from the directive's row or run.

// largest is the largest finite value of each playground type.
var largest = map[playground.Dtype]float64{
	playground.F32:  math.MaxFloat32,
	playground.F16:  65504,
	playground.BF16: float64(math.Float32frombits(0x7f7f0000)),
}

func gnum(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "−inf"
	case math.IsNaN(x):
		return "NaN"
	}
	return strconv.FormatFloat(x, 'g', 5, 64)
}

func (c *Checkpoint) solveComputed() (Solution, error) {
	switch c.Ask {
	case AskOverflow:
		return c.solveOverflow(), nil
	case AskLoopParts, AskLoopL:
		return c.solveLoop()
	case AskLadderSpeedup, AskLadderFloor:
		tab, err := LadderTable()
		if err != nil {
			return Solution{}, fmt.Errorf("checkpoint %s: the ladder's figures: %w", c.ID, err)
		}
		return c.SolveLadder(tab)
	}
	return Solution{}, fmt.Errorf("checkpoint %s: ask %q needs a trace", c.ID, c.Ask)
}

func (c *Checkpoint) solveOverflow() Solution {
	s := c.Playground
	d := s.Dtype
	r := playground.Run(s)
	shifted := "exp(s)"
	if s.SubtractMax {
		shifted = "exp(s − m)"
	}
	if r.FirstInf < 0 {
		top := 0.0
		for _, t := range r.Tiles {
			top = max(top, t.L)
		}
		why := ""
		if s.SubtractMax {
			why = " With the max subtracted every term is at most 1, so l is at most the number of logits."
		}
		return Solution{Choice: "none", Display: "none: l stays finite",
			Explain: fmt.Sprintf("In %s, l reaches at most %s, below the type's largest value %s.%s", d.Name(), gnum(top), gnum(largest[d]), why)}
	}
	k := r.FirstInf
	// The running l just before logit k's term, as the playground adds it.
	var tile playground.Tile
	prevL := 0.0
	for _, t := range r.Tiles {
		if k >= t.Start && k < t.End {
			tile = t
			break
		}
		prevL = t.L
	}
	before := d.Round(tile.Alpha * prevL)
	for i := tile.Start; i < k; i++ {
		before = d.Round(before + tile.P[i-tile.Start])
	}
	term := tile.P[k-tile.Start]
	var why string
	if r.FirstExpInf == k {
		why = fmt.Sprintf("logit %d is %s in %s, and its term %s is past %s's largest value, %s: it rounds to inf, and so does l.",
			k, gnum(r.Stored[k]), d.Name(), shifted, d.Name(), gnum(largest[d]))
	} else {
		why = fmt.Sprintf("l is %s before logit %d; its term %s = %s is finite, but the sum %s + %s passes %s's largest value, %s, and rounds to inf.",
			gnum(before), k, shifted, gnum(term), gnum(before), gnum(term), d.Name(), gnum(largest[d]))
	}
	nan := 0
	for _, w := range r.Weights {
		if math.IsNaN(w) {
			nan++
		}
	}
	return Solution{Choice: strconv.Itoa(k), Display: fmt.Sprintf("logit %d", k),
		Explain: fmt.Sprintf("In kv-tile %d, %s From then on l = inf, and every weight %s / l is 0, or inf/inf = NaN: NaN weights, %d of %d.",
			tile.Start/s.Tile, why, shifted, nan, len(r.Weights))}
}

func (c *Checkpoint) solveLoop() (Solution, error) {
	run := &c.Run
	q, r, d := c.Row/run.Br, c.Row%run.Br, run.D
	correct := loop.Run(run, c.BH, q, nil)
	slipped := loop.Run(run, c.BH, q, c.Slips)
	names := make([]string, len(c.Slips))
	for k, s := range c.Slips {
		names[k] = string(s)
	}
	slip := strings.Join(names, " + ")
	where := fmt.Sprintf("row %d (row %d of q-tile %d)", c.Row, r, q)
	f := func(x float32) string { return gnum(float64(x)) }

	if c.Ask == AskLoopL {
		k := -1
		for n, st := range slipped.Steps {
			if st.KV == c.KV {
				k = n
			}
		}
		if k < 0 {
			return Solution{}, fmt.Errorf("checkpoint %s: q-tile %d never reaches kv-tile %d: %w", c.ID, q, c.KV, errNotInTrace)
		}
		a, b := correct.Steps[k], slipped.Steps[k]
		seen := min(run.N, (c.KV+1)*run.Bc)
		l := float64(b.L[r])
		return Solution{Number: l, Display: shown(l, c.Allowed(l)), Lo: 0, Hi: float64(seen),
			Why: fmt.Sprintf("l adds exp(s − m) ≤ 1 for each key, and %d keys are seen by kv-tile %d, so 0 ≤ l ≤ %d", seen, c.KV, seen),
			Explain: fmt.Sprintf("After kv-tile %d, %s: the %s loop rescales from m_prev = %s, so α = exp(m_prev − m) = %s and l = α·l_old + Σp = %s. The correct loop rescales from m_old = %s: α = %s, l = %s.",
				c.KV, where, slip, f(b.MPrev[r]), f(b.Alpha[r]), f(b.L[r]), f(a.MPrev[r]), f(a.Alpha[r]), f(a.L[r]))}, nil
	}

	p := loop.Part(correct, slipped, r, d)
	switch {
	case p.KV >= 0:
		a, b := correct.Steps[p.KV], slipped.Steps[p.KV]
		var diff string
		switch p.What {
		case "m":
			diff = fmt.Sprintf("m is %s, against the correct %s", f(b.M[r]), f(a.M[r]))
		case "l":
			// Not the slipped l itself: a checkpoint may ask for it next.
			diff = fmt.Sprintf("l no longer matches the correct loop's: it rescaled with α = %s where the correct loop's α is %s", f(b.Alpha[r]), f(a.Alpha[r]))
		default:
			x := 0
			for x < d && a.O[r*d+x] == b.O[r*d+x] {
				x++
			}
			diff = fmt.Sprintf("m and l agree (%s, %s), but O[%d][%d] is %s against the correct %s", f(a.M[r]), f(a.L[r]), r, x, f(b.O[r*d+x]), f(a.O[r*d+x]))
		}
		before := "It is the first kv-tile, so nothing came before."
		switch p.KV {
		case 0:
		case 1:
			before = "After kv-tile 0 both loops hold the same m, l and O."
		default:
			before = fmt.Sprintf("After kv-tiles 0 to %d both loops hold the same m, l and O.", p.KV-1)
		}
		return Solution{Choice: strconv.Itoa(p.KV), Display: fmt.Sprintf("after kv-tile %d", p.KV),
			Explain: fmt.Sprintf("For %s with the slip %s: %s After kv-tile %d the slipped loop's %s.", where, slip, before, p.KV, diff)}, nil
	case p.Output:
		last := len(correct.Steps) - 1
		return Solution{Choice: "output", Display: "only in the output",
			Explain: fmt.Sprintf("For %s with the slip %s, m, l and O agree after every one of the %d kv-tiles (l = %s at the end); the output differs: O[%d][0] is written as %s against the correct O/l = %s.",
				where, slip, last+1, f(correct.Steps[last].L[r]), r, f(slipped.Out[r*d]), f(correct.Out[r*d]))}, nil
	}
	return Solution{Choice: "never", Display: "never",
		Explain: fmt.Sprintf("For %s the slip %s changes no number: m, l, O and the output agree everywhere.", where, slip)}, nil
}

// overflowHint is a wrong option's hint for the playground's row: how l is
// built in the row's type, never where it ends.
func (c *Checkpoint) overflowHint() string {
	s := c.Playground
	d := s.Dtype
	if s.SubtractMax {
		return fmt.Sprintf("Not that one. With the max subtracted every term exp(s − m) is at most 1, so l is at most the number of logits: compare that with %s's largest value, %s.", d.Name(), gnum(largest[d]))
	}
	return fmt.Sprintf("Not that one. Follow l as the playground builds it, tile by tile and logit by logit in order, rounding to %s after every operation: l becomes inf at the first term exp(s) past %s's largest value, %s, or at the first sum that passes it. Round each logit to %s first (the playground's row shows them stored).",
		d.Name(), d.Name(), gnum(largest[d]), d.Name())
}

// loopPartsHint is a wrong option's hint for the debugging lesson's loop:
// how to compare the two loops, never where they part.
func (c *Checkpoint) loopPartsHint(answer string) string {
	names := make([]string, len(c.Slips))
	for k, s := range c.Slips { // as the lesson names them: (b) stale-max
		names[k] = fmt.Sprintf("(%c) %s", 'a'+slices.Index(loop.Slips, s), s)
	}
	h := fmt.Sprintf("Not that one. Compare the two loops kv-tile by kv-tile in the loop widget, with slip %s ticked: after each kv-tile read row %d's m, α, l and O, the correct loop's beside the slipped one's (✗), and find the first kv-tile where any of them differs. Only if every kv-tile agrees, compare the output row after the loop.",
		strings.Join(names, " and "), c.Row)
	if answer == "never" {
		h += " A slip changes nothing only if every one of those numbers and the output agree."
	}
	return h
}
