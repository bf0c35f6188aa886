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

	Playground playground.Settings // overflow: the row
	Slips      []loop.Slip         // loop-parts, loop-l: the loop's slips
	Ladder     LadderQuestion      // ladder-speedup, ladder-floor: the row, shape and floor

	Choices []Choice // choice: the options; tiles: every tile of the grid, row by row
}

// Choice is one option of a multiple-choice or tiles checkpoint.
type Choice struct{ Value, Label string }

// Unit says, for a numeric checkpoint, what precision counts.
func (c *Checkpoint) Unit() string {
	if c.Format != FormatNumber {
		return ""
	}
	switch {
	case c.integer():
		return "a whole number, exactly"
	case c.Ask == AskWritten:
		return fmt.Sprintf("in bytes, within %g%%", c.Tol*100)
	case c.Ask == AskLadderFloor:
		return fmt.Sprintf("in percent, within %g%% of the answer", c.Tol*100)
	case c.RelativeTol():
		return fmt.Sprintf("within %g%%", c.Tol*100)
	}
	return fmt.Sprintf("within ±%g", c.Tol)
}

func (c *Checkpoint) integer() bool { return c.Ask == AskCount || c.Ask == AskSM }

// RelativeTol says whether c's tolerance is a fraction of the answer rather
// than an absolute distance from it.
func (c *Checkpoint) RelativeTol() bool {
	return c.Ask == AskWritten || c.Ask == AskLadderSpeedup || c.Ask == AskLadderFloor
}

// TileGrid is the tiles checkpoint's grid: Tr rows of Tc tiles.
func (c *Checkpoint) TileGrid() (rows, cols int) { return c.Run.Tr(), c.Run.Tc() }

func newCheckpoint(l *Lesson, attrs map[string]string, question string) (*Checkpoint, error) {
	c := &Checkpoint{ID: attrs["id"], Lesson: l.Slug, Ask: attrs["ask"], Question: question, Widget: attrs["widget"],
		Preset: attrs["preset"], Hint: attrs["hint"]}
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
	known := []string{"id", "ask", "widget", "preset", "hint"}
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
			bound := 0.0
			for _, st := range t.Steps {
				for _, v := range st.S {
					if !math.IsInf(float64(v), 0) {
						bound = max(bound, math.Abs(float64(v)))
					}
				}
			}
			bound = math.Ceil(2*bound + 1)
			s.Lo, s.Hi, s.Why = -bound, bound, fmt.Sprintf("m is one of the row's scores q·k/√d, and every score of this run lies within ±%g", bound/2)
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
				where, f3(r.MOld[row]), f3(r.MNew[row]), f3(r.MOld[row]-r.MNew[row]), f3(r.Alpha[row]))
			if c.KV == 0 {
				s.Explain += " At the first kv-tile m_old is −∞ and there is nothing yet to rescale."
			}
			s.Lo, s.Hi, s.Why = 0, 1, "m never decreases, so α = exp(m_old − m_new) is between 0 and 1"
		}
		s.Display = f3(float32(s.Number))
		return s, nil

	case AskP:
		j, col := c.Key/h.Bc, c.Key%h.Bc
		k, r := t.find(instrument.KindFlashStep, c.BH, i, j)
		if r == nil {
			return Solution{}, fmt.Errorf("checkpoint %s: q-tile %d × kv-tile %d of batch-head %d: %w (a causal run skips tiles above the diagonal)", c.ID, i, j, c.BH, errNotInTrace)
		}
		sv, m, p := r.S[row*h.Bc+col], r.MNew[row], r.P[row*h.Bc+col]
		s := Solution{Number: float64(p), Display: strconv.FormatFloat(float64(p), 'f', 4, 32), Step: k + 1, Lo: 0, Hi: 1.001,
			Why: "p = exp(s − m_new), and m_new is at least every score of the row so far, so p lies between 0 and 1"}
		s.Explain = fmt.Sprintf("Key %d is column %d of kv-tile %d; at step %d (q-tile %d × kv-tile %d) row %d's score on it is S = %s and the row's max is m_new = %s, so p = exp(%s − %s) = exp(%s) = %s.",
			c.Key, col, j, k+1, i, j, c.Row, f3(sv), f3(m), f3(sv), f3(m), f3(sv-m), strconv.FormatFloat(float64(p), 'f', 4, 32))
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
		return Solution{Number: w, Display: f3(float32(w)), Step: ek + 1, Lo: 0, Hi: 1, Why: "a softmax weight is between 0 and 1, and a row's weights add up to 1",
			Explain: fmt.Sprintf("Row %d's score on key %d is %s; the row's log-sum-exp is LSE = m + log l = %s (written at step %d, the q-tile's epilogue); the weight is exp(%s − %s) = %s.",
				c.Row, c.Key, f3(scores[c.Key]), f3(epi.LSE[row]), ek+1, f3(scores[c.Key]), f3(epi.LSE[row]), f3(float32(w)))}, nil

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
		return Solution{Number: float64(n), Display: strconv.Itoa(n), Step: first + 1, Lo: 0, Hi: float64(h.Tr() * h.Tc()),
			Why: fmt.Sprintf("the run has %d q-tiles and %d kv-tiles, %d tiles in all", h.Tr(), h.Tc(), h.Tr()*h.Tc()),
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
					Why: fmt.Sprintf("%s has %d SMs, numbered 0 to %d", h.Label, h.NumSMs, h.NumSMs-1),
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
		}
		x, msg := parseNumber(answer, c.integer())
		if msg != "" {
			v.Status, v.Hint = "invalid", msg
			return v
		}
		if x < s.Lo || x > s.Hi {
			v.Status, v.Hint = "invalid", fmt.Sprintf("%s cannot be right: %s.", answer, s.Why)
			return v
		}
		tol := c.Tol
		if c.RelativeTol() {
			tol = c.Tol * math.Abs(s.Number)
		}
		if math.Abs(x-s.Number) <= tol {
			v.Status, v.Correct = "correct", true
			show()
			return v
		}
		dir := "higher"
		if x > s.Number {
			dir = "lower"
		}
		v.Status, v.Hint = "wrong", fmt.Sprintf("Not quite: the kernel's value is %s than %s.", dir, answer)
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
		v.Status, v.Hint = "wrong", "Not that one."
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
		extra, missed := 0, 0
		for _, p := range picked {
			if !slices.Contains(s.Tiles, p) {
				extra++
			}
		}
		for _, p := range s.Tiles {
			if !slices.Contains(picked, p) {
				missed++
			}
		}
		v.Status = "wrong"
		switch {
		case extra > 0 && missed > 0:
			v.Hint = fmt.Sprintf("Not quite: %d of your tiles are computed, and %d skipped tiles are not marked.", extra, missed)
		case extra > 0:
			v.Hint = fmt.Sprintf("Not quite: %d of your tiles are computed after all.", extra)
		default:
			v.Hint = fmt.Sprintf("Not quite: %d more tiles are skipped.", missed)
		}
	}
	if c.Hint != "" {
		v.Hint += " " + c.Hint
	}
	return v
}

// parseTiles reads "i,j; i,j" (or "none") into sorted tile keys on the grid.
func (c *Checkpoint) parseTiles(answer string) ([]string, string) {
	if strings.EqualFold(answer, "none") {
		return nil, ""
	}
	var out []string
	for _, part := range strings.FieldsFunc(answer, func(r rune) bool { return r == ';' || r == ' ' }) {
		if !slices.ContainsFunc(c.Choices, func(o Choice) bool { return o.Value == part }) {
			return nil, fmt.Sprintf("%q is not a tile of this %d×%d grid: write q-tile,kv-tile pairs such as 0,1 separated by ;", truncate(part), c.Run.Tr(), c.Run.Tc())
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
		return 0, fmt.Sprintf("%q is not a number: type digits, e.g. 1.25 or -0.5.", truncate(s))
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
