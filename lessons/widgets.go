package lessons

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"flashstep/api"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons/loop"
	"flashstep/lessons/playground"
	"flashstep/traffic"
)

// Widget kinds a directive may name.
const (
	WidgetStepper  = "stepper"  // the stepper page, embedded, on a preset at a step
	WidgetCompare  = "compare"  // naive against flash on a preset's inputs
	WidgetTimeline = "timeline" // the stepper's GPU timeline of a timing preset
	WidgetMemory   = "memory"   // the memory calculator: naive's N×N matrices against flash, forward or backward
	WidgetKernels  = "kernels"  // ptxas's figures of compiled kernels
	// WidgetPlayground is the online-softmax playground on a row of logits.
	WidgetPlayground = "playground"
	// WidgetLoop is the debugging lesson's loop with slips beside the correct one.
	WidgetLoop = "loop"
)

// Panels are the stepper's views an embedded stepper may show: the
// stepper's own list, so that a name a lesson may use is one the stepper
// keeps.
var Panels = api.StepperPanels

// Widget is one live view placed in a lesson by a directive.
type Widget struct {
	ID      string
	Kind    string
	Caption string // HTML

	// stepper, compare, timeline
	Preset string
	Run    kernels.Config
	Step   int      // counted from 1, as the stepper's URLs and pages count
	Panels []string // empty: all
	Height int      // CSS pixels of the frame
	// Digits is how many significant digits the stepper prints in its
	// tiles' cells where they fit (digits=N; 0: the stepper's own 3), for
	// a checkpoint whose arithmetic needs more of a score than three.
	Digits int
	// Taught is the order of the lesson the widget is in: the embedded
	// page shows as known only what lessons up to it teach (taught=N).
	Taught int
	// AskedBy are the checkpoints about this widget: a widget that would
	// show their answer outright (the loop's first parting) holds it back
	// until they are answered or given up.
	AskedBy []string
	// Holds are the numbers its checkpoints ask for, which the embedded
	// stepper shows as "?" until they are answered (hold=bh.row.step; a
	// roles run's lanes, hold=roles.bh.q.step; a backward run's sums of p
	// and finished dQ, hold=psum.bh.row.step and dq.bh.row.step).
	Holds []Hold

	// memory: the calculator's starting problem, and the pass it plans
	// (pass=forward, the default, or pass=backward)
	B, H, N, D int
	Pass       traffic.Pass

	// kernels: which compiled kernels' figures
	Kernels []kernels.PtxasFigures

	// playground: the row it opens with
	Playground playground.Settings

	// loop: the slips it starts with, and the row it shows (of Run)
	Slips []loop.Slip
	Row   int
}

// The significant digits a stepper widget may ask its tiles to print
// (digits=): the stepper's own three at least, and no more than a float32
// holds.
const (
	MinDigits = 3
	MaxDigits = 7
)

// Hold is one row's online softmax that an embedded stepper holds back
// from Step (counted from 1) on: a checkpoint asks for it there. With
// Roles it is instead what the role lanes' note says of step Step, whose
// block is (batch-head BH, q-tile Row): how much of each consumer's
// softmax ran under the other consumer's products, which a hidden
// checkpoint asks for (hold=roles.bh.q.step; a stepper that reads only
// bh.row.step holds skips it). With Of, it is a backward run's number
// (static/js/backward.js): HoldPSum, the row's sums of p and its p in the
// P tile at the steps of its q-tile after Step, which would tell what the
// later kv-tiles add; HoldDQ, the row's finished dQ from Step, its
// q-tile's last pass, on. Such a hold names its checkpoint (By), since
// every stepper of the run holds it: a widget that several checkpoints
// hold lets go of each one's numbers as it is answered.
type Hold struct {
	BH, Row, Step int
	Roles         bool
	Of, By        string
}

// What a backward run's hold keeps back (Hold.Of), and a split-KV run's:
// the merge of a row (its weights, its LSE and the merged O), from the
// q-tile's first merge step on.
const (
	HoldPSum  = "psum"
	HoldDQ    = "dq"
	HoldMerge = "merge"
)

// String is the hold as the embedded page's URL gives it.
func (h Hold) String() string {
	switch {
	case h.Roles:
		return fmt.Sprintf("roles.%d.%d.%d", h.BH, h.Row, h.Step)
	case h.Of != "":
		return fmt.Sprintf("%s.%d.%d.%d.%s", h.Of, h.BH, h.Row, h.Step, h.By)
	}
	return fmt.Sprintf("%d.%d.%d", h.BH, h.Row, h.Step)
}

// holdFor is what checkpoint c asks the student to predict on w's run, if
// it asks for a row's m, l or α at a kv-tile, or its final weights (whose
// log-sum-exp the q-tile's end shows), or how much of a softmax ran under
// the other consumer's products (a roles run's lanes, on a stepper or a
// timeline), or on a backward run what the later kv-tiles add to a row's
// Σp (held after kv-tile KV's step) or a row's finished dQ (held from its
// q-tile's last pass).
func holdFor(w *Widget, c *Checkpoint) (Hold, bool) {
	if c.Ask == AskHidden && (w.Kind == WidgetStepper || w.Kind == WidgetTimeline) && c.Run.Key() == w.Run.Key() {
		k := 0
		for _, st := range kernels.Schedule(&w.Run) {
			if st.Kind == instrument.KindRole {
				continue
			}
			k++
			if st.BH == c.BH && st.I == c.Q && st.J == c.KV {
				return Hold{BH: c.BH, Row: c.Q, Step: k, Roles: true}, true
			}
		}
		return Hold{}, false
	}
	if w.Kind != WidgetStepper || c.Run.Key() != w.Run.Key() {
		return Hold{}, false
	}
	i := c.Row / max(w.Run.Br, 1)
	for k, st := range kernels.Schedule(&w.Run) {
		if st.BH != c.BH || st.I != i {
			continue
		}
		switch {
		case (c.Ask == AskM || c.Ask == AskL || c.Ask == AskAlpha) && st.Kind == instrument.KindFlashStep && st.J == c.KV,
			c.Ask == AskWeight && st.Kind == instrument.KindEpilogue:
			return Hold{BH: c.BH, Row: c.Row, Step: k + 1}, true
		case c.Ask == AskPLeft && st.Kind == instrument.KindBwdStep && st.J == c.KV:
			return Hold{BH: c.BH, Row: c.Row, Step: k + 1, Of: HoldPSum, By: c.ID}, true
		case c.Ask == AskDQ && st.Kind == instrument.KindBwdDQ:
			return Hold{BH: c.BH, Row: c.Row, Step: k + 1, Of: HoldDQ, By: c.ID}, true
		case c.Ask == AskMerge && st.Kind == instrument.KindMerge && st.J == 0:
			return Hold{BH: c.BH, Row: c.Row, Step: k + 1, Of: HoldMerge, By: c.ID}, true
		}
	}
	return Hold{}, false
}

// LoopQuery is the loop widget's /api/loop query, without the slips (the
// widget's switches add them).
func (w *Widget) LoopQuery() string {
	q := w.Run.Values()
	q.Set("q", strconv.Itoa(w.Row/w.Run.Br))
	return q.Encode()
}

// SlipNames are the loop widget's starting slips, comma-separated.
func (w *Widget) SlipNames() string {
	names := make([]string, len(w.Slips))
	for k, s := range w.Slips {
		names[k] = string(s)
	}
	return strings.Join(names, ",")
}

// Src is the embedded page's URL at the widget's step.
func (w *Widget) Src() string { return w.SrcAt(w.Step) }

// SrcAt is the embedded page's URL at step k (from 1).
func (w *Widget) SrcAt(k int) string {
	q := w.Run.Values()
	q.Set("embed", "1")
	q.Set("step", strconv.Itoa(k))
	if len(w.Panels) > 0 {
		q.Set("panels", strings.Join(w.Panels, ","))
	}
	if w.Taught > 0 {
		q.Set("taught", strconv.Itoa(w.Taught))
	}
	if w.Digits > 0 {
		q.Set("digits", strconv.Itoa(w.Digits))
	}
	if len(w.Holds) > 0 {
		var hs []string
		for _, h := range w.Holds {
			hs = append(hs, h.String())
		}
		q.Set("hold", strings.Join(hs, ","))
	}
	page := "/step?"
	if w.Kind == WidgetCompare {
		q.Del(kernels.FieldVariant)
		page = "/compare?"
	}
	return page + q.Encode()
}

// StepperHref opens the widget's run in the full stepper.
func (w *Widget) StepperHref() string {
	page := "/step?"
	q := w.Run.Values()
	if w.Kind == WidgetCompare {
		page = "/compare?"
		q.Del(kernels.FieldVariant)
	}
	q.Set("step", strconv.Itoa(w.Step))
	return page + q.Encode()
}

// Framed says whether the widget is an embedded page.
func (w *Widget) Framed() bool {
	return w.Kind == WidgetStepper || w.Kind == WidgetCompare || w.Kind == WidgetTimeline
}

// StepCount is how many steps the run's trace has: every record but the
// inputs and a roles run's role records, as the stepper counts them.
func StepCount(c *kernels.Config) int {
	if c.Roles {
		n := 0
		for _, st := range kernels.Schedule(c) {
			if st.Kind != instrument.KindRole {
				n++
			}
		}
		return n
	}
	h := c.Header(instrument.SourceCPUMirror, "")
	if c.Timing {
		return h.Records
	}
	return h.Records - c.TracedBH().Len()
}

// presetRun resolves a directive's preset attribute to its run: where a
// lesson's run is checked.
func presetRun(name string) (kernels.Run, error) {
	if name == "" {
		return kernels.Run{}, fmt.Errorf("needs preset=NAME, one of %s", strings.Join(RunNames(), ", "))
	}
	p, ok := Runs[name]
	if !ok {
		return kernels.Run{}, fmt.Errorf("unknown preset %q: one of %s", name, strings.Join(RunNames(), ", "))
	}
	r, err := p.Run()
	if err != nil {
		return r, fmt.Errorf("preset %q is not a valid run: %w", name, err)
	}
	return r, nil
}

// newWidget checks a directive and builds its widget; every attribute must
// be known and every value in range.
func newWidget(kind string, attrs map[string]string, caption string) (*Widget, error) {
	w := &Widget{Kind: kind, Caption: caption, ID: attrs["id"], Preset: attrs["preset"]}
	if !validID(w.ID) {
		return nil, fmt.Errorf("%s: needs id=NAME (lower-case letters, digits, hyphens), got %q", kind, w.ID)
	}
	known := []string{"id"}
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf(format, args...)
		}
	}
	intAttr := func(key string, def, lo, hi int) int {
		known = append(known, key)
		s, ok := attrs[key]
		if !ok {
			return def
		}
		v, perr := strconv.Atoi(s)
		if perr != nil || v < lo || v > hi {
			fail("%s %s: %s must be a whole number from %d to %d, got %q", kind, w.ID, key, lo, hi, s)
		}
		return v
	}
	switch kind {
	case WidgetStepper, WidgetCompare, WidgetTimeline:
		known = append(known, "preset", "panels")
		run, perr := presetRun(w.Preset)
		if perr != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, w.ID, perr)
		}
		w.Run = run.Config()
		if kind == WidgetCompare {
			naive := w.Run
			naive.Variant = instrument.VariantNaive
			if w.Run.Variant != instrument.VariantFlash2 || w.Run.Timing {
				fail("preset %q: compare needs a full flash2 run (it traces naive on the same inputs)", w.Preset)
			} else if verr := naive.Validate(); verr != nil {
				fail("preset %q: naive's trace of this run: %v", w.Preset, verr)
			}
		}
		if kind == WidgetTimeline && !w.Run.Timing {
			fail("preset %q: a timeline needs a run with mode=timing", w.Preset)
		}
		w.Step = intAttr("step", 1, 1, StepCount(&w.Run))
		w.Height = intAttr("height", 560, 200, 2000)
		if kind == WidgetStepper {
			w.Digits = intAttr("digits", 0, MinDigits, MaxDigits)
		}
		if p, ok := attrs["panels"]; ok {
			for _, name := range strings.Split(p, ",") {
				if !slices.Contains(Panels, name) {
					fail("unknown panel %q: panels are %s", name, strings.Join(Panels, ", "))
				}
				w.Panels = append(w.Panels, name)
			}
		}
		if kind == WidgetTimeline && len(w.Panels) == 0 {
			w.Panels = []string{"timeline"}
		}
	case WidgetMemory:
		w.B = intAttr("b", 1, 1, traffic.MaxCalcB)
		w.H = intAttr("h", 16, 1, traffic.MaxCalcH)
		w.N = intAttr("n", 8192, 1, traffic.MaxCalcN)
		w.D = intAttr("d", 64, 1, traffic.MaxCalcD)
		known = append(known, "pass")
		w.Pass = traffic.PassForward
		if v, given := attrs["pass"]; given {
			pass, ok := traffic.ParsePass(v)
			if !ok || v == "" {
				fail("memory %s: pass must be %s or %s, got %q", w.ID, traffic.PassForward, traffic.PassBackward, v)
			}
			w.Pass = pass
		}
	case WidgetKernels:
		known = append(known, "names")
		all := kernels.Ptxas()
		for _, name := range strings.Split(attrs["names"], ",") {
			i := slices.IndexFunc(all, func(f kernels.PtxasFigures) bool { return f.Module+"/"+f.Kernel == name })
			if i < 0 {
				var have []string
				for _, f := range all {
					have = append(have, f.Module+"/"+f.Kernel)
				}
				fail("kernels %s: unknown kernel %q (names=module/kernel,…; compiled: %s)", w.ID, name, strings.Join(have, ", "))
				continue
			}
			w.Kernels = append(w.Kernels, all[i])
		}
	case WidgetPlayground:
		known = append(known, playground.Keys...)
		if _, ok := attrs["logits"]; !ok {
			fail("playground %s: needs logits=x,y,… (the row it opens with)", w.ID)
		}
		var perr error
		if w.Playground, perr = playground.ParseMap(attrs); perr != nil {
			fail("playground %s: %v", w.ID, perr)
		}
	case WidgetLoop:
		known = append(known, "preset", "slip")
		run, perr := presetRun(w.Preset)
		if perr != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, w.ID, perr)
		}
		w.Run = run.Config()
		w.Row = intAttr("row", 0, 0, w.Run.N-1)
		if verr := loop.Validate(run, 0, w.Row/w.Run.Br); verr != nil {
			fail("loop %s: preset %q cannot run the loop: %v", w.ID, w.Preset, verr)
		}
		var serr error
		if w.Slips, serr = loop.ParseSlips(attrs["slip"]); serr != nil {
			fail("loop %s: %v", w.ID, serr)
		}
	default:
		fail("unknown widget %q: stepper, compare, timeline, memory, kernels, playground, loop or checkpoint", kind)
	}
	if err != nil {
		return nil, err
	}
	for key := range attrs {
		if !slices.Contains(known, key) {
			return nil, fmt.Errorf("%s %s: unknown attribute %q (%s)", kind, w.ID, key, strings.Join(known, ", "))
		}
	}
	return w, nil
}

// MemoryQuery is the calculator's starting problem as /api/memory wants it;
// a backward widget's asks for pass=backward.
func (w *Widget) MemoryQuery() string {
	q := url.Values{"b": {strconv.Itoa(w.B)}, "h": {strconv.Itoa(w.H)}, "n": {strconv.Itoa(w.N)}, "d": {strconv.Itoa(w.D)}}
	if w.Pass == traffic.PassBackward {
		q.Set("pass", string(w.Pass))
	}
	return q.Encode()
}
