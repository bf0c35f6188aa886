package grading

import (
	"fmt"
	"slices"
)

// Choice asks for one of its Options, graded right when it is Key.Choice.
type Choice struct {
	Key     Solution
	Options []Option
	// WrongHint is a wrong option's hint: the rule that picks the right
	// one, never the right one. nil: "Not that one."
	WrongHint func(picked string) string
	AddedHint string // follows every wrong answer's hint
	Widget    string // the widget whose step Key.Step is
}

// Grade judges answer, an option's value, against q.Key.
func (q *Choice) Grade(answer string, reveal bool) Verdict {
	v, answer, done := begin(answer, reveal, q.Key, q.Widget, "Pick one of the options first.")
	if done {
		return v
	}
	if !slices.ContainsFunc(q.Options, func(o Option) bool { return o.Value == answer }) {
		return invalid(v, fmt.Sprintf("%q is not one of the options; pick one of the %d.", truncate(answer), len(q.Options)))
	}
	if answer == q.Key.Choice {
		return right(v, q.Key)
	}
	hint := notThatOne
	if q.WrongHint != nil {
		hint = q.WrongHint(answer)
	}
	return wrong(v, hint, q.AddedHint)
}
