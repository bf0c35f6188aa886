package lessons

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
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

// overflow asks at which logit the playground's l becomes inf, in the
// row's type: one of the logits, or none.
type overflow struct{}

func (overflow) ownInput() {}

func (overflow) parse(c *Checkpoint, d *directive) {
	d.allow(playground.Keys...)
	if c.Preset != "" {
		d.failf("ask=overflow works on its own row of logits=…, not on a preset")
	}
	if _, ok := d.attrs["logits"]; !ok {
		d.failf("needs logits=x,y,… (the row whose overflow it asks about)")
	}
	var err error
	if c.Playground, err = playground.ParseMap(d.attrs); err != nil {
		d.failf("%s", err.Error())
	}
	c.Format = grading.FormatChoice
	for k, x := range c.Playground.Logits {
		c.Choices = append(c.Choices, grading.Option{Value: strconv.Itoa(k), Label: fmt.Sprintf("logit %d (%s)", k, strconv.FormatFloat(x, 'g', -1, 64))})
	}
	c.Choices = append(c.Choices, grading.Option{Value: "none", Label: "none: l stays finite"})
}

func (overflow) source(c *Checkpoint) string {
	return "the playground's " + c.Playground.Dtype.Name() + " arithmetic, worked on the server"
}

func (overflow) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
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
		return grading.Solution{Choice: "none", Display: "none: l stays finite",
			Explain: fmt.Sprintf("In %s, l reaches at most %s, below the type's largest value %s.%s", d.Name(), gnum(top), gnum(largest[d]), why)}, nil
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
	return grading.Solution{Choice: strconv.Itoa(k), Display: fmt.Sprintf("logit %d", k),
		Explain: fmt.Sprintf("In kv-tile %d, %s From then on l = inf, and every weight %s / l is 0, or inf/inf = NaN: NaN weights, %d of %d.",
			tile.Start/s.Tile, why, shifted, nan, len(r.Weights))}, nil
}

// pose's hint says how l is built in the row's type, never where it ends.
func (overflow) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.choice(key, func(string) string {
		s := c.Playground
		d := s.Dtype
		if s.SubtractMax {
			return fmt.Sprintf("Not that one. With the max subtracted every term exp(s − m) is at most 1, so l is at most the number of logits: compare that with %s's largest value, %s.", d.Name(), gnum(largest[d]))
		}
		return fmt.Sprintf("Not that one. Follow l as the playground builds it, tile by tile and logit by logit in order, rounding to %s after every operation: l becomes inf at the first term exp(s) past %s's largest value, %s, or at the first sum that passes it. Round each logit to %s first (the playground's row shows them stored).",
			d.Name(), d.Name(), gnum(largest[d]), d.Name())
	})
}

// onTheLoop is the attributes of an ask about the debugging lesson's
// loop (bh, slip, row) and its source.
type onTheLoop struct{}

func (onTheLoop) parseLoop(c *Checkpoint, d *directive) {
	c.needFlashSteps(d)
	if c.Run.Variant != instrument.VariantFlash2 {
		d.failf("ask=%s runs the float32 loop of flash2; preset %q runs %s", c.Ask, c.Preset, c.Run.Variant)
	}
	c.readBH(d)
	var err error
	if c.Slips, err = loop.ParseSlips(d.text("slip")); err != nil || len(c.Slips) == 0 {
		d.failf("slip= must name one or more of p-overwrite, stale-max, no-divide (got %q)", d.attrs["slip"])
	}
	c.readRow(d)
	if err := loop.Validate(d.run, c.BH, c.Row/c.Run.Br); err != nil {
		d.failf("preset %q cannot run the loop: %v", c.Preset, err)
	}
}

func (onTheLoop) source(c *Checkpoint) string {
	return "the debugging lesson's loop, run on the server's CPU on the inputs of the run " + c.Preset
}

// loopRuns is c's row run through the correct loop and the slipped one.
type loopRuns struct {
	correct, slipped *loop.Trace
	q, r             int    // the row's q-tile, and the row within it
	slip             string // the slips, as the lesson names them
	where            string // the row, as an explanation names it
}

func (c *Checkpoint) loopRuns() loopRuns {
	run := &c.Run
	q, r := c.Row/run.Br, c.Row%run.Br
	names := make([]string, len(c.Slips))
	for k, s := range c.Slips {
		names[k] = string(s)
	}
	return loopRuns{correct: loop.Run(run, c.BH, q, nil), slipped: loop.Run(run, c.BH, q, c.Slips), q: q, r: r,
		slip: strings.Join(names, " + "), where: fmt.Sprintf("row %d (row %d of q-tile %d)", c.Row, r, q)}
}

func f32(x float32) string { return gnum(float64(x)) }

// loopParts asks where the slipped loop first differs from the correct
// one: after one of the kv-tiles, only in the output, or never.
type loopParts struct{ onTheLoop }

func (l loopParts) parse(c *Checkpoint, d *directive) {
	l.parseLoop(c, d)
	c.Format = grading.FormatChoice
	for j := 0; j < c.Run.Tc(); j++ {
		c.Choices = append(c.Choices, grading.Option{Value: strconv.Itoa(j), Label: fmt.Sprintf("after kv-tile %d", j)})
	}
	c.Choices = append(c.Choices, grading.Option{Value: "output", Label: "only in the output, after the loop"}, grading.Option{Value: "never", Label: "never: the slip changes nothing here"})
}

func (loopParts) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	lr := c.loopRuns()
	correct, slipped, r, d := lr.correct, lr.slipped, lr.r, c.Run.D
	p := loop.Part(correct, slipped, r, d)
	switch {
	case p.KV >= 0:
		a, b := correct.Steps[p.KV], slipped.Steps[p.KV]
		var diff string
		switch p.What {
		case "m":
			diff = fmt.Sprintf("m is %s, against the correct %s", f32(b.M[r]), f32(a.M[r]))
		case "l":
			// Not the slipped l itself: a checkpoint may ask for it next.
			diff = fmt.Sprintf("l no longer matches the correct loop's: it rescaled with α = %s where the correct loop's α is %s", f32(b.Alpha[r]), f32(a.Alpha[r]))
		default:
			x := 0
			for x < d && a.O[r*d+x] == b.O[r*d+x] {
				x++
			}
			diff = fmt.Sprintf("m and l agree (%s, %s), but O[%d][%d] is %s against the correct %s", f32(a.M[r]), f32(a.L[r]), r, x, f32(b.O[r*d+x]), f32(a.O[r*d+x]))
		}
		before := "It is the first kv-tile, so nothing came before."
		switch p.KV {
		case 0:
		case 1:
			before = "After kv-tile 0 both loops hold the same m, l and O."
		default:
			before = fmt.Sprintf("After kv-tiles 0 to %d both loops hold the same m, l and O.", p.KV-1)
		}
		return grading.Solution{Choice: strconv.Itoa(p.KV), Display: fmt.Sprintf("after kv-tile %d", p.KV),
			Explain: fmt.Sprintf("For %s with the slip %s: %s After kv-tile %d the slipped loop's %s.", lr.where, lr.slip, before, p.KV, diff)}, nil
	case p.Output:
		last := len(correct.Steps) - 1
		return grading.Solution{Choice: "output", Display: "only in the output",
			Explain: fmt.Sprintf("For %s with the slip %s, m, l and O agree after every one of the %d kv-tiles (l = %s at the end); the output differs: O[%d][0] is written as %s against the correct O/l = %s.",
				lr.where, lr.slip, last+1, f32(correct.Steps[last].L[r]), r, f32(slipped.Out[r*d]), f32(correct.Out[r*d]))}, nil
	}
	return grading.Solution{Choice: "never", Display: "never",
		Explain: fmt.Sprintf("For %s the slip %s changes no number: m, l, O and the output agree everywhere.", lr.where, lr.slip)}, nil
}

// pose's hint says how to compare the two loops, never where they part.
func (loopParts) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.choice(key, func(picked string) string {
		names := make([]string, len(c.Slips))
		for k, s := range c.Slips { // as the lesson names them: (b) stale-max
			names[k] = fmt.Sprintf("(%c) %s", 'a'+slices.Index(loop.Slips, s), s)
		}
		h := fmt.Sprintf("Not that one. Work out what the slipped line changes, then check it in the loop widget, with slip %s ticked: its slipped numbers (✗) show once you press Run the slipped loop. After each kv-tile compare row %d's m, α, l and O, the correct loop's over the slipped one's, and find the first kv-tile where any of them differs. Only if every kv-tile agrees, compare the output row after the loop.",
			strings.Join(names, " and "), c.Row)
		if picked == "never" {
			h += " A slip changes nothing only if every one of those numbers and the output agree."
		}
		return h
	})
}

// loopL asks for the slipped loop's l of a row after a kv-tile. Its
// tolerance is grading.SmallValue, as α's: the slipped l can fall as low
// as α does.
type loopL struct{ onTheLoop }

func (l loopL) parse(c *Checkpoint, d *directive) {
	l.parseLoop(c, d)
	c.readKV(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
}

func (loopL) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	lr := c.loopRuns()
	run, r := &c.Run, lr.r
	k := -1
	for n, st := range lr.slipped.Steps {
		if st.KV == c.KV {
			k = n
		}
	}
	if k < 0 {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: q-tile %d never reaches kv-tile %d: %w", c.ID, lr.q, c.KV, errNotInTrace)
	}
	a, b := lr.correct.Steps[k], lr.slipped.Steps[k]
	seen := min(run.N, (c.KV+1)*run.Bc)
	l := float64(b.L[r])
	return grading.Solution{Number: l, Display: c.shown(l), Lo: 0, Hi: float64(seen),
		Why: fmt.Sprintf("l adds exp(s − m) ≤ 1 for each key, and %d keys are seen by kv-tile %d, so 0 ≤ l ≤ %d", seen, c.KV, seen),
		Explain: fmt.Sprintf("After kv-tile %d, %s: the %s loop rescales from m_prev = %s, so α = exp(m_prev − m) = %s and l = α·l_old + Σp = %s. The correct loop rescales from m_old = %s: α = %s, l = %s.",
			c.KV, lr.where, lr.slip, f32(b.MPrev[r]), f32(b.Alpha[r]), f32(b.L[r]), f32(a.MPrev[r]), f32(a.Alpha[r]), f32(a.L[r]))}, nil
}

func (loopL) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.SmallValue(c.Tol), grading.Plain, func(float64) string {
		return fmt.Sprintf("Not quite. The slipped loop still computes l = α·l_old + Σp after each kv-tile, but with the α its slip gives: find the max it rescales from and the α that gives (the loop widget shows row %d's m, α and l after every kv-tile for the correct loop; the slipped loop's m and α under them show once you have said where the loops part or pressed Run the slipped loop, and its l waits for this answer), then add the row's probabilities exp(s − m) over kv-tile %d's keys, which the correct loop's l and α tell: its l after kv-tile %d is α·l_old + Σp.", c.Row, c.KV, c.KV)
	})
}
