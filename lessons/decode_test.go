package lessons_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/lessons"
)

// The asks of the lesson on attention at inference: the computed ones on
// fresh sizes, each answer held to the rule worked out here a second way
// (by counting, not by the grader's product or by kernels.DecodeSplits);
// the merge on fresh split-KV runs of the CPU mirror, its answer held to a
// float64 merge of the run's own split ends; each graded at the edges of
// its tolerance, against junk and NaN, and its hints checked for leaks.
// The sizes and runs come from testrand's seed, which a failure prints.

// randomDecode draws sizes every computed decode ask accepts.
func randomDecode(rng *rand.Rand) lessons.DecodeQuestion {
	kv := 1 + rng.IntN(16)
	return lessons.DecodeQuestion{
		Layers: 1 + rng.IntN(128), KVHeads: kv, D: 16 * (1 + rng.IntN(16)), Tokens: 1 + rng.IntN(1<<20),
		Batch: 1 + rng.IntN(64), Bytes: []int{1, 2, 4}[rng.IntN(3)],
		Heads: kv * (1 + rng.IntN(8)), N: 1 + rng.IntN(1<<20), Bc: []int{16, 32, 64, 128}[rng.IntN(4)],
	}
}

// decodeDirective writes the directive a lesson would for ask on q.
func decodeDirective(ask string, q lessons.DecodeQuestion) string {
	attrs := map[string]string{
		lessons.AskKVCache:         fmt.Sprintf("layers=%d kv_heads=%d d=%d tokens=%d batch=%d bytes=%d", q.Layers, q.KVHeads, q.D, q.Tokens, q.Batch, q.Bytes),
		lessons.AskDecodeIntensity: fmt.Sprintf("heads=%d kv_heads=%d bytes=%d", q.Heads, q.KVHeads, q.Bytes),
		lessons.AskDecodeSplits:    fmt.Sprintf("batch=%d kv_heads=%d n=%d bc=%d", q.Batch, q.KVHeads, q.N, q.Bc),
	}[ask]
	return fmt.Sprintf("::: checkpoint id=c ask=%s %s\nThe question, sizes and all.\n:::\n", ask, attrs)
}

// decodeTruth is each computed ask's answer worked out a second way.
func decodeTruth(ask string, q lessons.DecodeQuestion) float64 {
	switch ask {
	case lessons.AskKVCache:
		// A token's K and V rows, layer by layer and head by head, then
		// every token of every sequence.
		perToken := 0
		for range q.Layers {
			for range q.KVHeads {
				perToken += 2 * q.D * q.Bytes // its K row and its V row
			}
		}
		return float64(perToken) * float64(q.Tokens) * float64(q.Batch)
	case lessons.AskDecodeIntensity:
		// One key: each query head does its dot product and its
		// weighted add (d multiply-adds each), and each K/V head's key
		// and value rows are read once.
		const d = 8
		flops, bytes := 0, 0
		for range q.Heads {
			flops += 2*d + 2*d
		}
		for range q.KVHeads {
			bytes += 2 * d * q.Bytes
		}
		return float64(flops) / float64(bytes)
	case lessons.AskDecodeSplits:
		// Fill one wave of 132 SMs × 2 blocks; then the fewest kv-tiles a
		// split that make at most that many splits; then count the runs.
		tiles := (q.N + q.Bc - 1) / q.Bc
		want := max(1, 132*2/(q.Batch*q.KVHeads))
		want = min(want, tiles)
		per := 1
		for per*want < tiles {
			per++
		}
		splits := 0
		for first := 0; first < tiles; first += per {
			splits++
		}
		return float64(splits)
	}
	panic(ask)
}

var decodeAsks = []string{lessons.AskKVCache, lessons.AskDecodeIntensity, lessons.AskDecodeSplits}

func TestDecodeAsksOnFreshSizes(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range testrand.Runs(120, 12) {
		q := randomDecode(rng)
		if rng.IntN(4) == 0 {
			q.N = rng.IntN(300) + 1 // fewer kv-tiles than a wave has room for
		}
		for _, ask := range decodeAsks {
			dir := decodeDirective(ask, q)
			name := strings.TrimSpace(strings.SplitN(dir, "\n", 2)[0])
			c := loadCheckpoint(t, dir)
			if c.NeedsTrace() || c.Source() == "" {
				t.Fatalf("%s: needs a trace (%v) or names no source", name, c.NeedsTrace())
			}
			s, err := c.Solve(nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := decodeTruth(ask, q); s.Number != want {
				t.Errorf("%s: answer %s (%g), counting says %g", name, s.Display, s.Number, want)
			}
			if s.Explain == "" || s.Display == "" || s.Number < s.Lo || s.Number > s.Hi {
				t.Errorf("%s: solution %+v", name, s)
			}
			checkEdges(t, rng, name, c, s, askRules[ask])
			for _, a := range junk {
				if v := c.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" {
					t.Errorf("%s: %q graded %+v", name, a, v)
				}
			}
			for _, k := range []float64{-100, -8, -2, 1.5, 3, 1000} {
				a := num(s.Number * k)
				if v := c.Grade(a, false, s); !v.Correct {
					if what := leaks(c, s, c.Allowed(s.Number), a, v.Hint); what != "" {
						t.Errorf("%s: the hint to %s gives away %s: %q", name, a, what, v.Hint)
					}
				}
			}
		}
	}
}

// The figures the lesson works by hand are the asks' answers, and the
// splits the docs' table gives (docs/DECODE.md, run ac: 32 at 32,768 keys
// and 33 at 131,072, batch 1, 8 K/V heads) are the rule's.
func TestDecodeAsksOnTheLessonsFigures(t *testing.T) {
	t.Parallel()
	solve := func(dir string) float64 {
		t.Helper()
		s, err := loadCheckpoint(t, "::: checkpoint id=c "+dir+"\nq\n:::\n").Solve(nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.Number
	}
	for dir, want := range map[string]float64{
		"ask=kv-cache layers=32 kv_heads=8 d=128 tokens=32768":          4 << 30,
		"ask=kv-cache layers=32 kv_heads=32 d=128 tokens=32768":         16 << 30,
		"ask=kv-cache layers=32 kv_heads=8 d=128 tokens=32768 batch=16": 64 << 30,
		"ask=kv-cache layers=32 kv_heads=8 d=128 tokens=1":              131072,
		"ask=decode-intensity heads=32 kv_heads=8":                      4,
		"ask=decode-intensity heads=32 kv_heads=32":                     1,
		"ask=decode-intensity heads=32 kv_heads=8 bytes=1":              8,
		"ask=decode-splits batch=1 kv_heads=8 n=32768":                  32,
		"ask=decode-splits batch=1 kv_heads=8 n=131072":                 33,
		"ask=decode-splits batch=1 kv_heads=8 n=4096":                   32,
		"ask=decode-splits batch=8 kv_heads=8 n=32768":                  4,
		"ask=decode-splits batch=64 kv_heads=8 n=32768":                 1,
		"ask=decode-splits batch=1 kv_heads=32 n=32768":                 8,
	} {
		if got := solve(dir); got != want {
			t.Errorf("%s: %g, want %g", dir, got, want)
		}
	}
}

// randomSplitRun draws a split-KV run the mirror takes: one query row or a
// few, either mask (aligned to the end), grouped heads or not, ragged
// tiles, every input pattern.
func randomSplitRun(rng *rand.Rand) kernels.Config {
	patterns := []string{"normal", "large", "peaked"}
	for {
		n := 2 + rng.IntN(200)
		nq := 1
		if rng.IntN(3) == 0 {
			nq = 1 + rng.IntN(min(n, 24))
		}
		kv := 1 + rng.IntN(3)
		group := 1 + rng.IntN(4)
		br := 1 + rng.IntN(max(1, min(nq, 16/group)))
		q := fmt.Sprintf("variant=decode_split&n=%d&nq=%d&d=%d&br=%d&bc=%d&heads=%d&kv_heads=%d&causal=%d&pattern=%s&seed=%d",
			n, nq, 2*(1+rng.IntN(12)), br, 1+rng.IntN(min(64, n)), kv*group, kv, rng.IntN(2), patterns[rng.IntN(3)], rng.Uint64N(1<<40))
		if c, err := (lessons.Preset{Query: q}).Config(); err == nil {
			return c
		}
	}
}

// mergeBase is a merge checkpoint as a lesson writes it, on the lesson's
// preset: fresh runs take its copy.
func mergeBase(t *testing.T) *lessons.Checkpoint {
	t.Helper()
	return loadCheckpoint(t, "::: checkpoint id=c preset=decode-merge ask=merge row=0 col=3\nWhat does the merge write in column 3?\n:::\n")
}

// float64Merge merges the row's split ends of trace tr in float64, apart
// from the kernel's and the grader's code: the whole LSE from the splits',
// each weight, and O in the column.
func float64Merge(tr *lessons.Trace, bh, row, col int) (o float64, lses, os []float64) {
	h := tr.H
	for _, r := range tr.Steps {
		if r.Kind == instrument.KindSplitEnd && r.BH == bh && r.I == row/h.Br {
			lses = append(lses, float64(r.LSE[row%h.Br]))
			os = append(os, float64(r.O[(row%h.Br)*h.D+col]))
		}
	}
	top := math.Inf(-1)
	for _, l := range lses {
		top = max(top, l)
	}
	if math.IsInf(top, -1) {
		return 0, lses, os
	}
	var sum float64
	for _, l := range lses {
		sum += math.Exp(l - top)
	}
	lse := top + math.Log(sum)
	for s, l := range lses {
		o += math.Exp(l-lse) * os[s]
	}
	return o, lses, os
}

func TestMergeOnFreshRuns(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	base := mergeBase(t)
	sp := askRules[lessons.AskMerge]
	unevenSeen := 0
	for range testrand.Runs(120, 16) {
		cfg := randomSplitRun(rng)
		cfg.Engine = instrument.SourceCPUMirror
		tr := mirrorTrace(t, cfg)
		cc := *base
		cc.Run = cfg
		cc.BH = rng.IntN(cfg.Batch * cfg.Heads)
		cc.Row = rng.IntN(cfg.Queries())
		cc.Col = rng.IntN(cfg.D)
		cc.Question = fmt.Sprintf("What does the merge write in column %d?", cc.Col) // as a lesson asks it: the column is public
		name := fmt.Sprintf("merge of %s, batch-head %d, row %d, column %d", cfg.Key(), cc.BH, cc.Row, cc.Col)
		s, err := cc.Solve(tr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, lses, os := float64Merge(tr, cc.BH, cc.Row, cc.Col)
		// The kernel merges in float32 (expf, logf, fmaf in split order):
		// a few roundings of the largest O_s.
		big := 0.0
		for _, o := range os {
			big = max(big, math.Abs(o))
		}
		if math.Abs(s.Number-want) > 1e-5*max(big, 1e-3) {
			t.Errorf("%s: the answer %g; merging the trace's split ends in float64 gives %g", name, s.Number, want)
		}
		if splits, _ := kernels.DecodeSplits(&cfg); len(lses) != splits {
			t.Errorf("%s: %d split ends of the row; the rule makes %d splits", name, len(lses), splits)
		}
		// Between the splits' O_s, but for the kernel's float32 rounding (a
		// weight of one may round a hair past it).
		if slack := 1e-5 * max(big, 1e-3); s.Number < s.Lo-slack || s.Number > s.Hi+slack {
			t.Errorf("%s: the answer %g lies outside [%g, %g], the splits' O_s", name, s.Number, s.Lo, s.Hi)
		}
		checkEdges(t, rng, name, &cc, s, sp)
		for _, a := range junk {
			if v := cc.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" {
				t.Errorf("%s: %q graded %+v", name, a, v)
			}
		}
		// The slips a student makes: the splits averaged evenly, or weighed
		// against the largest LSE_s without the whole row's sum. Each is
		// graded wrong wherever it lies past the tolerance.
		var even, unscaled float64
		top := math.Inf(-1)
		for _, l := range lses {
			top = max(top, l)
		}
		live := 0
		for k, l := range lses {
			if !math.IsInf(l, -1) {
				even += os[k]
				unscaled += math.Exp(l-top) * os[k]
				live++
			}
		}
		even /= float64(max(live, 1))
		for what, x := range map[string]float64{"the even average": even, "weights against the largest LSE_s": unscaled} {
			if math.Abs(x-s.Number) > 1.01*cc.Allowed(s.Number) {
				if v := cc.Grade(num(x), false, s); v.Correct {
					t.Errorf("%s: %s, %g, graded right against %s", name, what, x, s.Display)
				}
				if what == "the even average" {
					unevenSeen++
				}
			}
		}
		for _, k := range []float64{3, 10, -1} {
			a := num(s.Number + k*max(cc.Allowed(s.Number), 0.01))
			if v := cc.Grade(a, false, s); !v.Correct {
				if what := leaks(&cc, s, cc.Allowed(s.Number), a, v.Hint); what != "" {
					t.Errorf("%s: the hint to %s gives away %s: %q", name, a, what, v.Hint)
				}
			}
		}
	}
	if unevenSeen == 0 {
		t.Error("no run's splits were weighed unevenly enough to tell the even average from the merge: draw wider runs")
	}
}

// NaN, infinities and junk never pass the merge, whatever the answer; an
// answer typed with a comma for the point is told so.
func TestMergeNeverAcceptsNaN(t *testing.T) {
	t.Parallel()
	c := mergeBase(t)
	for _, x := range []float64{0, -0.3, 2.5, 1e-30} {
		s := grading.Solution{Number: x, Display: num(x), Lo: -10, Hi: 10, Why: "between the splits' O_s"}
		for _, a := range []string{"NaN", "nan", "-NaN", "+Inf", "-inf", "∞", "", "O_0", "0.1.2"} {
			if v := c.Grade(a, false, s); v.Correct || v.Status != "invalid" || v.Hint == "" {
				t.Errorf("against %g: %q graded %+v", x, a, v)
			}
		}
		if v := c.Grade("0,25", false, s); v.Correct || !strings.Contains(v.Hint, "dot") {
			t.Errorf("against %g: 0,25 graded %+v, want the decimal point named", x, v)
		}
	}
}

// A merge directive on a run without splits, or past the run's rows and
// columns, fails to load, naming what is wrong.
func TestMergeDirectivesFail(t *testing.T) {
	t.Parallel()
	front := "---\ntitle: T\nslug: t\norder: 1\nsummary: s\nlearn:\n  - x\ntry:\n  - toy | go\n---\n\n## S\n\n"
	for body, want := range map[string]string{
		"::: checkpoint id=c preset=decode-group ask=merge row=0 col=0\nq\n:::\n":                         "split-KV run",
		"::: checkpoint id=c preset=toy ask=merge row=0 col=0\nq\n:::\n":                                  "split-KV run",
		"::: checkpoint id=c preset=decode-merge ask=merge row=1 col=0\nq\n:::\n":                         "row must be a whole number from 0 to 0",
		"::: checkpoint id=c preset=decode-merge ask=merge row=0 col=32\nq\n:::\n":                        "col must be a whole number from 0 to 31",
		"::: checkpoint id=c preset=decode-merge ask=merge row=0\nq\n:::\n":                               "needs col=",
		"::: checkpoint id=c preset=decode-merge ask=merge row=0 col=1 bh=4\nq\n:::\n":                    "bh must be a whole number from 0 to 3",
		"::: checkpoint id=c preset=decode-merge ask=kv-cache layers=1 kv_heads=1 d=1 tokens=1\nq\n:::\n": "not on a preset",
		"::: checkpoint id=c ask=kv-cache layers=1 kv_heads=1 d=1 tokens=1 bytes=3\nq\n:::\n":             "bytes must be 1 (fp8), 2 (bf16) or 4",
		"::: checkpoint id=c ask=decode-intensity heads=6 kv_heads=4\nq\n:::\n":                           "kv_heads must divide heads",
		"::: checkpoint id=c ask=decode-splits kv_heads=8\nq\n:::\n":                                      "needs n=",
	} {
		_, err := lessons.Load(fstest.MapFS{"course/a.md": {Data: []byte(front + body)}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q loads or fails otherwise: %v; want %q", body, err, want)
		}
	}
}

// The lesson's merge checkpoint: the numbers its question gives are the
// trace's (the run is one only the CPU mirror takes, so every engine steps
// that trace), and the answer a student works out from them, to the six
// digits they are given in, is graded right with half the tolerance to
// spare; the even average and the unscaled weights are graded wrong.
func TestMergeCheckpointOfTheLesson(t *testing.T) {
	t.Parallel()
	sc := gradeCourse(t, "merge-o")
	c, s := sc.c, sc.s
	if err := launch.ValidateTraced(&c.Run); err == nil {
		t.Fatalf("the GPU runs %s: its trace would not be the mirror's the question quotes", c.Run.Key())
	}
	tr := traceOf(t, engines(t), c.Run)
	if tr.H.Source != instrument.SourceCPUMirror {
		t.Fatalf("the merge's run comes from %v, not the CPU mirror", tr.H.Source)
	}
	_, lses, os := float64Merge(tr, c.BH, c.Row, c.Col)
	if len(lses) != 2 {
		t.Fatalf("the lesson merges two splits by hand; its run has %d", len(lses))
	}
	// The question's numbers, as the page shows them.
	shown := func(tok string) float64 {
		t.Helper()
		txt, err := lessons.Figure(tok)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(txt, 64)
		if err != nil {
			t.Fatalf("%s reads %q", tok, txt)
		}
		return v
	}
	text := lessonText(t, "course/15-inference.md")
	var l, o [2]float64
	for k := range 2 {
		lt := fmt.Sprintf("split decode-merge bh=%d row=%d s=%d lse", c.BH, c.Row, k)
		ot := fmt.Sprintf("split decode-merge bh=%d row=%d s=%d o=%d", c.BH, c.Row, k, c.Col)
		for _, tok := range []string{lt, ot} {
			if !strings.Contains(text, "{{"+tok+"}}") {
				t.Errorf("the lesson does not quote {{%s}}", tok)
			}
		}
		l[k], o[k] = shown(lt), shown(ot)
		if math.Abs(l[k]-lses[k]) > 5e-6*math.Abs(lses[k]) || math.Abs(o[k]-os[k]) > 5e-6*math.Abs(os[k]) {
			t.Errorf("split %d: the question gives LSE %g and O %g; the trace holds %g and %g", k, l[k], o[k], lses[k], os[k])
		}
	}
	top := max(l[0], l[1])
	lse := top + math.Log(math.Exp(l[0]-top)+math.Exp(l[1]-top))
	student := math.Exp(l[0]-lse)*o[0] + math.Exp(l[1]-lse)*o[1]
	if d := math.Abs(student - s.Number); d > c.Allowed(s.Number)/2 {
		t.Errorf("from the question's digits a student gets %g, %g from the answer %s: more than half the tolerance %g", student, d, s.Display, c.Allowed(s.Number))
	}
	for what, x := range map[string]float64{
		"the even average":                  (o[0] + o[1]) / 2,
		"weights against the largest LSE_s": math.Exp(l[0]-top)*o[0] + math.Exp(l[1]-top)*o[1],
		"weights from the LSEs' own sizes":  (l[0]*o[0] + l[1]*o[1]) / (l[0] + l[1]),
	} {
		if v := c.Grade(num(x), false, s); v.Correct {
			t.Errorf("%s, %g, graded right against %s", what, x, s.Display)
		}
	}
	// The reveal: split 1's LSE is the larger and O lies nearer O_1; and
	// decode_group on the same inputs writes the same O to within a
	// millionth in every column.
	if !(l[1] > l[0] && math.Abs(s.Number-o[1]) < math.Abs(s.Number-o[0])) {
		t.Errorf("LSE_0 %g, LSE_1 %g, O_0 %g, O_1 %g, O %g: the reveal says split 1 weighs more and O lies nearer O_1", l[0], l[1], o[0], o[1], s.Number)
	}
	group := c.Run
	group.Variant = instrument.VariantDecodeGroup
	group.Engine = instrument.SourceCPUMirror
	gt := traceOf(t, engines(t), group)
	worst := 0.0
	for _, split := range tr.Steps {
		if split.Kind != instrument.KindEpilogue {
			continue
		}
		for _, g := range gt.Steps {
			if g.Kind == instrument.KindEpilogue && g.BH == split.BH && g.I == split.I {
				for k := range split.O {
					worst = max(worst, math.Abs(float64(split.O[k]-g.O[k])))
				}
			}
		}
	}
	if worst == 0 || worst > 1e-6 {
		t.Errorf("decode_split's and decode_group's O differ by up to %g; the reveal says within a millionth (and they are two walks)", worst)
	}
	if !strings.Contains(text, "within a millionth in every column") {
		t.Error("the reveal no longer says how near decode_group's O is: check the claim it makes instead here")
	}
}

// TestMergeCheckpointHoldsTheMerge: the merge checkpoint's widget keeps the
// row's merge back (merge.bh.row.step.id in its frame's URL) from the
// q-tile's first merge step, after both splits' ends (whose LSE_s and O_s
// the question quotes), at the step the lesson tells the student not to
// step to, and its answer releases it.
func TestMergeCheckpointHoldsTheMerge(t *testing.T) {
	t.Parallel()
	sc := gradeCourse(t, "merge-o")
	c := sc.c
	i, from, lastEnd := c.Row/c.Run.Br, 0, 0
	for k, st := range kernels.Schedule(&c.Run) {
		if st.BH != c.BH || st.I != i {
			continue
		}
		switch {
		case st.Kind == instrument.KindSplitEnd:
			lastEnd = k + 1
		case st.Kind == instrument.KindMerge && st.J == 0:
			from = k + 1
		}
	}
	if from == 0 || lastEnd == 0 || from <= lastEnd {
		t.Fatalf("batch-head %d: its split ends end at step %d and its merge starts at step %d", c.BH, lastEnd, from)
	}
	want := lessons.Hold{BH: c.BH, Row: c.Row, Step: from, Of: lessons.HoldMerge, By: c.ID}
	if want.String() != fmt.Sprintf("merge.%d.%d.%d.%s", c.BH, c.Row, from, c.ID) {
		t.Fatalf("the hold is written %q", want.String())
	}
	if text := lessonText(t, "course/15-inference.md"); !strings.Contains(text, fmt.Sprintf("(steps %d to", from)) {
		t.Errorf("the lesson does not tell the student the merge starts at step %d", from)
	}
	l, _ := course(t).Lesson(c.Lesson)
	held := 0
	for _, w := range l.Widgets {
		if w.Kind != lessons.WidgetStepper || w.Run.Key() != c.Run.Key() {
			continue
		}
		held++
		if !slices.Contains(w.Holds, want) || !strings.Contains(w.Src(), want.String()) || !slices.Contains(w.AskedBy, c.ID) {
			t.Errorf("widget %s holds %v (%s, released by %v), want %v released by %s", w.ID, w.Holds, w.Src(), w.AskedBy, want, c.ID)
		}
	}
	if held == 0 {
		t.Fatal("no stepper of the merge's run on its page")
	}
}

// Split figures read the split ends of a mirror-only run; a run the GPU
// takes, a missing field or a row past the run are refused.
func TestSplitFigures(t *testing.T) {
	t.Parallel()
	tr := traceOf(t, engines(t), mustConfig(t, lessons.Runs["decode-merge"].Query))
	seen := 0
	for _, r := range tr.Steps {
		if r.Kind != instrument.KindSplitEnd || r.BH != 2 {
			continue
		}
		seen++
		lse, err := lessons.FigureNumber(fmt.Sprintf("split decode-merge bh=2 row=0 s=%d lse", r.J))
		o, err2 := lessons.FigureNumber(fmt.Sprintf("split decode-merge bh=2 row=0 s=%d o=5", r.J))
		if err != nil || err2 != nil || float32(lse) != r.LSE[0] || float32(o) != r.O[5] {
			t.Errorf("split %d: figures %g, %g (%v, %v); the trace holds %g, %g", r.J, lse, o, err, err2, r.LSE[0], r.O[5])
		}
	}
	if seen != 2 {
		t.Errorf("head 2 of decode-merge ends %d splits, want 2", seen)
	}
	for tok, want := range map[string]string{
		"split decode-split bh=0 row=0 s=0 lse":        "the GPU runs preset",
		"split fast-real-tiles bh=0 row=0 s=0 lse":     "the GPU runs preset",
		"split decode-merge bh=0 row=0 lse":            "want {{split",
		"split decode-merge bh=0 row=0 s=0":            "want {{split",
		"split decode-merge bh=0 row=0 o=1 lse":        "given twice",
		"split decode-merge bh=0 row=0 x=1 lse":        "takes bh=, row=, s=",
		"split decode-merge bh=0 bh=0 s=0 lse":         "given twice",
		"split decode-merge bh=9 row=0 s=0 lse":        "batch-heads",
		"split decode-merge bh=0 row=0 s=9 lse":        "no end of split 9",
		"split decode-merge bh=0 row=0 s=0 o=32":       "d = 32",
		"split decode-chunk-causal bh=0 row=0 s=0 lse": "no end of split 0",
		"split nope bh=0 row=0 s=0 lse":                "unknown preset",
	} {
		if _, err := lessons.Figure(tok); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("{{%s}}: %v, want an error saying %q", tok, err, want)
		}
	}
}

// The lesson's merge run is one only the CPU mirror takes, as its caption
// says (the GPU's compiled decode tiles are d = 64 and 128), so that its
// question may quote its numbers; its first runs are the H100's recordings.
func TestDecodePresetsAreTheMirrors(t *testing.T) {
	t.Parallel()
	r := engines(t)
	for name, mirror := range map[string]bool{"decode-merge": true, "decode-chunk-causal": true, "decode-group": false, "decode-split": false} {
		c := mustConfig(t, lessons.Runs[name].Query)
		if gpu := launch.ValidateTraced(&c) == nil; gpu == mirror {
			t.Errorf("preset %s: the GPU runs it %v; lesson 15 says it comes from the %s", name, gpu, map[bool]string{true: "CPU mirror", false: "H100's recording"}[mirror])
		}
		if h := traceOf(t, r, c).H; !mirror && (h.Source != instrument.SourceRecording || !strings.Contains(h.Label, "H100")) {
			t.Errorf("preset %s comes from %v (%s), not its H100 recording: lesson 15 says it was recorded on an H100", name, h.Source, h.Label)
		}
	}
	for _, v := range []instrument.Variant{instrument.VariantDecodeGroup, instrument.VariantDecodeSplit} {
		for _, tile := range kernels.Info(v).Tiles {
			if tile.D != 64 && tile.D != 128 {
				t.Errorf("%v compiles d = %d; lesson 15 says the GPU's decode tiles are d = 64 and 128", v, tile.D)
			}
		}
	}
	text := lessonText(t, "course/15-inference.md")
	for _, said := range []string{"the GPU's compiled decode tiles are $d = 64$ and $128$", "`decode_group` on one new token, recorded on an H100"} {
		if !strings.Contains(text, said) {
			t.Errorf("lesson 15 no longer says %q: check the claim it makes instead here", said)
		}
	}
}
