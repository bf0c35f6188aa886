package grading_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"flashstep/grading"
	"flashstep/internal/testrand"
)

// junk is never an answer, to any question.
var junk = []string{"", "   ", "NaN", "nan", "-NaN", "Inf", "+Inf", "-Inf", "inf", "−inf", "Infinity", "-infinity",
	"1e999", "-1e999", "banana", "12,5,3", "1..2", "--1", "1/2", "e", "∞", "−∞", "🙂", "½", "1e", "NaN%", "inf×", "×", "%", "SM"}

func key() grading.Solution {
	return grading.Solution{Number: 0.5, Choice: "b", Tiles: []string{"0,1", "1,2"}, Display: "the answer", Step: 7, Explain: "why it is",
		Lo: 0, Hi: 1, Why: "it lies between 0 and 1"}
}

// questions are one of each kind, with hints that say which kind.
func questions() map[string]grading.Question {
	k := key()
	numberHint := func(float64) string { return "work the number out" }
	choiceHint := func(string) string { return "apply the rule" }
	q := map[string]grading.Question{
		"tiles":  &grading.Tiles{Key: k, Rows: 2, Cols: 3, WrongHint: "mark by the rule", AddedHint: "(lesson)", Widget: "w"},
		"choice": &grading.Choice{Key: k, Options: []grading.Option{{Value: "a"}, {Value: "b"}, {Value: "c"}}, WrongHint: choiceHint, AddedHint: "(lesson)", Widget: "w"},
	}
	for _, u := range []grading.Unit{grading.Plain, grading.Bytes, grading.Percent, grading.Times, grading.SM, grading.Nanoseconds} {
		for _, tol := range []grading.Tolerance{grading.Whole(), grading.Absolute(0.01), grading.Relative(0.02), grading.SmallValue(0.01)} {
			q["number in "+string(u)+" "+tol.Says(u)] = &grading.Number{Key: k, Tolerance: tol, Unit: u, WrongHint: numberHint, AddedHint: "(lesson)", Widget: "w"}
		}
	}
	return q
}

// TestJunkNeverPasses: NaN, ±Inf, empty and junk are invalid, with a hint
// and nothing of the answer, for every kind of question and unit; a reveal
// shows the answer whatever was typed.
func TestJunkNeverPasses(t *testing.T) {
	t.Parallel()
	for name, q := range questions() {
		for _, a := range junk {
			if v := q.Grade(a, false); v.Correct || v.Status != grading.StatusInvalid || v.Hint == "" || v.Answer != "" || v.Explanation != "" || v.Step != 0 {
				t.Errorf("%s: %q graded %+v, want invalid with a hint and no answer", name, a, v)
			}
		}
		for _, a := range []string{"banana", "", "b", "0.5"} {
			v := q.Grade(a, true)
			if v.Status != grading.StatusRevealed || v.Correct || v.Answer != "the answer" || v.Explanation != "why it is" || v.Step != 7 || v.Widget != "w" || v.Hint != "" {
				t.Errorf("%s: a reveal after %q: %+v", name, a, v)
			}
		}
	}
}

// TestNumber: the units a number may be typed with, the plausible bounds,
// whole numbers, a comma for a decimal point, and what a wrong number's
// verdict holds.
func TestNumber(t *testing.T) {
	t.Parallel()
	k := key()
	k.Number, k.Lo, k.Hi, k.Why = 4.5, 0, 100, "it lies between 0 and 100"
	q := func(tol grading.Tolerance, u grading.Unit) *grading.Number {
		return &grading.Number{Key: k, Tolerance: tol, Unit: u, WrongHint: func(x float64) string { return "work it out" }, AddedHint: "(lesson)", Widget: "w"}
	}
	for _, c := range []struct {
		q       *grading.Number
		answers []string
	}{
		{q(grading.Relative(0.02), grading.Times), []string{"4.5", " 4.5× ", "4.5x", "4.5 X", "4.5xx"}},
		{q(grading.Relative(0.02), grading.Percent), []string{"4.5", "4.5%", "4.5 %"}},
		{q(grading.Relative(0.02), grading.Bytes), []string{"4.5", "4.5 bytes", "4.5B", "4.5 B"}},
		{q(grading.Absolute(0.01), grading.Plain), []string{"4.5", "4.509", "4.491", "4 .5", "+4.5"}},
		{q(grading.Absolute(10), grading.Nanoseconds), []string{"4.5", "4.5 ns", "4.5ns", " 14.5 ns ", "-5.5ns"}},
	} {
		for _, a := range c.answers {
			if v := c.q.Grade(a, false); !v.Correct || v.Status != grading.StatusCorrect || v.Answer != k.Display || v.Explanation != k.Explain || v.Step != k.Step || v.Widget != "w" || v.Hint != "" {
				t.Errorf("%s in %q: %q graded %+v", c.q.Tolerance.Says(c.q.Unit), c.q.Unit, a, v)
			}
		}
	}
	k.Number = 3
	sm := &grading.Number{Key: k, Tolerance: grading.Whole(), Unit: grading.SM}
	for a, status := range map[string]string{"3": grading.StatusCorrect, "SM 3": grading.StatusCorrect, "sm3": grading.StatusCorrect, "SM 3.0": grading.StatusCorrect,
		"3.5": grading.StatusInvalid, "SM 4": grading.StatusWrong, "−1": grading.StatusInvalid, "3 %": grading.StatusInvalid} {
		if v := sm.Grade(a, false); v.Status != status {
			t.Errorf("SM 3: %q graded %+v, want %s", a, v, status)
		}
	}
	if v := sm.Grade("4", false); v.Hint != "Not quite." {
		t.Errorf("a wrong number without a hint of its own: %+v", v)
	}

	k.Number = 4.5
	abs := q(grading.Absolute(0.01), grading.Plain)
	for a, want := range map[string]string{
		"4,5":   `"4,5": write the decimal point as a dot, e.g. 4.5.`,
		"150":   "150 cannot be right: it lies between 0 and 100.",
		"−2":    "−2 cannot be right: it lies between 0 and 100.",
		"inf":   "Infinity is not the answer here: type a finite number.",
		"":      "Type a number first.",
		"5":     "work it out (lesson)",
		"4.489": "work it out (lesson)",
	} {
		if v := abs.Grade(a, false); v.Hint != want || v.Answer != "" || v.Explanation != "" {
			t.Errorf("%q graded %+v, want the hint %q and no answer", a, v, want)
		}
	}
	// Within the tolerance is right even just past a plausible bound (a
	// float32 p of 1.0000001).
	k.Number, k.Lo, k.Hi = 1, 0, 1
	if v := (&grading.Number{Key: k, Tolerance: grading.SmallValue(0.01)}).Grade("1.0000001", false); !v.Correct {
		t.Errorf("1.0000001 against 1, bounded by 1: %+v", v)
	}
	if x, why := abs.Read(" −4.5 "); x != -4.5 || why != "" {
		t.Errorf("Read(−4.5) = %g, %q", x, why)
	}
	if x, why := q(grading.Relative(0.02), grading.Times).Read("4.5×"); x != 4.5 || why != "" {
		t.Errorf("Read(4.5×) = %g, %q", x, why)
	}
	for _, a := range junk {
		if _, why := abs.Read(a); why == "" {
			t.Errorf("Read(%q) reads a number", a)
		}
	}
}

// TestChoice: the right option passes with spaces around it, another
// option is wrong with the question's hint, and what is no option is
// invalid.
func TestChoice(t *testing.T) {
	t.Parallel()
	q := questions()["choice"].(*grading.Choice)
	var picked []string
	q.WrongHint = func(p string) string { picked = append(picked, p); return "apply the rule" }
	if v := q.Grade("  b ", false); !v.Correct || v.Answer != "the answer" {
		t.Errorf("the right option: %+v", v)
	}
	for _, a := range []string{"a", "c"} {
		if v := q.Grade(a, false); v.Correct || v.Status != grading.StatusWrong || v.Hint != "apply the rule (lesson)" || v.Answer != "" || v.Explanation != "" {
			t.Errorf("the wrong option %q: %+v", a, v)
		}
	}
	if !slices.Equal(picked, []string{"a", "c"}) {
		t.Errorf("the hint was asked about %v, want the options picked", picked)
	}
	for a, want := range map[string]string{"B": `"B" is not one of the options; pick one of the 3.`, "": "Pick one of the options first.",
		strings.Repeat("x", 30): `"xxxxxxxxxxxxxxxxxxxxxxxx…" is not one of the options; pick one of the 3.`} {
		if v := q.Grade(a, false); v.Status != grading.StatusInvalid || v.Hint != want {
			t.Errorf("%q graded %+v, want invalid: %s", a, v, want)
		}
	}
	q.WrongHint, q.AddedHint = nil, ""
	if v := q.Grade("a", false); v.Hint != "Not that one." {
		t.Errorf("a wrong option without a hint of its own: %+v", v)
	}
}

// TestTiles: the right tiles pass in any order and spelling, once or
// twice; one tile more or less fails, every wrong set with the same hint;
// a tile off the grid, or written otherwise than the grid writes it, is
// invalid; "none" is the empty set.
func TestTiles(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	q := questions()["tiles"].(*grading.Tiles)
	grid := []string{"0,0", "0,1", "0,2", "1,0", "1,1", "1,2"}
	spell := func(ts []string) string {
		if len(ts) == 0 {
			return []string{"none", "None", " NONE "}[rng.IntN(3)]
		}
		ts = slices.Clone(ts)
		rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
		if rng.IntN(2) == 0 {
			ts = append(ts, ts[0]) // a tile twice
		}
		return strings.Join(ts, []string{";", "; ", " ", " ; "}[rng.IntN(4)])
	}
	for range testrand.Runs(50, 10) {
		right := []string{}
		for _, tile := range grid {
			if rng.IntN(2) == 0 {
				right = append(right, tile)
			}
		}
		q.Key.Tiles = right
		if a := spell(right); !q.Grade(a, false).Correct {
			t.Errorf("the right tiles %v as %q graded wrong", right, a)
		}
		for _, flip := range grid {
			var ts []string
			if slices.Contains(right, flip) {
				ts = slices.DeleteFunc(slices.Clone(right), func(x string) bool { return x == flip })
			} else {
				ts = append(slices.Clone(right), flip)
			}
			a := spell(ts)
			if v := q.Grade(a, false); v.Correct || v.Status != grading.StatusWrong || v.Hint != "mark by the rule (lesson)" || v.Answer != "" {
				t.Errorf("%q against %v graded %+v", a, right, v)
			}
		}
	}
	for _, a := range []string{"2,0", "0,3", "01,1", "0,+1", "-0,1", "0, 1", "0,1,2", "0;1", "(0,1)", "none;0,1"} {
		if v := q.Grade(a, false); v.Status != grading.StatusInvalid || !strings.Contains(v.Hint, "is not a tile of this 2×3 grid") {
			t.Errorf("%q graded %+v, want invalid: not a tile of the grid", a, v)
		}
	}
	if v := q.Grade("", false); v.Status != grading.StatusInvalid || !strings.HasPrefix(v.Hint, "Mark the tiles first") {
		t.Errorf("no tiles: %+v", v)
	}
	if ts, why := q.Read(" 1,2; 0,0 1,2 "); !slices.Equal(ts, []string{"0,0", "1,2"}) || why != "" {
		t.Errorf("Read: %v, %q", ts, why)
	}
	q.Key.Tiles, q.WrongHint, q.AddedHint = nil, "", ""
	if v := q.Grade("none", false); !v.Correct {
		t.Errorf("none against no tiles: %+v", v)
	}
	if v := q.Grade("0,0", false); v.Hint != "Not quite." {
		t.Errorf("a wrong set without a hint of its own: %+v", v)
	}
}

// A hint never depends on the key: the same wrong answer against another
// key gets the same hint, so that trying answers tells nothing but wrong.
func TestHintsIgnoreTheKey(t *testing.T) {
	t.Parallel()
	for name, q := range questions() {
		answer := map[string]string{"choice": "a", "tiles": "0,0"}[name]
		if answer == "" {
			answer = "0.8" // wrong or invalid by every rule, within the bounds
		}
		before := q.Grade(answer, false)
		switch q := q.(type) {
		case *grading.Number:
			q.Key.Number, q.Key.Hi = 9, math.Inf(1)
		case *grading.Choice:
			q.Key.Choice = "c"
		case *grading.Tiles:
			q.Key.Tiles = []string{"1,1"}
		}
		after := q.Grade(answer, false)
		if before.Status == grading.StatusWrong && after.Status == grading.StatusWrong && before.Hint != after.Hint {
			t.Errorf("%s: the hint to %q moves with the key:\n%q\n%q", name, answer, before.Hint, after.Hint)
		}
	}
}

// TestNanoseconds: a length of time read off a timeline, within ±10 ns:
// right to the edge of the tolerance on both sides, typed with its unit
// or without, wrong just past it, invalid below 0 or past the longest it
// can be, and the rule said in ns.
func TestNanoseconds(t *testing.T) {
	t.Parallel()
	k := key()
	k.Number, k.Lo, k.Hi, k.Why = 365, 0, 1021, "no more of a span can be covered than the span lasted"
	q := &grading.Number{Key: k, Tolerance: grading.Absolute(10), Unit: grading.Nanoseconds, WrongHint: func(float64) string { return "add the parts" }}
	for a, status := range map[string]string{
		"365": grading.StatusCorrect, "365 ns": grading.StatusCorrect, "365ns": grading.StatusCorrect, "365.4": grading.StatusCorrect,
		"375": grading.StatusCorrect, "355": grading.StatusCorrect, "374.999": grading.StatusCorrect, "355.001 ns": grading.StatusCorrect,
		"375.001": grading.StatusWrong, "354.999 ns": grading.StatusWrong, "376": grading.StatusWrong, "354": grading.StatusWrong,
		"188": grading.StatusWrong, "426": grading.StatusWrong, "0": grading.StatusWrong,
		"−1": grading.StatusInvalid, "1022 ns": grading.StatusInvalid, "365 µs": grading.StatusInvalid, "ns": grading.StatusInvalid,
	} {
		if v := q.Grade(a, false); v.Status != status {
			t.Errorf("365 ns ± 10: %q graded %+v, want %s", a, v, status)
		}
	}
	if got := q.Tolerance.Says(q.Unit); got != "in ns, within ±10 ns" {
		t.Errorf("the rule in words: %q", got)
	}
}
