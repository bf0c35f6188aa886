package lessons_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/recordings"
	"flashstep/roles"
)

// The hidden checkpoints (a consumer's softmax under the other consumer's
// products, read off a roles run's lanes) and the roles figures, held to
// the shipped recordings: solved from the recording by package roles'
// arithmetic and by the rule written out here apart from it; answerable
// from what the lanes show; graded by their rule, which every slip of the
// rule on the lesson's block lies outside; and the figures are the
// recording's.

// hiddenSolved are the course's hidden checkpoints, solved.
func hiddenSolved(t *testing.T) []solved {
	t.Helper()
	var out []solved
	for _, sc := range courseSolved(t) {
		if sc.c.Ask == lessons.AskHidden {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		t.Fatal("the course has no hidden checkpoint")
	}
	return out
}

// hiddenTraces are the traces of the hidden checkpoints' runs, obtained
// once, as a server without a GPU obtains them.
var hiddenTraces sync.Map // run key → *lessons.Trace

func hiddenTrace(t *testing.T, c *lessons.Checkpoint) *lessons.Trace {
	t.Helper()
	if tr, ok := hiddenTraces.Load(c.Run.Key()); ok {
		return tr.(*lessons.Trace)
	}
	tr := traceOf(t, engines(t), c.Run)
	hiddenTraces.Store(c.Run.Key(), tr)
	return tr
}

// blockSpans are the role records of block (bh, q) of a trace.
func blockSpans(tr *lessons.Trace, bh, q int) []*instrument.Record {
	var out []*instrument.Record
	for _, r := range tr.Roles {
		if r.BH == bh && r.I == q {
			out = append(out, r)
		}
	}
	return out
}

// spanOf is the record of role and event at kv-tile j among recs.
func spanOf(t *testing.T, recs []*instrument.Record, role instrument.Role, e instrument.Event, j int) *instrument.Record {
	t.Helper()
	for _, r := range recs {
		if r.Role == role && r.Event == e && r.J == j {
			return r
		}
	}
	t.Fatalf("no %v %v at kv-tile %d", role, e, j)
	return nil
}

func isProduct(e instrument.Event) bool {
	return e == instrument.EventProductS || e == instrument.EventProductPV
}

// clipped is how much of [a0, a1) lies in [b0, b1).
func clipped(a0, a1, b0, b1 float64) float64 { return max(0, min(a1, b1)-max(a0, b0)) }

// clippedNs is clipped on the trace's times, whole ns since an epoch
// (too large for a float64 to hold to the ns).
func clippedNs(a0, a1, b0, b1 uint64) uint64 {
	if lo, hi := max(a0, b0), min(a1, b1); hi > lo {
		return hi - lo
	}
	return 0
}

// since reads a time as ns after base, exactly.
func since(base uint64) func(uint64) float64 {
	return func(ns uint64) float64 { return float64(int64(ns - base)) }
}

// firstStamp is the earliest start among recs but the clock anchors.
func firstStamp(recs []*instrument.Record) uint64 {
	first := uint64(math.MaxUint64)
	for _, r := range recs {
		if r.Event != instrument.EventClock {
			first = min(first, r.TStart)
		}
	}
	return first
}

// byTheRule is the hidden answer as the hints teach it, worked from the
// records with read, which turns a time into what the lanes show of it:
// consumer c's softmax on kv-tile kv, and of each product of the other
// consumer, the part between its start and end, added.
func byTheRule(t *testing.T, recs []*instrument.Record, c, kv int, read func(uint64) float64) float64 {
	t.Helper()
	me := instrument.RoleConsumer0 + instrument.Role(c)
	other := instrument.RoleConsumer0 + instrument.Role(1-c)
	sm := spanOf(t, recs, me, instrument.EventSoftmax, kv)
	s0, s1 := read(sm.TStart), read(sm.TEnd)
	sum := 0.0
	for _, r := range recs {
		if r.Role == other && isProduct(r.Event) {
			sum += clipped(read(r.TStart), read(r.TEnd), s0, s1)
		}
	}
	return sum
}

// TestHiddenSolvedFromTheRecording: each hidden checkpoint's run comes
// from its recording, whose role records the trace keeps apart from its
// steps (one timing record a step, as the timing trace of the run numbers
// them: StepCount's count); its answer is roles' arithmetic on the block's
// records and the rule worked out here apart from it; its step is the
// timing record of the block's kv-tile, (bh·Tr + q)·(Tc + 1) + kv + 1
// without a mask.
func TestHiddenSolvedFromTheRecording(t *testing.T) {
	t.Parallel()
	for _, sc := range hiddenSolved(t) {
		c, s := sc.c, sc.s
		tr := hiddenTrace(t, c)
		if tr.H.Source != instrument.SourceRecording || !tr.H.Roles {
			t.Fatalf("%s: the trace comes from %v (roles %v), not the run's recording", sc.name, tr.H.Source, tr.H.Roles)
		}
		if len(tr.Roles) == 0 || len(tr.Steps) != lessons.StepCount(&c.Run) {
			t.Errorf("%s: %d steps and %d role records; StepCount says %d steps", sc.name, len(tr.Steps), len(tr.Roles), lessons.StepCount(&c.Run))
		}
		for k, st := range tr.Steps {
			if st.Kind != instrument.KindTiming {
				t.Fatalf("%s: step %d is a %v record, not a timing record", sc.name, k+1, st.Kind)
			}
		}
		for _, rr := range tr.Roles {
			if rr.Kind != instrument.KindRole {
				t.Fatalf("%s: a %v record among the role records", sc.name, rr.Kind)
			}
		}
		if s.Step < 1 || s.Step > len(tr.Steps) {
			t.Fatalf("%s: step %d of %d", sc.name, s.Step, len(tr.Steps))
		}
		if at := tr.Steps[s.Step-1]; at.BH != c.BH || at.I != c.Q || at.J != c.KV {
			t.Errorf("%s: step %d is (batch-head %d, q-tile %d, kv-tile %d), not the block's kv-tile (%d, %d, %d)", sc.name, s.Step, at.BH, at.I, at.J, c.BH, c.Q, c.KV)
		}
		if !c.Run.Causal {
			if want := (c.BH*c.Run.Tr()+c.Q)*(c.Run.Tc()+1) + c.KV + 1; s.Step != want {
				t.Errorf("%s: step %d, want %d", sc.name, s.Step, want)
			}
		}
		b := roles.ByBlock(tr.Roles)[roles.Key{BH: c.BH, I: c.Q}]
		hidden, length, ok := b.HiddenSoftmax(instrument.RoleConsumer0+instrument.Role(c.Consumer), c.KV)
		if !ok || s.Number != float64(hidden) || s.Hi != float64(length) || s.Lo != 0 {
			t.Errorf("%s: answer %g in [%g, %g], roles says %d of a softmax of %d (%v)", sc.name, s.Number, s.Lo, s.Hi, hidden, length, ok)
		}
		recs := blockSpans(tr, c.BH, c.Q)
		exact := byTheRule(t, recs, c.Consumer, c.KV, since(firstStamp(recs)))
		if exact != s.Number {
			t.Errorf("%s: the rule worked out here gives %g, the checkpoint %g", sc.name, exact, s.Number)
		}
		if s.Display != strconv.FormatFloat(s.Number, 'f', -1, 64)+" ns" && s.Display != strconv.FormatFloat(s.Number, 'f', 1, 64)+" ns" {
			t.Errorf("%s: shown as %q", sc.name, s.Display)
		}
		if !strings.Contains(s.Explain, fmt.Sprintf("%d ns", hidden)) || !strings.Contains(s.Explain, fmt.Sprintf("lasted %d ns", length)) {
			t.Errorf("%s: the explanation does not give the answer and the softmax's length: %s", sc.name, s.Explain)
		}
	}
}

// TestHiddenAnswerableFromTheLanes: the answer worked out by the rule from
// the lanes' tooltips, which give each span's start and end in whole ns
// from the block's start, is graded right with at least half the
// tolerance to spare, wherever the view puts that start (its first stamp,
// its clock anchor, or a fraction of a ns off either, rounded).
func TestHiddenAnswerableFromTheLanes(t *testing.T) {
	t.Parallel()
	for _, sc := range hiddenSolved(t) {
		c, s := sc.c, sc.s
		tr := hiddenTrace(t, c)
		recs := blockSpans(tr, c.BH, c.Q)
		first := firstStamp(recs)
		// The block's first clock anchor, in the closing group.
		anchor := recs[slices.IndexFunc(recs, func(r *instrument.Record) bool { return r.Event == instrument.EventClock })].TStart
		for _, origin := range []float64{0, -0.5, 0.3, float64(int64(anchor - first)), float64(int64(anchor-first)) + 0.7} {
			read := func(ns uint64) float64 { return math.Round(since(first)(ns) - origin) }
			got := byTheRule(t, recs, c.Consumer, c.KV, read)
			answer := strconv.FormatFloat(got, 'f', -1, 64)
			if v := c.Grade(answer, false, s); !v.Correct {
				t.Errorf("%s: %s ns, worked from the lanes with the origin at %.1f, graded %s (the recording's %s): %s", sc.name, answer, origin, v.Status, s.Display, v.Hint)
			}
			if v := c.Grade(answer+" ns", false, s); !v.Correct {
				t.Errorf("%s: %s ns typed with its unit graded %s", sc.name, answer, v.Status)
			}
			if off, room := math.Abs(got-s.Number), c.Allowed(s.Number)/2; off > room {
				t.Errorf("%s: reading the lanes puts %s %g ns from the recording's %s, more than half its tolerance", sc.name, answer, off, s.Display)
			}
		}
	}
}

// TestHiddenSlipsFail: the tolerance is HiddenTolNs, under half the
// shortest product of the recording; and every slip of the rule on the
// checkpoint's block lies outside it and is graded wrong: the whole
// softmax; the other consumer's products whole, not cut at the softmax's
// ends; one of them, or the only one, left out; the consumer's own
// products; the other consumer's softmax over this one.
func TestHiddenSlipsFail(t *testing.T) {
	t.Parallel()
	for _, sc := range hiddenSolved(t) {
		c, s := sc.c, sc.s
		tol := c.Allowed(s.Number)
		if tol != lessons.HiddenTolNs {
			t.Errorf("%s: a tolerance of %g ns, want %d", sc.name, tol, lessons.HiddenTolNs)
		}
		tr := hiddenTrace(t, c)
		shortest := uint64(math.MaxUint64)
		for _, rr := range tr.Roles {
			if isProduct(rr.Event) {
				shortest = min(shortest, rr.TEnd-rr.TStart)
			}
		}
		if 2*tol >= float64(shortest) {
			t.Errorf("%s: ±%g ns against products as short as %d ns: a product left out could pass", sc.name, tol, shortest)
		}
		recs := blockSpans(tr, c.BH, c.Q)
		me := instrument.RoleConsumer0 + instrument.Role(c.Consumer)
		other := instrument.RoleConsumer0 + instrument.Role(1-c.Consumer)
		sm := spanOf(t, recs, me, instrument.EventSoftmax, c.KV)
		at := since(firstStamp(recs))
		s0, s1 := at(sm.TStart), at(sm.TEnd)
		var whole, own, softmaxes float64
		var parts []float64
		for _, rr := range recs {
			a0, a1 := at(rr.TStart), at(rr.TEnd)
			in := clipped(a0, a1, s0, s1)
			switch {
			case rr.Role == other && isProduct(rr.Event) && in > 0:
				whole += a1 - a0
				parts = append(parts, in)
			case rr.Role == me && isProduct(rr.Event):
				own += in
			case rr.Role == other && rr.Event == instrument.EventSoftmax:
				softmaxes += in
			}
		}
		slips := map[string]float64{
			"the whole softmax":            s1 - s0,
			"the consumer's own products":  own,
			"the other consumer's softmax": softmaxes,
		}
		if whole != s.Number {
			slips["the products whole, not cut at the softmax's ends"] = whole
		}
		if len(parts) == 1 {
			slips["the one product left out"] = 0
		}
		if len(parts) > 1 {
			for k := range parts {
				slips[fmt.Sprintf("product %d of %d left out", k+1, len(parts))] = s.Number - parts[k]
			}
		}
		for slip, x := range slips {
			if math.Abs(x-s.Number) <= tol {
				t.Errorf("%s: %s gives %g, within ±%g of the answer %g: the tolerance does not tell the slip from the rule", sc.name, slip, x, tol, s.Number)
				continue
			}
			if v := c.Grade(strconv.FormatFloat(x, 'f', -1, 64), false, s); v.Correct || v.Status != grading.StatusWrong && v.Status != grading.StatusInvalid {
				t.Errorf("%s: %s (%g) graded %+v", sc.name, slip, x, v)
			}
		}
	}
}

// rolesRecording is the shipped recording name, decoded.
func rolesRecording(t *testing.T, name string) (*instrument.Header, []*instrument.Record) {
	t.Helper()
	raw, err := recordings.Files.ReadFile(name + ".fstrace")
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return h, recs
}

// TestRolesFigures: {{roles NAME SHARE}} is roles.Summarise's share of the
// recording as a whole percentage, and FigureNumber gives it unrounded;
// {{roles NAME EVENT ns}} is the mean length of the consumers' EVENT spans
// over their kv-tiles, worked out here from the records; a bad token says
// what is wrong.
func TestRolesFigures(t *testing.T) {
	t.Parallel()
	_, recs := rolesRecording(t, "ws-roles")
	blocks := roles.ByBlock(recs)
	sh := roles.Summarise(blocks)
	for tok, want := range map[string]float64{"roles ws-roles softmax-hidden": sh.SoftmaxHidden, "roles ws-roles in-flight": sh.ProductsInFlight} {
		if got, err := lessons.FigureNumber(tok); err != nil || got != want {
			t.Errorf("{{%s}} = %v (%v), roles.Summarise says %v", tok, got, err, want)
		}
		if got, err := lessons.Figure(tok); err != nil || got != fmt.Sprintf("%.0f%%", 100*want) {
			t.Errorf("{{%s}} reads %q (%v), want %.0f%%", tok, got, err, 100*want)
		}
	}
	sum, n := map[instrument.Event]float64{}, map[instrument.Event]float64{}
	var softmax, together, tiles float64
	for _, r := range recs {
		if r.Kind != instrument.KindRole || !r.Role.Consumer() || r.J < 0 {
			continue
		}
		sum[r.Event] += float64(r.TEnd - r.TStart)
		n[r.Event]++
		tiles += float64(r.TEnd - r.TStart)
		if r.Event != instrument.EventSoftmax {
			continue
		}
		softmax += float64(r.TEnd - r.TStart)
		for _, o := range recs {
			if o.Kind == instrument.KindRole && o.BH == r.BH && o.I == r.I && o.Role.Consumer() && o.Role != r.Role && o.Event == instrument.EventSoftmax {
				together += float64(clippedNs(o.TStart, o.TEnd, r.TStart, r.TEnd))
			}
		}
	}
	for tok, want := range map[string]float64{"roles ws-roles softmax-together": together / softmax, "roles ws-roles softmax-share": softmax / tiles} {
		if got, err := lessons.FigureNumber(tok); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("{{%s}} = %v (%v), the records say %v", tok, got, err, want)
		}
	}
	for _, e := range []instrument.Event{instrument.EventSoftmax, instrument.EventProductS, instrument.EventProductPV, instrument.EventWaitK, instrument.EventWaitV} {
		tok := "roles ws-roles " + e.String() + " ns"
		want := sum[e] / n[e]
		if got, err := lessons.Figure(tok); err != nil || got != fmt.Sprintf("%.0f", want) {
			t.Errorf("{{%s}} reads %q (%v), want %.0f", tok, got, err, want)
		}
		if n[e] != 2*float64(len(blocks))*8 {
			t.Errorf("%v: %g spans, want two consumers' eight kv-tiles in each of %d blocks", e, n[e], len(blocks))
		}
	}
	for bad, says := range map[string]string{
		"roles nobody in-flight":         `no recording "nobody"`,
		"roles ws-real-tiles in-flight":  "not a roles trace",
		"roles ws-roles busy":            `unknown share "busy"`,
		"roles ws-roles softmax":         `unknown share "softmax"`,
		"roles ws-roles copy_k ns":       `unknown consumer span "copy_k"`,
		"roles ws-roles turn_s ns":       "has no turn_s spans",
		"roles ws-roles softmax ms":      "{{roles NAME EVENT ns}}",
		"roles ws-roles":                 "{{roles NAME SHARE}}",
		"roles ws-roles in-flight extra": "{{roles NAME EVENT ns}}",
	} {
		if got, err := lessons.Figure(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("{{%s}} reads %q (%v); want an error saying %q", bad, got, err, says)
		}
	}
}

// TestClaimRolesLanes: lesson 12, "Seeing the overlap", held to the
// recording its figures come from:
//   - "one block to an SM": every block of the run on an SM of its own;
//     its 128 blocks of 8 kv-tiles;
//   - a consumer's own spans never overlap ("nothing of its own runs
//     beside one");
//   - "from kv-tile 1 on, in every block, each K_j and V_j had landed
//     before either consumer began to wait for it";
//   - "mostly ran their softmax side by side": over half of the softmax
//     time, the other consumer was in its softmax too;
//   - "the chain is mostly softmax": over half of a consumer's time on its
//     kv-tiles; and the softmax, not the tensor cores and not the copies,
//     sets the pace: a product was in flight under half of a block's
//     time, a softmax lasted longer than S and P·V together, on average,
//     and the copies landed before they were waited for (above);
//   - the checkpoint's softmax has a product of the other consumer over
//     it that its ends cut, so that its answer takes every step of the
//     rule the hints teach.
func TestClaimRolesLanes(t *testing.T) {
	t.Parallel()
	h, recs := rolesRecording(t, "ws-roles")
	blocks := roles.ByBlock(recs)
	sms := map[int]bool{}
	for _, b := range blocks {
		sms[b.SM] = true
	}
	if len(blocks) != 128 || len(sms) != len(blocks) || h.Tc() != 8 {
		t.Errorf("%d blocks on %d SMs, %d kv-tiles: the caption says 128 blocks of 8 kv-tiles, one to an SM", len(blocks), len(sms), h.Tc())
	}
	fig := func(tok string) float64 { return figureNumber(t, tok) }
	if v := fig("roles ws-roles softmax-together"); v <= 0.5 {
		t.Errorf("the consumers' softmax side by side %.2f of the time: the lesson says mostly", v)
	}
	if v := fig("roles ws-roles softmax-share"); v <= 0.5 {
		t.Errorf("the softmax is %.2f of a consumer's kv-tiles: the lesson says the chain is mostly softmax", v)
	}
	if v := fig("roles ws-roles in-flight"); v >= 0.5 {
		t.Errorf("a product in flight %.2f of a block's time: the lesson says the softmax, not the tensor cores, sets the pace", v)
	}
	if sm, s, pv := fig("roles ws-roles softmax ns"), fig("roles ws-roles product_s ns"), fig("roles ws-roles product_pv ns"); sm <= s+pv {
		t.Errorf("a softmax of %.0f ns against products of %.0f and %.0f ns: the lesson says it sets the pace", sm, s, pv)
	}
	for k, b := range blocks {
		for _, c := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
			own := b.Select(func(x roles.Span) bool { return x.Role == c && x.Event != instrument.EventClock })
			var sum uint64
			for _, x := range own {
				sum += x.Len()
			}
			if got := roles.Total(roles.Union(own)); got != sum {
				t.Errorf("block %v: %v's own spans overlap (%d ns of %d)", k, c, sum-got, sum)
			}
		}
		for j := 1; j < h.Tc(); j++ {
			for _, copy := range []struct{ copy, wait instrument.Event }{{instrument.EventCopyK, instrument.EventWaitK}, {instrument.EventCopyV, instrument.EventWaitV}} {
				landed, _ := b.Find(instrument.RoleProducer, copy.copy, j)
				for _, c := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
					if w, _ := b.Find(c, copy.wait, j); landed.End > w.Start {
						t.Errorf("block %v kv-tile %d: %v landed %d ns after %v began to wait for it", k, j, copy.copy, landed.End-w.Start, c)
					}
				}
			}
		}
	}
	for _, sc := range hiddenSolved(t) {
		c := sc.c
		b := blocks[roles.Key{BH: c.BH, I: c.Q}]
		me := instrument.RoleConsumer0 + instrument.Role(c.Consumer)
		s, _ := b.Find(me, instrument.EventSoftmax, c.KV)
		cut := false
		for _, p := range b.Select(func(x roles.Span) bool { return x.Role == roles.Other(me) && roles.IsProduct(x.Event) }) {
			if p.End > s.Start && p.Start < s.End && (p.Start < s.Start || p.End > s.End) {
				cut = true
			}
		}
		if !cut {
			t.Errorf("%s: no product over the softmax is cut by its ends: the checkpoint no longer asks for the rule's cut", sc.name)
		}
	}
	text := lessonText(t, "course/12-hopper.md")
	for _, said := range []string{"one block to an SM", "nothing of its own runs beside one",
		"from kv-tile 1 on, in every block, each $K_j$ and $V_j$ had landed before either consumer began to wait for it",
		"mostly ran their softmax side by side", "the chain is mostly softmax",
		"it is the softmax, not the tensor cores and not the copies, that sets rung 9's pace"} {
		if !strings.Contains(text, said) {
			t.Errorf("lesson 12 no longer says %q: check the claim it makes instead here", said)
		}
	}
	if !slices.Contains(lessons.RunNames(), "ws-roles") {
		t.Error("no preset ws-roles")
	}
}

// TestHiddenWidgetHoldsTheAnswer: a hidden checkpoint's widget shows its
// run's role lanes, in the block asked about, opening before the asked
// kv-tile's step, where the lanes' note (which says how much of each
// consumer's softmax ran under the other's products) says nothing within
// the tolerance of the answer; and it holds the note of the asked step
// back (hold=roles.bh.q.step) until the checkpoint is answered.
func TestHiddenWidgetHoldsTheAnswer(t *testing.T) {
	t.Parallel()
	c := course(t)
	for _, sc := range hiddenSolved(t) {
		cp, s := sc.c, sc.s
		l, _ := c.Lesson(cp.Lesson)
		w := widgetByID(l, cp.Widget)
		if w == nil || (w.Kind != lessons.WidgetTimeline && w.Kind != lessons.WidgetStepper) || w.Run.Key() != cp.Run.Key() {
			t.Errorf("%s: asks about role lanes no widget on its page shows", sc.name)
			continue
		}
		if w.Kind == lessons.WidgetStepper && len(w.Panels) > 0 && !slices.Contains(w.Panels, "timeline") {
			t.Errorf("%s: its stepper %s has no timeline panel, where the lanes are", sc.name, w.ID)
		}
		want := lessons.Hold{BH: cp.BH, Row: cp.Q, Step: s.Step, Roles: true}
		if !slices.Contains(w.Holds, want) || !strings.Contains(w.Src(), "hold="+want.String()) {
			t.Errorf("%s: widget %s holds %v (%s), want %v", sc.name, w.ID, w.Holds, w.Src(), want)
		}
		tr := hiddenTrace(t, cp)
		if w.Step >= s.Step {
			t.Errorf("%s: widget %s opens at step %d, the answer's step is %d: open it before", sc.name, w.ID, w.Step, s.Step)
			continue
		}
		at := tr.Steps[w.Step-1]
		if at.BH != cp.BH || at.I != cp.Q || at.J < 0 {
			t.Errorf("%s: widget %s opens on (batch-head %d, q-tile %d, kv-tile %d), not on a kv-tile of the block asked about", sc.name, w.ID, at.BH, at.I, at.J)
			continue
		}
		b := roles.ByBlock(tr.Roles)[roles.Key{BH: cp.BH, I: cp.Q}]
		for _, c := range []instrument.Role{instrument.RoleConsumer0, instrument.RoleConsumer1} {
			if shown, _, _ := b.HiddenSoftmax(c, at.J); math.Abs(float64(shown)-s.Number) <= cp.Allowed(s.Number) {
				t.Errorf("%s: at its opening step the lanes' note gives %v %d ns under the other's products, within the tolerance of the answer %s", sc.name, c, shown, s.Display)
			}
		}
	}
}

// Lesson 12's paragraph on rung 10's roles: its turns hold in the recording
// (roles.Check, which the recordings' test runs too), they take some of a
// consumer's time, and they "bought little": the softmax they put under
// the other consumer's products, over rung 9's, is a smaller share of a
// consumer's time than the turns took ("took more than they hid"), while
// the two softmaxes still ran side by side most of the time, in step.
func TestClaimPingPongRoles(t *testing.T) {
	t.Parallel()
	h, recs := rolesRecording(t, "pingpong-roles")
	c := kernels.ConfigFromHeader(h)
	if _, err := roles.Check(c, h, recs); err != nil {
		t.Fatalf("pingpong-roles: %v", err)
	}
	fig := func(tok string) float64 { return figureNumber(t, tok) }
	turns := fig("roles pingpong-roles turns")
	if turns <= 0.01 {
		t.Errorf("the turns take %.3f of a consumer's time: the lesson says they cost it some", turns)
	}
	pp, ws := fig("roles pingpong-roles softmax-hidden"), fig("roles ws-roles softmax-hidden")
	if gained := (pp - ws) * fig("roles pingpong-roles softmax-share"); gained >= turns {
		t.Errorf("rung 10 hid %.3f of its softmax, rung 9 %.3f: %.3f of a consumer's time gained against %.3f in turns; the lesson says the turns took more than they hid", pp, ws, gained, turns)
	}
	if v := fig("roles pingpong-roles softmax-together"); v <= 0.5 {
		t.Errorf("rung 10's softmaxes side by side %.3f of the time: the lesson says they still ran side by side", v)
	}
	text := lessonText(t, "course/12-hopper.md")
	for _, said := range []string{"They hold:", "they bought little", "the turns took more than they hid", "run their softmax in step"} {
		if !strings.Contains(text, said) {
			t.Errorf("lesson 12 no longer says %q: check the claim it makes instead here", said)
		}
	}
}

// figureNumber is the unrounded value of a figure token, or the test stops.
func figureNumber(t *testing.T, tok string) float64 {
	t.Helper()
	v, err := lessons.FigureNumber(tok)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
