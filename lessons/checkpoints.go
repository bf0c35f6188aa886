package lessons

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons/loop"
	"flashstep/lessons/playground"
)

// A checkpoint asks the student to predict a number or pick an answer that
// the kernel's trace of a run decides. Its question is the directive's
// Markdown; what it asks is one of the asks below, parametrised by the
// directive's attributes. The answer is never written in a lesson: Solve
// reads it from the trace the server obtained for the run, through the same
// engines that stream the run to the embedded stepper.
//
//	::: checkpoint id=m-row-3 preset=toy ask=m row=3 kv=1 widget=toy-walk
//	What is the running max m of row 3 after kv-tile 1?
//	:::
const (
	AskM        = "m"          // running max of a row after a kv-tile
	AskL        = "l"          // running sum of a row after a kv-tile
	AskAlpha    = "alpha"      // the rescale factor exp(m_old − m_new) at a kv-tile
	AskWeight   = "weight"     // the final attention weight of a row on a key
	AskP        = "p"          // a row's probability p = exp(s − m_new) on a key, at that key's kv-tile
	AskArgmax   = "argmax"     // the key a row attends to most (choice)
	AskLastRise = "last-raise" // the last kv-tile that raised a row's m (choice)
	AskSkipped  = "skipped"    // the tiles a run never visits (tiles)
	AskCount    = "count"      // how many records of a kind one batch-head has
	AskSM       = "sm"         // the SM that ran a block (timing runs)
	AskWritten  = "written"    // bytes written to device memory by a kind of step

	// Asks answered by arithmetic the server does itself, not by a trace.
	AskOverflow  = "overflow"   // the logit at which the playground's l becomes inf (choice)
	AskLoopParts = "loop-parts" // where the debugging lesson's slipped loop first differs from the correct one (choice)
	AskLoopL     = "loop-l"     // the slipped loop's l for a row after a kv-tile

	// Asks answered from the kernel ladder's recorded figures (ladder.Build
	// of the recordings) and the floors' arithmetic (roofline.go).
	AskLadderSpeedup = "ladder-speedup" // how many times faster one row of the ladder is than another on a shape
	AskLadderFloor   = "ladder-floor"   // what percentage of a floor (compute or memory) a row reaches on a shape
)

// Answer formats.
const (
	FormatNumber = "number"
	FormatChoice = "choice"
	FormatTiles  = "tiles" // several tiles, picked on a grid
)

// Checkpoint is one predict-then-reveal question.
type Checkpoint struct {
	ID       string
	Lesson   string
	Ask      string
	Format   string
	Question string // HTML
	Widget   string // the id of the widget on the page it is about, if any
	Preset   string
	Run      kernels.Config

	BH, Row, KV, Q, Key int
	Kind                string // count, written: the record kind
	Tol                 float64
	Hint                string // the lesson's own hint, added to every wrong answer's
	// Revisit is the lesson to go back to when this is missed (the
	// course's closing check names one for each question).
	Revisit string

	Playground playground.Settings // overflow: the row
	Slips      []loop.Slip         // loop-parts, loop-l: the loop's slips
	Ladder     LadderQuestion      // ladder-speedup, ladder-floor: the row, shape and floor

	Choices []Choice // choice: the options; tiles: every tile of the grid, row by row
}

// Choice is one option of a multiple-choice or tiles checkpoint.
type Choice struct{ Value, Label string }

// The tolerances: what a numeric answer must come within of the kernel's
// value, decided per ask by what the quantity is.
//
//   - count, sm: whole numbers, exactly.
//   - m: ±Tol (0.01 unless the directive says tol=), whatever its size. m is
//     a score, a logit: softmax does not change when every score moves by
//     the same amount, and an error δ in m scales every weight by e^δ, so
//     an error in m counts the same at 0.3 as at 300. The large-logit runs
//     keep it reachable: float32's spacing at 300 is 3e-5, and the rows
//     table shows m to six significant digits.
//   - l: ±Tol. The kernel's l is at least 1 (the row's largest score adds
//     exactly 1), so ±0.01 is never more than 1% of it.
//   - alpha, p, weight, loop-l: within RelTol (2%) of the value and never
//     more than ±Tol from it, the smaller of the two. These live in [0, 1]
//     (the slipped loop's l can fall as low, and lower), where a tiny value
//     is still a value: α = 1.6e-37 says the max jumped by 85, and 0, 1e-36
//     or 0.009 say something else. 2% is an error of 0.02 in the exponent
//     of exp(s − m), the same order as m's ±0.01; above 0.5 it is capped at
//     ±Tol. A value that is exactly 0 in float32 (α past a jump of about
//     104, the weight of a masked key) takes any answer that rounds to 0 in
//     float32, e.g. the true e^−110.
//   - written: within Tol (1%) of the bytes; ladder-speedup and
//     ladder-floor: within Tol (2%) of the answer, a ratio or a percentage.
const RelTol = 0.02

// tolRule is how a numeric ask reads its tolerance.
type tolRule int

const (
	tolNone  tolRule = iota // not a number: choices, tiles
	tolExact                // a whole number, exactly
	tolAbs                  // ±Tol
	tolRel                  // Tol × |answer|
	tolSmall                // min(Tol, RelTol × |answer|)
)

func (c *Checkpoint) rule() tolRule {
	if c.Format != FormatNumber {
		return tolNone
	}
	switch c.Ask {
	case AskCount, AskSM:
		return tolExact
	case AskM, AskL:
		return tolAbs
	case AskAlpha, AskP, AskWeight, AskLoopL:
		return tolSmall
	case AskWritten, AskLadderSpeedup, AskLadderFloor:
		return tolRel
	}
	return tolAbs
}

// float32Zero is the largest number that rounds to 0 in float32 (ties go to
// the even 0): half the smallest subnormal, 2^−150.
const float32Zero = math.SmallestNonzeroFloat32 / 2

// Allowed is how far from the kernel's value truth an answer may lie and
// be graded right, by c's rule: 0 for whole numbers and for the options
// of a choice.
func (c *Checkpoint) Allowed(truth float64) float64 {
	switch c.rule() {
	case tolAbs:
		return c.Tol
	case tolRel:
		return c.Tol * math.Abs(truth)
	case tolSmall:
		if truth == 0 {
			return float32Zero
		}
		return min(c.Tol, RelTol*math.Abs(truth))
	}
	return 0
}

// Unit says, for a numeric checkpoint, the rule its answer is held to.
func (c *Checkpoint) Unit() string {
	pct := func(f float64) string { return strconv.FormatFloat(f*100, 'g', -1, 64) + "%" }
	tol := strconv.FormatFloat(c.Tol, 'g', -1, 64)
	switch c.rule() {
	case tolExact:
		return "a whole number, exactly"
	case tolAbs:
		return "within ±" + tol
	case tolSmall:
		return fmt.Sprintf("within %s of the kernel's value and at most ±%s from it (write a tiny value with its exponent, as 3.2e-9)", pct(RelTol), tol)
	case tolRel:
		switch c.Ask {
		case AskWritten:
			return "in bytes, within " + pct(c.Tol)
		case AskLadderFloor:
			return fmt.Sprintf("in percent, within %s of the answer (%s of its value, not %s percentage points)", pct(c.Tol), pct(c.Tol), strconv.FormatFloat(c.Tol*100, 'g', -1, 64))
		}
		return "within " + pct(c.Tol) + " of the answer"
	}
	return ""
}

func (c *Checkpoint) integer() bool { return c.Ask == AskCount || c.Ask == AskSM }

// RelativeTol says whether c's tolerance is a fraction of the answer rather
// than an absolute distance from it.
func (c *Checkpoint) RelativeTol() bool { return c.rule() == tolRel }

// shown writes x, an answer graded within tol of it, to the precision tol
// needs: the last digit shown is at most tol/4 from x, so the revealed
// answer, typed back, is right with room to spare, and two answers the
// grading tells apart never look the same. At least three significant
// digits; a value below 10⁻³ that needs more decimals than five is written
// with its exponent and five significant digits, as the stepper's rows
// table writes it (1.6475e-37, not 0.000).
func shown(x, tol float64) string {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return gnum(x)
	}
	// Decimals whose half unit is at most tol/4.
	dec := 0
	if tol > 0 {
		dec = max(0, int(math.Ceil(math.Log10(2/tol))))
	}
	mag := int(math.Floor(math.Log10(math.Abs(x))))
	if math.Abs(x) < 1e-3 && dec > 5 {
		sig := max(5, dec+mag+1)
		return strconv.FormatFloat(x, 'e', min(sig, 17)-1, 64)
	}
	dec = max(dec, 2-mag) // three significant digits
	return strconv.FormatFloat(x, 'f', min(dec, 17), 64)
}

// TileGrid is the tiles checkpoint's grid: Tr rows of Tc tiles.
func (c *Checkpoint) TileGrid() (rows, cols int) { return c.Run.Tr(), c.Run.Tc() }

func newCheckpoint(l *Lesson, attrs map[string]string, question string) (*Checkpoint, error) {
	c := &Checkpoint{ID: attrs["id"], Lesson: l.Slug, Ask: attrs["ask"], Question: question, Widget: attrs["widget"],
		Preset: attrs["preset"], Hint: attrs["hint"], Revisit: attrs["revisit"]}
	if !validID(c.ID) {
		return nil, fmt.Errorf("needs id=NAME (lower-case letters, digits, hyphens), got %q", c.ID)
	}
	if strings.TrimSpace(question) == "" {
		return nil, fmt.Errorf("%s: the question goes between the ::: lines", c.ID)
	}
	var err error
	if c.Ask != AskOverflow && !c.ladderAsk() {
		if c.Run, err = presetRun(c.Preset); err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
	}
	run := &c.Run
	known := []string{"id", "ask", "widget", "preset", "hint", "revisit"}
	var errs []string
	intAttr := func(key string, def, lo, hi int) int {
		known = append(known, key)
		s, ok := attrs[key]
		if !ok {
			if def < 0 {
				errs = append(errs, fmt.Sprintf("needs %s= (from %d to %d)", key, lo, hi))
			}
			return def
		}
		v, perr := strconv.Atoi(s)
		if perr != nil || v < lo || v > hi {
			errs = append(errs, fmt.Sprintf("%s must be a whole number from %d to %d, got %q", key, lo, hi, s))
		}
		return v
	}
	tolAttr := func(def float64) {
		known = append(known, "tol")
		c.Tol = def
		if s, ok := attrs["tol"]; ok {
			v, perr := strconv.ParseFloat(s, 64)
			if perr != nil || !(v > 0 && v < 1) {
				errs = append(errs, fmt.Sprintf("tol must be a number between 0 and 1, got %q", s))
			}
			c.Tol = v
		}
	}
	fullRun := func() {
		if run.Timing {
			errs = append(errs, fmt.Sprintf("ask=%s needs a full trace, not preset %q's timing run", c.Ask, c.Preset))
		}
	}
	flashRun := func() {
		fullRun()
		if !flashVariant(run.Variant) {
			errs = append(errs, fmt.Sprintf("ask=%s reads FlashAttention steps; preset %q runs %s", c.Ask, c.Preset, run.Variant))
		}
	}
	bh := func() { c.BH = intAttr("bh", 0, run.TracedBH().Lo, run.TracedBH().Hi-1) }
	switch c.Ask {
	case AskM, AskL, AskAlpha:
		flashRun()
		bh()
		c.Row = intAttr("row", -1, 0, run.N-1)
		c.KV = intAttr("kv", -1, 0, run.Tc()-1)
		c.Format = FormatNumber
		tolAttr(0.01)
	case AskWeight, AskP:
		flashRun()
		bh()
		c.Row = intAttr("row", -1, 0, run.N-1)
		c.Key = intAttr("key", -1, 0, run.N-1)
		c.Format = FormatNumber
		tolAttr(0.01)
	case AskArgmax:
		flashRun()
		bh()
		c.Row = intAttr("row", -1, 0, run.N-1)
		c.Format = FormatChoice
		for k := 0; k < run.N; k++ {
			c.Choices = append(c.Choices, Choice{strconv.Itoa(k), fmt.Sprintf("key %d", k)})
		}
	case AskLastRise:
		flashRun()
		bh()
		c.Row = intAttr("row", -1, 0, run.N-1)
		c.Format = FormatChoice
		for j := 0; j < run.Tc(); j++ {
			c.Choices = append(c.Choices, Choice{strconv.Itoa(j), fmt.Sprintf("kv-tile %d", j)})
		}
	case AskSkipped:
		bh()
		c.Format = FormatTiles
		for i := 0; i < run.Tr(); i++ {
			for j := 0; j < run.Tc(); j++ {
				c.Choices = append(c.Choices, Choice{fmt.Sprintf("%d,%d", i, j), fmt.Sprintf("tile (%d, %d)", i, j)})
			}
		}
	case AskCount, AskWritten:
		fullRun()
		known = append(known, "kind")
		c.Kind = attrs["kind"]
		k, ok := kindByName(c.Kind)
		if !ok || k == instrument.KindInputs || k == instrument.KindTiming {
			errs = append(errs, fmt.Sprintf("kind must name a step's record kind (flash_step, scores, softmax, pv, epilogue), got %q", c.Kind))
		}
		c.Format = FormatNumber
		if c.Ask == AskCount {
			bh()
		} else {
			tolAttr(0.01)
		}
	case AskSM:
		if !run.Timing {
			errs = append(errs, fmt.Sprintf("ask=sm needs a timing run (mode=timing); preset %q is not one", c.Preset))
		}
		c.BH = intAttr("bh", 0, 0, run.Batch*run.Heads-1)
		c.Q = intAttr("q", -1, 0, run.Tr()-1)
		c.Format = FormatNumber
	case AskOverflow:
		known = append(known, playground.Keys...)
		if c.Preset != "" {
			errs = append(errs, "ask=overflow works on its own row of logits=…, not on a preset")
		}
		if _, ok := attrs["logits"]; !ok {
			errs = append(errs, "needs logits=x,y,… (the row whose overflow it asks about)")
		}
		var perr error
		if c.Playground, perr = playground.ParseMap(attrs); perr != nil {
			errs = append(errs, perr.Error())
		}
		c.Format = FormatChoice
		for k, x := range c.Playground.Logits {
			c.Choices = append(c.Choices, Choice{strconv.Itoa(k), fmt.Sprintf("logit %d (%s)", k, strconv.FormatFloat(x, 'g', -1, 64))})
		}
		c.Choices = append(c.Choices, Choice{"none", "none: l stays finite"})
	case AskLoopParts, AskLoopL:
		flashRun()
		if run.Variant != instrument.VariantFlash2 {
			errs = append(errs, fmt.Sprintf("ask=%s runs the float32 loop of flash2; preset %q runs %s", c.Ask, c.Preset, run.Variant))
		}
		bh()
		known = append(known, "slip")
		var perr error
		if c.Slips, perr = loop.ParseSlips(attrs["slip"]); perr != nil || len(c.Slips) == 0 {
			errs = append(errs, fmt.Sprintf("slip= must name one or more of p-overwrite, stale-max, no-divide (got %q)", attrs["slip"]))
		}
		c.Row = intAttr("row", -1, 0, run.N-1)
		if verr := loop.Validate(run, c.BH, c.Row/run.Br); verr != nil {
			errs = append(errs, fmt.Sprintf("preset %q cannot run the loop: %v", c.Preset, verr))
		}
		if c.Ask == AskLoopL {
			c.KV = intAttr("kv", -1, 0, run.Tc()-1)
			c.Format = FormatNumber
			tolAttr(0.01)
		} else {
			c.Format = FormatChoice
			for j := 0; j < run.Tc(); j++ {
				c.Choices = append(c.Choices, Choice{strconv.Itoa(j), fmt.Sprintf("after kv-tile %d", j)})
			}
			c.Choices = append(c.Choices, Choice{"output", "only in the output, after the loop"}, Choice{"never", "never: the slip changes nothing here"})
		}
	case AskLadderSpeedup, AskLadderFloor:
		if c.Preset != "" {
			errs = append(errs, fmt.Sprintf("ask=%s reads the ladder's recorded figures, not a preset's run", c.Ask))
		}
		lknown, lerrs := c.parseLadder(attrs)
		known = append(known, lknown...)
		errs = append(errs, lerrs...)
		c.Format = FormatNumber
		tolAttr(0.02)
	default:
		errs = append(errs, fmt.Sprintf("unknown ask %q: one of m, l, alpha, p, weight, argmax, last-raise, skipped, count, sm, written, overflow, loop-parts, loop-l, ladder-speedup, ladder-floor", c.Ask))
	}
	if c.Format != "" && flashVariant(run.Variant) && (c.Ask == AskM || c.Ask == AskL || c.Ask == AskAlpha || c.Ask == AskArgmax || c.Ask == AskLastRise || c.Ask == AskWeight || c.Ask == AskP) {
		if !run.TracedQ().Contains(c.Row / run.Br) {
			errs = append(errs, fmt.Sprintf("row %d is in q-tile %d, which preset %q does not trace", c.Row, c.Row/run.Br, c.Preset))
		}
	}
	for key := range attrs {
		if !slices.Contains(known, key) {
			errs = append(errs, fmt.Sprintf("unknown attribute %q for ask=%s (%s)", key, c.Ask, strings.Join(known, ", ")))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s: %s", c.ID, strings.Join(errs, "; "))
	}
	return c, nil
}

// flashVariant says whether v's trace holds FlashAttention's flash steps
// (m, α, l, S, P and O at every kv-tile): the float32 flash2 and the
// tensor-core flash2_fast.
func flashVariant(v instrument.Variant) bool {
	return v == instrument.VariantFlash2 || v == instrument.VariantFlash2Fast
}

func kindByName(name string) (instrument.Kind, bool) {
	for _, k := range instrument.Kinds {
		if k.Name == name {
			return k.Kind, true
		}
	}
	return 0, false
}

// Solution is a checkpoint's answer as its trace decides it.
type Solution struct {
	Number  float64
	Choice  string   // choice: the option's value
	Tiles   []string // tiles: sorted "i,j"
	Display string   // the answer as the page shows it
	Step    int      // the step of the trace that shows the answer, from 1 as pages count; 0 if none
	Explain string   // why, with the trace's numbers
	// Plausible bounds a numeric answer, for hints on absurd answers.
	Lo, Hi float64
	Why    string // why an answer outside Lo..Hi cannot be right
}

// Trace is a decoded trace: its header and the steps (every record but the
// inputs) in order, numbered as the stepper numbers them.
type Trace struct {
	H     *instrument.Header
	Steps []*instrument.Record
}

// NewTrace keeps the steps of a decoded trace.
func NewTrace(h *instrument.Header, recs []*instrument.Record) *Trace {
	t := &Trace{H: h}
	for _, r := range recs {
		if r.Kind != instrument.KindInputs {
			t.Steps = append(t.Steps, r)
		}
	}
	return t
}

// find is the first step of kind k at (bh, i, j); j < -1 matches any.
func (t *Trace) find(k instrument.Kind, bh, i, j int) (int, *instrument.Record) {
	for n, r := range t.Steps {
		if r.Kind == k && r.BH == bh && r.I == i && (j < -1 || r.J == j) {
			return n, r
		}
	}
	return -1, nil
}

var errNotInTrace = errors.New("not in the trace")

func f3(v float32) string { return strconv.FormatFloat(float64(v), 'f', 3, 32) }

// NeedsTrace says whether Solve reads the trace of c's run; the other asks
// are answered by arithmetic done here (the playground's, the debugging
// lesson's loop) or from the ladder's recorded figures, and Solve takes a
// nil trace.
func (c *Checkpoint) NeedsTrace() bool {
	return c.Ask != AskOverflow && c.Ask != AskLoopParts && c.Ask != AskLoopL && !c.ladderAsk()
}

// Source says where the numbers of an answer that needs no trace come from.
func (c *Checkpoint) Source() string {
	switch c.Ask {
	case AskOverflow:
		return "the playground's " + c.Playground.Dtype.Name() + " arithmetic, worked on the server"
	case AskLoopParts, AskLoopL:
		return "the debugging lesson's loop, run on the server's CPU on the inputs of the run " + c.Preset
	case AskLadderSpeedup, AskLadderFloor:
		return ladderSource()
	}
	return ""
}

// Solve reads c's answer from the trace of its run, or works it out for
// the asks that need none (t may then be nil).
func (c *Checkpoint) Solve(t *Trace) (Solution, error) {
	if !c.NeedsTrace() {
		return c.solveComputed()
	}
	h := t.H
	if h.N != c.Run.N || h.Br != c.Run.Br || h.Bc != c.Run.Bc || h.Variant != c.Run.Variant || h.Causal != c.Run.Causal {
		return Solution{}, fmt.Errorf("checkpoint %s: the trace is of another run", c.ID)
	}
	i, row := c.Row/h.Br, c.Row%h.Br
	switch c.Ask {
	case AskM, AskL, AskAlpha:
		k, r := t.find(instrument.KindFlashStep, c.BH, i, c.KV)
		if r == nil {
			return Solution{}, fmt.Errorf("checkpoint %s: q-tile %d × kv-tile %d of batch-head %d: %w (a causal run skips tiles above the diagonal)", c.ID, i, c.KV, c.BH, errNotInTrace)
		}
		where := fmt.Sprintf("step %d (q-tile %d × kv-tile %d), row %d is row %d of the q-tile", k+1, i, c.KV, c.Row, row)
		rowMax := float32(math.Inf(-1))
		for col := 0; col < r.ColsValid; col++ {
			rowMax = max(rowMax, r.S[row*h.Bc+col])
		}
		s := Solution{Step: k + 1}
		switch c.Ask {
		case AskM:
			s.Number = float64(r.MNew[row])
			s.Explain = fmt.Sprintf("At %s. Before this tile m_old = %s; the largest score of the row in this tile is %s; so m_new = max(%s, %s) = %s.",
				where, f3(r.MOld[row]), f3(rowMax), f3(r.MOld[row]), f3(rowMax), f3(r.MNew[row]))
			// The bound is the first power of ten at least twice every
			// score of the run: an answer past it is absurd, and the
			// bound, which a student may find by trying answers, says only
			// the scores' order of magnitude, which the S panel shows
			// anyway, and is never near the m it bounds.
			largest := 0.0
			for _, st := range t.Steps {
				for _, v := range st.S {
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
		case AskL:
			s.Number = float64(r.L[row])
			var sumP float32
			for col := 0; col < r.ColsValid; col++ {
				sumP += r.P[row*h.Bc+col]
			}
			s.Explain = fmt.Sprintf("At %s. α = exp(m_old − m_new) = %s rescales the old sum, and this tile's probabilities exp(S − m_new) add %s: l = α·l_old + Σp = %s.",
				where, f3(r.Alpha[row]), f3(sumP), f3(r.L[row]))
			seen := min(h.N, (c.KV+1)*h.Bc)
			s.Lo, s.Hi, s.Why = 1, float64(seen), fmt.Sprintf("l adds exp(s − m) ≤ 1 for each of the %d columns seen so far, and exactly 1 for the largest, so 1 ≤ l ≤ %d", seen, seen)
		case AskAlpha:
			s.Number = float64(r.Alpha[row])
			s.Explain = fmt.Sprintf("At %s. m_old = %s and m_new = %s, so α = exp(m_old − m_new) = exp(%s) = %s.",
				where, f3(r.MOld[row]), f3(r.MNew[row]), f3(r.MOld[row]-r.MNew[row]), shown(s.Number, c.Allowed(s.Number)))
			if c.KV == 0 {
				s.Explain += " At the first kv-tile m_old is −∞ and there is nothing yet to rescale."
			}
			s.Lo, s.Hi, s.Why = 0, 1, "m never decreases, so α = exp(m_old − m_new) is between 0 and 1"
		}
		s.Display = shown(s.Number, c.Allowed(s.Number))
		return s, nil

	case AskP:
		j, col := c.Key/h.Bc, c.Key%h.Bc
		k, r := t.find(instrument.KindFlashStep, c.BH, i, j)
		if r == nil {
			return Solution{}, fmt.Errorf("checkpoint %s: q-tile %d × kv-tile %d of batch-head %d: %w (a causal run skips tiles above the diagonal)", c.ID, i, j, c.BH, errNotInTrace)
		}
		sv, m, p := r.S[row*h.Bc+col], r.MNew[row], r.P[row*h.Bc+col]
		show := shown(float64(p), c.Allowed(float64(p)))
		s := Solution{Number: float64(p), Display: show, Step: k + 1, Lo: 0, Hi: 1.001,
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

	case AskWeight, AskArgmax:
		// The row's scores, gathered from every kv-tile step of its q-tile.
		scores := make([]float32, h.N)
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
		ek, epi := t.find(instrument.KindEpilogue, c.BH, i, -2)
		if epi == nil {
			return Solution{}, fmt.Errorf("checkpoint %s: no epilogue of q-tile %d: %w", c.ID, i, errNotInTrace)
		}
		if c.Ask == AskArgmax {
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
			return Solution{Choice: strconv.Itoa(best), Display: fmt.Sprintf("key %d", best), Step: ek + 1,
				Explain: fmt.Sprintf("Row %d's largest score is %s, on key %d (the next largest is %s), so softmax gives key %d the largest weight, exp(%s − LSE) = %s.",
					c.Row, f3(scores[best]), best, f3(runnerUp), best, f3(scores[best]), f3(float32(math.Exp(float64(scores[best]-epi.LSE[row])))))}, nil
		}
		w := math.Exp(float64(scores[c.Key] - epi.LSE[row]))
		show := shown(w, c.Allowed(w))
		return Solution{Number: w, Display: show, Step: ek + 1, Lo: 0, Hi: 1, Why: "a softmax weight is between 0 and 1, and a row's weights add up to 1",
			Explain: fmt.Sprintf("Row %d's score on key %d is %s. Softmax divides exp of it by the sum of exp over the row's %d scores; the log of that sum is %s, which the kernel writes when the row is finished (step %d; lesson 5 calls it the log-sum-exp). The weight is exp(%s − %s) = %s.",
				c.Row, c.Key, f3(scores[c.Key]), h.N, f3(epi.LSE[row]), ek+1, f3(scores[c.Key]), f3(epi.LSE[row]), show)}, nil

	case AskLastRise:
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
			return Solution{}, fmt.Errorf("checkpoint %s: row %d: %w", c.ID, c.Row, errNotInTrace)
		}
		return Solution{Choice: strconv.Itoa(last), Display: fmt.Sprintf("kv-tile %d", last), Step: lastK + 1,
			Explain: fmt.Sprintf("Row %d's m at each kv-tile (m_old → m_new): %s. The last rise is at kv-tile %d (step %d); after it α = 1 and nothing is rescaled.",
				c.Row, strings.Join(trail, "; "), last, lastK+1)}, nil

	case AskSkipped:
		visited := map[string]bool{}
		finished := map[int]bool{}
		for _, r := range t.Steps {
			if r.BH != c.BH {
				continue
			}
			switch r.Kind {
			case instrument.KindFlashStep, instrument.KindScores, instrument.KindPV:
				visited[fmt.Sprintf("%d,%d", r.I, r.J)] = true
			case instrument.KindEpilogue:
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
		return Solution{Tiles: skipped, Display: display,
			Explain: fmt.Sprintf("The trace holds a step for %d of the %d tiles of batch-head %d. The tiles without one, (q-tile, kv-tile) = %s, are the ones the kernel never loaded.",
				len(visited), h.Tr()*h.Tc(), c.BH, display)}, nil

	case AskCount:
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
		// without a mask it is the answer itself, which a student could
		// find by trying answers until one is refused.
		return Solution{Number: float64(n), Display: strconv.Itoa(n), Step: first + 1, Lo: 0, Hi: math.Inf(1),
			Why: "a count of records is not negative",
			Explain: fmt.Sprintf("Batch-head %d's trace holds %d %s records, out of %d steps of the whole trace (%d q-tiles × %d kv-tiles = %d tiles).",
				c.BH, n, c.Kind, len(t.Steps), h.Tr(), h.Tc(), h.Tr()*h.Tc())}, nil

	case AskWritten:
		kind, _ := kindByName(c.Kind)
		var sum uint64
		n := 0
		for _, r := range t.Steps {
			if r.Kind == kind {
				sum += r.BytesWritten
				n++
			}
		}
		return Solution{Number: float64(sum), Display: fmt.Sprintf("%d bytes", sum), Lo: 0, Hi: math.Inf(1),
			Why:     "a count of bytes is not negative",
			Explain: fmt.Sprintf("The %d %s steps of the trace wrote %d bytes to device memory in all (each record counts what its step wrote).", n, c.Kind, sum)}, nil

	case AskSM:
		for k, r := range t.Steps {
			if r.Kind == instrument.KindTiming && r.BH == c.BH && r.I == c.Q {
				hi := float64(max(h.NumSMs, 1) - 1)
				return Solution{Number: float64(r.SM), Display: fmt.Sprintf("SM %d", r.SM), Step: k + 1, Lo: 0, Hi: hi,
					Why: fmt.Sprintf("%s has %d SMs, numbered from 0", strings.TrimSpace(h.Label), h.NumSMs),
					Explain: fmt.Sprintf("The timing trace stamps block (batch-head %d, q-tile %d) on SM %d: its first step is step %d of %d, starting %.1f µs after the grid's first step. A block never moves: all its kv-tiles run on that SM.",
						c.BH, c.Q, r.SM, k+1, len(t.Steps), float64(r.TStart-t.firstStart())/1000)}, nil
			}
		}
		return Solution{}, fmt.Errorf("checkpoint %s: block (%d, %d): %w", c.ID, c.BH, c.Q, errNotInTrace)
	}
	return Solution{}, fmt.Errorf("checkpoint %s: unknown ask %q", c.ID, c.Ask)
}

func (t *Trace) firstStart() uint64 {
	first := uint64(math.MaxUint64)
	for _, r := range t.Steps {
		first = min(first, r.TStart)
	}
	return first
}

// Verdict is the grading of one answer.
type Verdict struct {
	Status      string `json:"status"` // correct, wrong, invalid (not an answer at all), revealed
	Correct     bool   `json:"correct"`
	Hint        string `json:"hint,omitempty"`
	Explanation string `json:"explanation,omitempty"` // only once correct or revealed
	Answer      string `json:"answer,omitempty"`      // likewise
	Step        int    `json:"step,omitempty"`        // the widget's step that shows it, from 1; 0 none
	Widget      string `json:"widget,omitempty"`
}

// Grade judges an answer against the solution. An answer that is empty,
// not a number or out of every plausible range is "invalid" with a hint
// that says why, never a bare "wrong". With reveal the answer and its
// explanation come back whatever was answered.
//
// A hint teaches without telling: it says where to look in the widget and
// which rule gives the answer, never the answer, a number near it or on
// which side of the student's it lies, and never a bound that is the
// answer. It depends on the checkpoint and on what was typed, never on the
// kernel's value, so that trying answer after answer learns nothing from
// the hints but "wrong". The lesson's own hint (hint=) follows it.
func (c *Checkpoint) Grade(answer string, reveal bool, s Solution) Verdict {
	v := Verdict{Widget: c.Widget}
	show := func() {
		v.Explanation, v.Answer, v.Step = s.Explain, s.Display, s.Step
	}
	if reveal {
		v.Status = "revealed"
		show()
		return v
	}
	answer = strings.TrimSpace(answer)
	if answer == "" {
		v.Status = "invalid"
		v.Hint = map[string]string{FormatNumber: "Type a number first.", FormatChoice: "Pick one of the options first.", FormatTiles: "Mark the tiles first (or submit “none” if you think no tile is skipped)."}[c.Format]
		return v
	}
	switch c.Format {
	case FormatNumber:
		switch c.Ask { // the unit the answer is shown with may be typed too
		case AskLadderFloor:
			answer = strings.TrimSpace(strings.TrimSuffix(answer, "%"))
		case AskLadderSpeedup:
			answer = strings.TrimSpace(strings.TrimRight(answer, "×xX"))
		case AskWritten:
			answer = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(answer, "bytes"), "B"))
		case AskSM:
			answer = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(answer, "SM"), "sm"))
		}
		x, msg := parseNumber(answer, c.integer())
		if msg != "" {
			v.Status, v.Hint = "invalid", msg
			return v
		}
		// Within the tolerance is right, even just past a plausible bound
		// (a float32 p of 1.0000001).
		if math.Abs(x-s.Number) <= c.Allowed(s.Number) {
			v.Status, v.Correct = "correct", true
			show()
			return v
		}
		if x < s.Lo || x > s.Hi {
			v.Status, v.Hint = "invalid", fmt.Sprintf("%s cannot be right: %s.", answer, s.Why)
			return v
		}
		v.Status, v.Hint = "wrong", c.numberHint(x)
	case FormatChoice:
		if !slices.ContainsFunc(c.Choices, func(o Choice) bool { return o.Value == answer }) {
			v.Status, v.Hint = "invalid", fmt.Sprintf("%q is not one of the options; pick one of the %d.", truncate(answer), len(c.Choices))
			return v
		}
		if answer == s.Choice {
			v.Status, v.Correct = "correct", true
			show()
			return v
		}
		v.Status, v.Hint = "wrong", c.choiceHint(answer)
	case FormatTiles:
		picked, msg := c.parseTiles(answer)
		if msg != "" {
			v.Status, v.Hint = "invalid", msg
			return v
		}
		if slices.Equal(picked, s.Tiles) {
			v.Status, v.Correct = "correct", true
			show()
			return v
		}
		// No count of the tiles wrongly marked or missed: with it, marking
		// one tile at a time would read the answer off tile by tile.
		v.Status, v.Hint = "wrong", c.tilesHint()
	}
	if c.Hint != "" {
		v.Hint += " " + c.Hint
	}
	return v
}

// rowWhere names a row of a flash run as the rows table shows it: its row
// within its q-tile.
func (c *Checkpoint) rowWhere() string {
	br := max(c.Run.Br, 1)
	return fmt.Sprintf("row %d (row %d of q-tile %d in the rows table)", c.Row, c.Row%br, c.Row/br)
}

// numberHint is a wrong number's hint: for each ask what to read in the
// widget and the rule that makes the answer of it.
func (c *Checkpoint) numberHint(x float64) string {
	switch c.Ask {
	case AskM:
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 the running max starts from m_old = −∞, so m_new is the largest score of %s in that tile: find it in the S tile of kv-tile 0.", c.rowWhere())
		}
		return fmt.Sprintf("Not quite. m_new is the larger of m_old and this tile's largest score: for %s at kv-tile %d, find m_old in the rows table and the row's largest score in the S tile, and keep the larger.", c.rowWhere(), c.KV)
	case AskL:
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 there is no old sum to rescale: l is the sum of the probabilities of %s in the P tile, each exp(s − m_new), the largest of them exactly 1.", c.rowWhere())
		}
		return fmt.Sprintf("Not quite. l = α·l_old + Σp: take the l of %s at the kv-tile before (l_old), multiply it by α = exp(m_old − m_new) from the rows table at kv-tile %d, and add the row's probabilities in that tile's P, each exp(s − m_new).", c.rowWhere(), c.KV)
	case AskAlpha:
		if c.KV == 0 {
			return fmt.Sprintf("Not quite. At kv-tile 0 the kernel has seen no score yet and starts from m_old = −∞: put that into α = exp(m_old − m_new) for %s.", c.rowWhere())
		}
		h := fmt.Sprintf("Not quite. α = exp(m_old − m_new): for %s at kv-tile %d, read m_old and m_new in the rows table, subtract, and raise e to that power (a calculator's exp; write a tiny result with its exponent).", c.rowWhere(), c.KV)
		switch x {
		case 0:
			h += " float32 rounds α to zero only when the max jumps by more than about 104: look at how far it jumps here."
		case 1:
			h += " α is one only where the tile leaves the row's max where it was: compare m_old and m_new."
		}
		return h
	case AskP:
		bc := max(c.Run.Bc, 1)
		return fmt.Sprintf("Not quite. p = exp(s − m_new), with m_new the row's max after this tile, not the row's final max: for %s take the score on key %d (column %d of kv-tile %d's S tile, hover over it) and m_new from the rows table at the same step, subtract, and raise e to that power.",
			c.rowWhere(), c.Key, c.Key%bc, c.Key/bc)
	case AskWeight:
		return fmt.Sprintf("Not quite. A weight is the softmax of the row's scores: exp(score on key %d) over the sum of exp(score) across every key of row %d. Read row %d's scores in the S panel, every step of its rows.",
			c.Key, c.Row, c.Row)
	case AskLoopL:
		return fmt.Sprintf("Not quite. The slipped loop still computes l = α·l_old + Σp after each kv-tile, but with the α its slip gives: find the max it rescales from (the loop widget shows row %d's α and l after every kv-tile, the correct loop's beside the slipped one's), then add the row's probabilities exp(s − m) over kv-tile %d's keys.", c.Row, c.KV)
	case AskCount:
		return "Not quite. " + c.countRule()
	case AskSM:
		heads := max(c.Run.Heads, 1)
		return fmt.Sprintf("Not quite. Find the block in the timeline: hover over the marks, each names its SM, its batch and head (batch-head %d is b%d h%d) and its q-tile. Every step of a block, from its first kv-tile to its epilogue, sits on the row of the one SM that ran it.",
			c.BH, c.BH/heads, c.BH%heads)
	case AskWritten:
		return fmt.Sprintf("Not quite. Add up what the %s steps write to device memory: work out the elements one such step writes (4 bytes each in float32), then multiply by the number of %s steps in the trace.", c.Kind, c.Kind)
	case AskLadderSpeedup, AskLadderFloor:
		return c.ladderHint()
	}
	return "Not quite."
}

// countRule says what to count for a count checkpoint, never the total.
func (c *Checkpoint) countRule() string {
	kinds := map[string]struct{ what, per string }{
		"flash_step": {"tile steps", "one for each tile, a group of rows against a group of keys, that the kernel computes"},
		"scores":     {"scores steps", "one each time the scores pass visits a tile, a group of rows against a group of keys"},
		"pv":         {"P·V steps", "one for each tile of P·V"},
		"softmax":    {"softmax steps", "one for each group of rows"},
		"epilogue":   {"closing steps", "one for each group of rows, when it is finished"},
	}
	k, ok := kinds[c.Kind]
	if !ok {
		k.what, k.per = c.Kind+" steps", "one for each step of that kind"
	}
	whose := "the run's one head"
	if c.Run.Batch*c.Run.Heads > 1 {
		whose = fmt.Sprintf("batch-head %d", c.BH)
	}
	h := fmt.Sprintf("Count the %s of %s: there is %s. N rows in groups of Br make ⌈N / Br⌉ groups, N keys in groups of Bc make ⌈N / Bc⌉, and a tile is one of each, as the stepper's tile grid shows.", k.what, whose, k.per)
	if c.Run.Causal {
		h += " Under the causal mask a tile whose every key comes after every query of its q-tile is skipped."
	}
	return h
}

// choiceHint is a wrong option's hint: the rule that picks the right one.
func (c *Checkpoint) choiceHint(answer string) string {
	switch c.Ask {
	case AskArgmax:
		return fmt.Sprintf("Not that one. A row attends most to the key with its largest score, since exp keeps the scores' order: look along row %d in the S panel at every kv-tile (hover for the values) and find its largest score.", c.Row)
	case AskLastRise:
		return fmt.Sprintf("Not that one. Row %d's m rises at a kv-tile when that tile holds a score above every earlier one, so m_new is above m_old: step through the kv-tiles, read m_old and m_new for %s at each, and find the last one where they differ.", c.Row, c.rowWhere())
	case AskOverflow:
		return c.overflowHint()
	case AskLoopParts:
		return c.loopPartsHint(answer)
	}
	return "Not that one."
}

// tilesHint is a wrong set of tiles' hint: the rule that skips a tile.
func (c *Checkpoint) tilesHint() string {
	return fmt.Sprintf("Not quite. A causal mask skips a tile only when every key of its kv-tile comes after every query of its q-tile: with B_r = %d and B_c = %d, q-tile i holds queries i·B_r to i·B_r + B_r − 1 and kv-tile j keys j·B_c to j·B_c + B_c − 1. A tile with even one key at or before one of its queries is computed, its later keys masked to −∞; and without a mask nothing is skipped.",
		c.Run.Br, c.Run.Bc)
}

// parseTiles reads "i,j; i,j" (or "none") into sorted tile keys on the grid.
func (c *Checkpoint) parseTiles(answer string) ([]string, string) {
	if strings.EqualFold(answer, "none") {
		return nil, ""
	}
	var out []string
	for _, part := range strings.FieldsFunc(answer, func(r rune) bool { return r == ';' || r == ' ' }) {
		if !slices.ContainsFunc(c.Choices, func(o Choice) bool { return o.Value == part }) {
			return nil, fmt.Sprintf("%q is not a tile of this %d×%d grid: write each tile as its q-tile and kv-tile, two whole numbers with a comma between, and put ; between tiles", truncate(part), c.Run.Tr(), c.Run.Tc())
		}
		if !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	sort.Strings(out)
	return out, ""
}

// parseNumber reads a student's number, or says what is wrong with it.
func parseNumber(s string, integer bool) (float64, string) {
	s = strings.NewReplacer("−", "-", "–", "-", " ", "").Replace(s)
	x, err := strconv.ParseFloat(s, 64)
	switch {
	case math.IsInf(x, 0):
		return 0, "Infinity is not the answer here: type a finite number."
	case err != nil && strings.Count(s, ",") == 1 && !strings.Contains(s, "."):
		return 0, fmt.Sprintf("%q: write the decimal point as a dot, e.g. %s.", truncate(s), strings.Replace(s, ",", ".", 1))
	case err != nil || math.IsNaN(x):
		return 0, fmt.Sprintf("%q is not a number: type digits, with a dot for the decimal point and e for a power of ten (as 2.5e-9).", truncate(s))
	case integer && x != math.Trunc(x):
		return 0, fmt.Sprintf("%s: the answer is a whole number.", s)
	}
	return x, ""
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 24 {
		return string(r[:24]) + "…"
	}
	return s
}
