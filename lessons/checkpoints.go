package lessons

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"flashstep/grading"
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
// engines that stream the run to the embedded stepper. Package grading
// grades answers against it; the course gives each ask its tolerance and
// the hints that teach its rule.
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
	AskHidden   = "hidden"     // ns of a consumer's softmax on a kv-tile under the other consumer's products (roles runs)
	AskWritten  = "written"    // bytes written to device memory by a kind of step

	// Asks answered by arithmetic the server does itself, not by a trace.
	AskOverflow  = "overflow"   // the logit at which the playground's l becomes inf (choice)
	AskLoopParts = "loop-parts" // where the debugging lesson's slipped loop first differs from the correct one (choice)
	AskLoopL     = "loop-l"     // the slipped loop's l for a row after a kv-tile

	// Asks answered from the kernel ladder's recorded figures (ladder.Build
	// of the recordings) and the floors' arithmetic (roofline.go).
	AskLadderSpeedup = "ladder-speedup" // how many times faster one row of the ladder is than another on a shape
	AskLadderFloor   = "ladder-floor"   // what percentage of a floor (compute or memory) a row reaches on a shape
	// How many times faster one backward rung is than another on a shape,
	// each at its fastest tile (the ladder page's backward ladder).
	AskBackwardSpeedup = "backward-speedup"
	// What an idea tried on a backward rung and left out made of it, with
	// over without (the ladder page's table of tries): to predict.
	AskTriedWorth = "tried-worth"

	// Asks answered by the arithmetic of the Hopper rungs' copies,
	// barriers and registers (hopper.go).
	AskTxBytes    = "tx-bytes"    // the bytes an mbarrier is told to expect (expect_tx) for one TMA-copied tile
	AskStageBytes = "stage-bytes" // the bytes one stage of flash3_bwd_tma's q-tile pipeline expects: Q_i, dO_i, L_i·log2 e, D_i
	AskTMACopies  = "tma-copies"  // how many TMA copy instructions one kv-tile's K and V take
	AskParity     = "parity"      // the stage and phase parity a consumer waits on at a kv-tile (choice)
	AskSetmaxnreg = "setmaxnreg"  // the registers a consumer thread may take once the producer has given its up

	// Asks about a backward run's trace: its bwd_pre, bwd_step and bwd_dq
	// records (backward.go).
	AskPLeft     = "p-left"     // what the kv-tiles after one add to a row's Σp, P = exp(S − L) being final
	AskDS        = "ds"         // a row's dS = p·(dP − D) on a key
	AskDQ        = "dq"         // a row's finished dQ in a column: every kv-tile's part, summed, times the scale
	AskFirstLoad = "first-load" // the step at which a kv-tile's block loads K_j and V_j

	// Asks of the lesson on attention at inference (decode.go): three
	// worked out from the directive's sizes, one read from a split-KV
	// run's trace.
	AskKVCache         = "kv-cache"         // the bytes of a KV cache: 2 · layers · kv_heads · tokens · d · bytes, per sequence
	AskDecodeIntensity = "decode-intensity" // FLOPs per byte of cache read by a one-token query
	AskDecodeSplits    = "decode-splits"    // how many splits decode_split cuts a one-token query's keys into
	AskMerge           = "merge"            // the merged O of a row in a column, from the splits' LSE_s and O_s
)

// An ask is one kind of checkpoint question: what its directive says, how
// its answer is worked out, and how it is graded. Each is a stateless
// value: what a checkpoint asks about lives in the Checkpoint, so that a
// copy with another run asks the same about that run.
type ask interface {
	// parse reads the ask's attributes into c, whose run is read already
	// (but for asks onItsOwnInput); what is wrong goes to d.
	parse(c *Checkpoint, d *directive)
	// solve works out c's answer from t, the trace of c's run; t is nil
	// for a computedAsk.
	solve(c *Checkpoint, t *Trace) (grading.Solution, error)
	// pose is c as a question graded against key, with its tolerance and
	// the hints that teach the ask's rule.
	pose(c *Checkpoint, key grading.Solution) grading.Question
}

// computedAsk is an ask answered by arithmetic the server does itself (the
// playground's, the debugging lesson's loop, the Hopper kernels' copies,
// barriers and registers) or from the ladder's recorded figures: Solve
// takes a nil trace.
type computedAsk interface {
	ask
	source(c *Checkpoint) string // where the answer's numbers come from
}

// onItsOwnInput is an ask that reads no preset's run: the playground's
// row of logits, the ladder's recorded figures, the Hopper asks' sizes.
type onItsOwnInput interface {
	ask
	ownInput()
}

// asks are the checkpoint asks, in the order the course's errors list them.
var asks = []struct {
	name string
	ask  ask
}{
	{AskM, runningMax{}},
	{AskL, runningSum{}},
	{AskAlpha, rescale{}},
	{AskP, probability{}},
	{AskWeight, attentionWeight{}},
	{AskArgmax, mostAttended{}},
	{AskLastRise, lastRaise{}},
	{AskSkipped, skippedTiles{}},
	{AskCount, recordCount{}},
	{AskSM, blockSM{}},
	{AskHidden, hiddenSoftmax{}},
	{AskWritten, bytesWritten{}},
	{AskOverflow, overflow{}},
	{AskLoopParts, loopParts{}},
	{AskLoopL, loopL{}},
	{AskLadderSpeedup, ladderSpeedup{}},
	{AskLadderFloor, ladderFloor{}},
	{AskBackwardSpeedup, backwardSpeedup{}},
	{AskTriedWorth, triedWorth{}},
	{AskTxBytes, txBytes{}},
	{AskStageBytes, stageBytes{}},
	{AskTMACopies, tmaCopies{}},
	{AskParity, stageParity{}},
	{AskSetmaxnreg, consumerRegisters{}},
	{AskPLeft, pLeft{}},
	{AskDS, scoreGradient{}},
	{AskDQ, finishedDQ{}},
	{AskFirstLoad, firstLoad{}},
	{AskKVCache, kvCache{}},
	{AskDecodeIntensity, decodeIntensity{}},
	{AskDecodeSplits, decodeSplits{}},
	{AskMerge, mergedO{}},
}

// askNamed is the ask called name, or nil.
func askNamed(name string) ask {
	for _, a := range asks {
		if a.name == name {
			return a.ask
		}
	}
	return nil
}

// Checkpoint is one predict-then-reveal question.
type Checkpoint struct {
	ID       string
	Lesson   string
	Ask      string
	Format   string // grading.FormatNumber, FormatChoice or FormatTiles, as the ask answers
	Question string // HTML
	Widget   string // the id of the widget on the page it is about, if any
	Preset   string
	Run      kernels.Config

	BH, Row, KV, Q, Key int
	Kind                string  // count, written: the record kind
	Tol                 float64 // the tolerance rule's bound, as the ask reads it (ask.pose)
	Rel                 float64 // α, p, a weight: the relative bound of their rule (rel=; 0: grading.SmallValueRel)
	Hint                string  // the lesson's own hint, added to every wrong answer's
	// Revisit is the lesson to go back to when this is missed (the
	// course's closing check names one for each question).
	Revisit string

	Playground playground.Settings // overflow: the row
	Slips      []loop.Slip         // loop-parts, loop-l: the loop's slips
	Ladder     LadderQuestion      // ladder-speedup, ladder-floor, backward-speedup: the row, shape and floor
	Tried      int                 // tried-worth: the idea's place in ladder.BackwardTried
	Hopper     HopperQuestion      // tx-bytes, stage-bytes, tma-copies, parity, setmaxnreg: the sizes (parity's kv-tile is KV)
	Decode     DecodeQuestion      // kv-cache, decode-intensity, decode-splits: the sizes
	Col        int                 // dq, merge: the column of dQ or O asked about
	Consumer   int                 // hidden: the consumer warpgroup, 0 or 1

	Choices []grading.Option // choice: the options; tiles: every tile of the grid, row by row
}

func (c *Checkpoint) kind() ask { return askNamed(c.Ask) }

// Grader is c as a question graded against key, its solution.
func (c *Checkpoint) Grader(key grading.Solution) grading.Question {
	a := c.kind()
	if a == nil {
		return unknownAsk{c.Widget}
	}
	return a.pose(c, key)
}

// Grade judges an answer against the solution s (see grading.Question).
//
// A hint teaches without telling: it says where to look in the widget and
// which rule gives the answer, never the answer, a number near it or on
// which side of the student's it lies, and never a bound that is the
// answer. It depends on the checkpoint and on what was typed, never on the
// kernel's value, so that trying answer after answer learns nothing from
// the hints but "wrong". The lesson's own hint (hint=) follows it.
func (c *Checkpoint) Grade(answer string, reveal bool, s grading.Solution) grading.Verdict {
	return c.Grader(s).Grade(answer, reveal)
}

// numberQuestion is c's question when it asks for a number.
func (c *Checkpoint) numberQuestion() (*grading.Number, bool) {
	q, ok := c.Grader(grading.Solution{}).(*grading.Number)
	return q, ok
}

// Allowed is how far from the kernel's value truth an answer may lie and
// be graded right, by c's tolerance: 0 for whole numbers and for the
// options of a choice.
func (c *Checkpoint) Allowed(truth float64) float64 {
	if q, ok := c.numberQuestion(); ok {
		return q.Tolerance.Allowed(truth)
	}
	return 0
}

// Unit says, for a numeric checkpoint, the rule its answer is held to.
func (c *Checkpoint) Unit() string {
	if q, ok := c.numberQuestion(); ok {
		return q.Tolerance.Says(q.Unit)
	}
	return ""
}

// shown writes x, a numeric answer of c, to the digits its tolerance needs
// (grading.Tolerance.Shown).
func (c *Checkpoint) shown(x float64) string {
	q, _ := c.numberQuestion()
	return q.Tolerance.Shown(x)
}

// TileGrid is the tiles checkpoint's grid: Tr rows of Tc tiles.
func (c *Checkpoint) TileGrid() (rows, cols int) { return c.Run.Tr(), c.Run.Tc() }

// number, choice and tiles pose c in each form, with c's widget and the
// lesson's own hint.
func (c *Checkpoint) number(key grading.Solution, tol grading.Tolerance, unit grading.Unit, hint func(x float64) string) *grading.Number {
	return &grading.Number{Key: key, Tolerance: tol, Unit: unit, WrongHint: hint, AddedHint: c.Hint, Widget: c.Widget}
}

func (c *Checkpoint) choice(key grading.Solution, hint func(picked string) string) *grading.Choice {
	return &grading.Choice{Key: key, Options: c.Choices, WrongHint: hint, AddedHint: c.Hint, Widget: c.Widget}
}

func (c *Checkpoint) tiles(key grading.Solution, hint string) *grading.Tiles {
	rows, cols := c.TileGrid()
	return &grading.Tiles{Key: key, Rows: rows, Cols: cols, WrongHint: hint, AddedHint: c.Hint, Widget: c.Widget}
}

// unknownAsk grades a checkpoint whose ask is none of the asks (only a
// hand-made one can be: a directive's ask is checked): every answer but a
// reveal is invalid.
type unknownAsk struct{ widget string }

func (u unknownAsk) Grade(answer string, reveal bool) grading.Verdict {
	if reveal {
		return grading.Verdict{Status: grading.StatusRevealed, Widget: u.widget}
	}
	return grading.Verdict{Status: grading.StatusInvalid, Hint: "This question asks for nothing the course knows.", Widget: u.widget}
}

// directive is a checkpoint directive's attributes as its ask reads them:
// each read marks an attribute as known, and what is wrong gathers in errs.
type directive struct {
	attrs map[string]string
	known []string
	errs  []string
	run   kernels.Run // the preset's run, as Checkpoint.Run; zero for an ask onItsOwnInput
}

func (d *directive) failf(format string, args ...any) {
	d.errs = append(d.errs, fmt.Sprintf(format, args...))
}

// allow marks keys as attributes the ask knows.
func (d *directive) allow(keys ...string) { d.known = append(d.known, keys...) }

// text is attribute key's value, "" when absent.
func (d *directive) text(key string) string {
	d.allow(key)
	return d.attrs[key]
}

// whole is attribute key, a whole number from lo to hi; def when absent,
// and a def below 0 makes it required.
func (d *directive) whole(key string, def, lo, hi int) int {
	d.allow(key)
	s, ok := d.attrs[key]
	if !ok {
		if def < 0 {
			d.failf("needs %s= (from %d to %d)", key, lo, hi)
		}
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		d.failf("%s must be a whole number from %d to %d, got %q", key, lo, hi, s)
	}
	return v
}

// tol is attribute tol=, the tolerance's bound, between 0 and 1; def when
// absent.
func (d *directive) tol(def float64) float64 {
	d.allow("tol")
	s, ok := d.attrs["tol"]
	if !ok {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v < 1) {
		d.failf("tol must be a number between 0 and 1, got %q", s)
	}
	return v
}

// rel is attribute rel=, the relative bound of a small value's
// tolerance, between 0 and 1; grading.SmallValueRel when absent.
func (d *directive) rel() float64 {
	d.allow("rel")
	s, ok := d.attrs["rel"]
	if !ok {
		return grading.SmallValueRel
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v < 1) {
		d.failf("rel must be a number between 0 and 1, got %q", s)
	}
	return v
}

// smallValue is c's tolerance when it asks for a small value (α, p, a
// weight): grading.SmallValue with the directive's relative bound.
func (c *Checkpoint) smallValue() grading.Tolerance {
	t := grading.SmallValue(c.Tol)
	if c.Rel > 0 {
		t.Rel = c.Rel
	}
	return t
}

// largeTiles says whether the widgets of c's run show its S and P tiles
// too wide to print their numbers (more than 8 columns at a lesson's
// width): the stepper's rows table then lists each row's largest score
// and its sum of p in the tile, and the hints send the student there.
func (c *Checkpoint) largeTiles() bool { return c.Run.Bc > 8 }

// tileMaxIn says where a row's largest score in each kv-tile is shown.
func (c *Checkpoint) tileMaxIn() string {
	if c.largeTiles() {
		return "the rows table's max S (this tile) column"
	}
	return "the S tile, which prints each score"
}

// tileMaxWhere says where a student reads a row's largest score in a
// kv-tile, as the widget shows it.
func (c *Checkpoint) tileMaxWhere(kv int) string {
	if c.largeTiles() {
		return fmt.Sprintf("the rows table's max S (this tile) column at kv-tile %d, since the tile is too wide to print its scores", kv)
	}
	return fmt.Sprintf("the S tile of kv-tile %d, which prints each score (hover over a cell for all its digits)", kv)
}

func newCheckpoint(l *Lesson, attrs map[string]string, question string) (*Checkpoint, error) {
	c := &Checkpoint{ID: attrs["id"], Lesson: l.Slug, Ask: attrs["ask"], Question: question, Widget: attrs["widget"],
		Preset: attrs["preset"], Hint: attrs["hint"], Revisit: attrs["revisit"]}
	if !validID(c.ID) {
		return nil, fmt.Errorf("needs id=NAME (lower-case letters, digits, hyphens), got %q", c.ID)
	}
	if strings.TrimSpace(question) == "" {
		return nil, fmt.Errorf("%s: the question goes between the ::: lines", c.ID)
	}
	a := c.kind()
	var run kernels.Run
	if _, own := a.(onItsOwnInput); !own {
		var err error
		if run, err = presetRun(c.Preset); err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		c.Run = run.Config()
	}
	d := &directive{attrs: attrs, known: []string{"id", "ask", "widget", "preset", "hint", "revisit"}, run: run}
	if a != nil {
		a.parse(c, d)
	} else {
		names := make([]string, len(asks))
		for k, a := range asks {
			names[k] = a.name
		}
		d.failf("unknown ask %q: one of %s", c.Ask, strings.Join(names, ", "))
	}
	for key := range attrs {
		if !slices.Contains(d.known, key) {
			d.failf("unknown attribute %q for ask=%s (%s)", key, c.Ask, strings.Join(d.known, ", "))
		}
	}
	if len(d.errs) > 0 {
		sort.Strings(d.errs)
		return nil, fmt.Errorf("%s: %s", c.ID, strings.Join(d.errs, "; "))
	}
	return c, nil
}

// What the asks on a run require of it and read of it, in their parse.

// needFullTrace: the ask reads records a timing run does not keep.
func (c *Checkpoint) needFullTrace(d *directive) {
	if c.Run.Timing {
		d.failf("ask=%s needs a full trace, not preset %q's timing run", c.Ask, c.Preset)
	}
}

// needFlashSteps: the ask reads FlashAttention's steps (m, α, l, S, P).
func (c *Checkpoint) needFlashSteps(d *directive) {
	c.needFullTrace(d)
	if !flashVariant(c.Run.Variant) {
		d.failf("ask=%s reads FlashAttention steps; preset %q runs %s", c.Ask, c.Preset, c.Run.Variant)
	}
}

// needTracedRow: the row's q-tile is one the run traces. Read last, once
// the row is.
func (c *Checkpoint) needTracedRow(d *directive) {
	if flashVariant(c.Run.Variant) && !c.Run.TracedQ().Contains(c.Row/c.Run.Br) {
		d.failf("row %d is in q-tile %d, which preset %q does not trace", c.Row, c.Row/c.Run.Br, c.Preset)
	}
}

// readBH reads bh=, a traced batch-head, 0 by default.
func (c *Checkpoint) readBH(d *directive) {
	c.BH = d.whole("bh", 0, c.Run.TracedBH().Lo, c.Run.TracedBH().Hi-1)
}

func (c *Checkpoint) readRow(d *directive) { c.Row = d.whole("row", -1, 0, c.Run.N-1) }

func (c *Checkpoint) readKV(d *directive) { c.KV = d.whole("kv", -1, 0, c.Run.Tc()-1) }

// flashVariant says whether v's trace holds FlashAttention-2's flash steps
// (m, α, l, S, P and O at every kv-tile, one block walking its q-tile's
// kv-tiles): the float32 flash2 and every rung that fuses its loop the same
// way on the tensor cores (flash2_mma, flash2_fast, the Hopper rungs), as
// the registry says. A backward kernel fuses its loop too, but its trace
// holds backward steps, which backward.go's asks read, not flash steps.
func flashVariant(v instrument.Variant) bool {
	info := kernels.Info(v)
	return info != nil && info.Loop == kernels.LoopFused && !info.Materialised && !info.Backward
}

func kindByName(name string) (instrument.Kind, bool) {
	for _, k := range instrument.Kinds {
		if k.Name == name {
			return k.Kind, true
		}
	}
	return 0, false
}

// Trace is a decoded trace: its header and the steps (every record but the
// inputs and the role records) in order, numbered as the stepper numbers
// them; and a roles trace's role records, in order, apart, so that a roles
// trace numbers its steps as the timing trace of the same run does.
type Trace struct {
	H     *instrument.Header
	Steps []*instrument.Record
	Roles []*instrument.Record
}

// NewTrace keeps the steps and the role records of a decoded trace.
func NewTrace(h *instrument.Header, recs []*instrument.Record) *Trace {
	t := &Trace{H: h}
	for _, r := range recs {
		switch r.Kind {
		case instrument.KindInputs:
		case instrument.KindRole:
			t.Roles = append(t.Roles, r)
		default:
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
// lesson's loop, the Hopper kernels') or from the ladder's recorded
// figures, and Solve takes a nil trace.
func (c *Checkpoint) NeedsTrace() bool {
	_, computed := c.kind().(computedAsk)
	return !computed
}

// Source says where the numbers of an answer that needs no trace come from.
func (c *Checkpoint) Source() string {
	if a, ok := c.kind().(computedAsk); ok {
		return a.source(c)
	}
	return ""
}

// Solve reads c's answer from the trace of its run, or works it out for
// the asks that need none (t may then be nil).
func (c *Checkpoint) Solve(t *Trace) (grading.Solution, error) {
	a := c.kind()
	if a == nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: unknown ask %q", c.ID, c.Ask)
	}
	if c.NeedsTrace() {
		h := t.H
		if h.N != c.Run.N || h.Br != c.Run.Br || h.Bc != c.Run.Bc || h.Variant != c.Run.Variant || h.Causal != c.Run.Causal {
			return grading.Solution{}, fmt.Errorf("checkpoint %s: the trace is of another run", c.ID)
		}
	}
	return a.solve(c, t)
}

// rowWhere names a row of a flash run as the rows table shows it: its row
// within its q-tile.
func (c *Checkpoint) rowWhere() string {
	br := max(c.Run.Br, 1)
	return fmt.Sprintf("row %d (row %d of q-tile %d in the rows table)", c.Row, c.Row%br, c.Row/br)
}
