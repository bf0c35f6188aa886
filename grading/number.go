package grading

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Number asks for a number, graded right within its Tolerance of
// Key.Number.
type Number struct {
	Key       Solution
	Tolerance Tolerance
	Unit      Unit // what the number is counted in, which an answer may be typed with
	// WrongHint is a wrong number's hint: how to work the number out,
	// never the number, one near it or on which side of x it lies. nil:
	// "Not quite."
	WrongHint func(x float64) string
	AddedHint string // follows every wrong answer's hint
	Widget    string // the widget whose step Key.Step is
}

// Grade judges answer against q.Key. Within the tolerance is right, even
// just past a plausible bound (a float32 p of 1.0000001); past a bound,
// and not within it, is invalid, since it cannot be right.
func (q *Number) Grade(answer string, reveal bool) Verdict {
	v, answer, done := begin(answer, reveal, q.Key, q.Widget, "Type a number first.")
	if done {
		return v
	}
	typed, x, why := q.read(answer)
	if why != "" {
		return invalid(v, why)
	}
	if math.Abs(x-q.Key.Number) <= q.Tolerance.Allowed(q.Key.Number) {
		return right(v, q.Key)
	}
	if x < q.Key.Lo || x > q.Key.Hi {
		return invalid(v, fmt.Sprintf("%s cannot be right: %s.", typed, q.Key.Why))
	}
	hint := notQuite
	if q.WrongHint != nil {
		hint = q.WrongHint(x)
	}
	return wrong(v, hint, q.AddedHint)
}

// Read is the number an answer is, its unit taken off, or why it is none.
func (q *Number) Read(answer string) (float64, string) {
	_, x, why := q.read(strings.TrimSpace(answer))
	return x, why
}

// read is Read, also returning the answer as it reads it (its unit off).
func (q *Number) read(answer string) (typed string, x float64, why string) {
	typed = q.Unit.trim(answer)
	x, why = parseNumber(typed, q.Tolerance.whole())
	return typed, x, why
}

// parseNumber reads a student's number, or says what is wrong with it: a
// minus sign may be typed as − or –, and spaces are ignored; NaN and the
// infinities are never numbers.
func parseNumber(s string, whole bool) (float64, string) {
	s = strings.NewReplacer("−", "-", "–", "-", " ", "").Replace(s)
	x, err := strconv.ParseFloat(s, 64)
	switch {
	case math.IsInf(x, 0):
		return 0, "Infinity is not the answer here: type a finite number."
	case err != nil && strings.Count(s, ",") == 1 && !strings.Contains(s, "."):
		return 0, fmt.Sprintf("%q: write the decimal point as a dot, e.g. %s.", truncate(s), strings.Replace(s, ",", ".", 1))
	case err != nil || math.IsNaN(x):
		return 0, fmt.Sprintf("%q is not a number: type digits, with a dot for the decimal point and e for a power of ten (as 2.5e-9).", truncate(s))
	case whole && x != math.Trunc(x):
		return 0, fmt.Sprintf("%s: the answer is a whole number.", s)
	}
	return x, ""
}
