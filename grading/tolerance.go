package grading

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tolerance is how far from the true value a numeric answer may lie and be
// graded right. Which one a question takes is decided by what the quantity
// is; the constructors below are the rules, each with the reason for it:
//
//   - Whole: a count (of records, an SM's number), exactly.
//   - Absolute(tol): ±tol, whatever the value's size. For a score, a logit
//     such as the running max m: softmax does not change when every score
//     moves by the same amount, and an error δ in m scales every weight by
//     e^δ, so an error counts the same at 0.3 as at 300 (float32's spacing
//     at 300 is 3e-5, so ±0.01 stays reachable). And for a sum that is at
//     least 1, as the running sum l is (the row's largest score adds
//     exactly 1), where ±0.01 is never more than 1% of it. And for a
//     length of time read off a timeline (in Nanoseconds), whose reading
//     errs by the same few ns however long the span is.
//   - Relative(tol): tol × |value|. For bytes, ratios and percentages,
//     whose size is the point: 1% of a megabyte is a kilobyte.
//   - SmallValue(tol): within SmallValueRel of the value and never more
//     than ±tol from it, the smaller of the two. For a value in [0, 1] or
//     near it (α, p, a softmax weight), where a tiny value is still a
//     value: α = 1.6e-37 says the max jumped by 85, and 0, 1e-36 or 0.009
//     say something else. 2% is an error of 0.02 in the exponent of
//     exp(s − m), the same order as m's ±0.01; above 0.5 it is capped at
//     ±tol. Such values are computed in float32, and one that is exactly 0
//     there (α past a jump of about 104, the weight of a masked key) takes
//     any answer that rounds to 0 in float32, e.g. the true e^−110.
//
// A Tolerance is plain data, so that a question can cross between servers
// (a classroom poll) and be graded alike on the far side.
type Tolerance struct {
	Abs float64 `json:"abs,omitempty"` // at most this far from the value; 0: no absolute bound
	Rel float64 `json:"rel,omitempty"` // at most this fraction of the value from it; 0: no relative bound
	// Float32 says the value was computed in float32: a 0 stands for
	// everything that rounds to it, so it takes answers up to float32Zero.
	Float32 bool `json:"float32,omitempty"`
}

// SmallValueRel is SmallValue's relative bound: 2%.
const SmallValueRel = 0.02

// Whole is a count's rule: a whole number, exactly.
func Whole() Tolerance { return Tolerance{} }

// Absolute is ±tol, whatever the value's size.
func Absolute(tol float64) Tolerance { return Tolerance{Abs: tol} }

// Relative is tol × |value|.
func Relative(tol float64) Tolerance { return Tolerance{Rel: tol} }

// SmallValue is the smaller of SmallValueRel × |value| and ±tol, for a
// float32 value in [0, 1] or near it.
func SmallValue(tol float64) Tolerance {
	return Tolerance{Abs: tol, Rel: SmallValueRel, Float32: true}
}

// float32Zero is the largest number that rounds to 0 in float32 (ties go to
// the even 0): half the smallest subnormal, 2^−150.
const float32Zero = math.SmallestNonzeroFloat32 / 2

// whole says whether the rule asks for a whole number: it has no bound.
func (t Tolerance) whole() bool { return t.Abs == 0 && t.Rel == 0 }

// Allowed is how far from truth an answer may lie and be graded right: 0
// for a whole number.
func (t Tolerance) Allowed(truth float64) float64 {
	if t.Rel == 0 {
		return t.Abs
	}
	if truth == 0 && t.Float32 {
		return float32Zero
	}
	allowed := t.Rel * math.Abs(truth)
	if t.Abs > 0 {
		allowed = min(allowed, t.Abs)
	}
	return allowed
}

// Says is the rule in words, as the page shows it beside the answer's box;
// u is what the number is counted in.
func (t Tolerance) Says(u Unit) string {
	pct := func(f float64) string { return strconv.FormatFloat(f*100, 'g', -1, 64) + "%" }
	abs := strconv.FormatFloat(t.Abs, 'g', -1, 64)
	switch {
	case t.whole():
		return "a whole number, exactly"
	case t.Rel == 0 && u == Nanoseconds:
		return "in ns, within ±" + abs + " ns"
	case t.Rel == 0:
		return "within ±" + abs
	case t.Abs > 0:
		return fmt.Sprintf("within %s of the kernel's value and at most ±%s from it (write a tiny value with its exponent, as 3.2e-9)", pct(t.Rel), abs)
	}
	switch u {
	case Bytes:
		return "in bytes, within " + pct(t.Rel)
	case Percent:
		// A percentage's tolerance is a fraction of it, which a student
		// could take for percentage points.
		return fmt.Sprintf("in percent, within %s of the answer (%s of its value, not %s percentage points)", pct(t.Rel), pct(t.Rel), strconv.FormatFloat(t.Rel*100, 'g', -1, 64))
	}
	return "within " + pct(t.Rel) + " of the answer"
}

// Shown writes x to the precision its tolerance needs: the last digit
// shown is at most a quarter of the tolerance from x, so the revealed
// answer, typed back, is right with room to spare, and two answers the
// grading tells apart never look the same. At least three significant
// digits; a value below 10⁻³ that needs more decimals than five is written
// with its exponent and five significant digits, as the stepper's rows
// table writes it (1.6475e-37, not 0.000).
func (t Tolerance) Shown(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "−inf"
	case x == 0:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	tol := t.Allowed(x)
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

// Unit is what a number is counted in. The page shows the answer with it,
// so a student may type it too, and the grading takes it off.
type Unit string

const (
	Plain   Unit = ""        // a bare number
	Bytes   Unit = "bytes"   // 4096 bytes, or 4096 B
	Percent Unit = "percent" // 37.5%
	Times   Unit = "times"   // a ratio: 4.5×, or 4.5x
	SM      Unit = "SM"      // an SM's number: SM 17
	// Nanoseconds is a length of time in ns, as a timeline's tooltips
	// give it: 365 ns, or 365ns.
	Nanoseconds Unit = "ns"
)

// trim takes the unit off an answer typed with it.
func (u Unit) trim(answer string) string {
	switch u {
	case Bytes:
		return strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(answer, "bytes"), "B"))
	case Percent:
		return strings.TrimSpace(strings.TrimSuffix(answer, "%"))
	case Times:
		return strings.TrimSpace(strings.TrimRight(answer, "×xX"))
	case SM:
		return strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(answer, "SM"), "sm"))
	case Nanoseconds:
		return strings.TrimSpace(strings.TrimSuffix(answer, "ns"))
	}
	return answer
}
