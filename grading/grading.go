// Package grading owns what a student's answer is checked against and how:
// the answer key (Solution), the kinds of question (a Number held to its
// Tolerance, a Choice among options, a set of Tiles on a grid), reading an
// answer of each kind, the Verdict, and the revealed answer's digits.
//
// It knows nothing of where an answer comes from (a lesson's checkpoint
// solved from a trace, a classroom poll) nor of what the hints teach: a
// question is given its key and its hints, and grades. The course and the
// classroom grade through it, so a student is graded alike in both.
package grading

import (
	"strings"
)

// Question is one question put to a student.
type Question interface {
	// Grade judges answer against the question's key. An answer that is
	// empty, not of the question's form or out of every plausible range
	// is invalid, with a hint that says why, never a bare "wrong". With
	// reveal the answer and its explanation come back whatever was
	// answered.
	Grade(answer string, reveal bool) Verdict
}

// The forms an answer takes, as pages name them (a checkpoint's
// data-format, a poll's format).
const (
	FormatNumber = "number"
	FormatChoice = "choice"
	FormatTiles  = "tiles" // several tiles, picked on a grid
)

// A verdict's status.
const (
	StatusCorrect  = "correct"
	StatusWrong    = "wrong"
	StatusInvalid  = "invalid" // not an answer at all
	StatusRevealed = "revealed"
)

// Verdict is the grading of one answer.
type Verdict struct {
	Status      string `json:"status"` // StatusCorrect, StatusWrong, StatusInvalid or StatusRevealed
	Correct     bool   `json:"correct"`
	Hint        string `json:"hint,omitempty"`
	Explanation string `json:"explanation,omitempty"` // only once correct or revealed
	Answer      string `json:"answer,omitempty"`      // likewise
	Step        int    `json:"step,omitempty"`        // the widget's step that shows it, from 1; 0 none
	Widget      string `json:"widget,omitempty"`
}

// Solution is a question's answer key: the right answer in its form, how a
// reveal shows and explains it, and the range of plausible numbers.
type Solution struct {
	Number  float64
	Choice  string   // choice: the right option's value
	Tiles   []string // tiles: the right tiles, sorted "i,j"
	Display string   // the answer as the page shows it
	Step    int      // the step that shows the answer, from 1 as pages count; 0 if none
	Explain string   // why, with the numbers it comes from
	// Plausible bounds of a numeric answer: one outside them is invalid,
	// with Why as its hint, rather than wrong.
	Lo, Hi float64
	Why    string // why an answer outside Lo..Hi cannot be right
}

// Option is one option of a choice.
type Option struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// The hints a wrong answer gets where its question was given none.
const (
	notQuite   = "Not quite."
	notThatOne = "Not that one."
)

// begin does what every kind of question does first: a reveal shows the
// key whatever was answered, and an empty answer is none (askFirst says
// what to do). Otherwise it returns the answer without its spaces, to be
// read by the question's kind.
func begin(answer string, reveal bool, key Solution, widget, askFirst string) (v Verdict, trimmed string, done bool) {
	v = Verdict{Widget: widget}
	if reveal {
		v.Status = StatusRevealed
		show(&v, key)
		return v, "", true
	}
	trimmed = strings.TrimSpace(answer)
	if trimmed == "" {
		v.Status, v.Hint = StatusInvalid, askFirst
		return v, "", true
	}
	return v, trimmed, false
}

// show puts the answer and its explanation in v: only once it is right or
// revealed.
func show(v *Verdict, key Solution) {
	v.Explanation, v.Answer, v.Step = key.Explain, key.Display, key.Step
}

func right(v Verdict, key Solution) Verdict {
	v.Status, v.Correct = StatusCorrect, true
	show(&v, key)
	return v
}

func invalid(v Verdict, why string) Verdict {
	v.Status, v.Hint = StatusInvalid, why
	return v
}

// wrong is a wrong answer's verdict: its hint, then the hint added to
// every wrong answer of the question.
func wrong(v Verdict, hint, added string) Verdict {
	v.Status, v.Hint = StatusWrong, hint
	if added != "" {
		v.Hint += " " + added
	}
	return v
}

// truncate keeps what a hint quotes of an answer short.
func truncate(s string) string {
	if r := []rune(s); len(r) > 24 {
		return string(r[:24]) + "…"
	}
	return s
}
