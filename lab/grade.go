package lab

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The kernel track's grader: a student's records are held to the
// reference kernel's trace of the same run (its CPU mirror, the numbers the
// page steps), record by record; then what the kernel wrote to O and the
// LSE, on the exercise's run and on hidden random ones, to a float64
// reference. The tolerance is the loop track's (static/js/lab_grade.js):
// a kernel in float32 parts from its float32 twin by a few roundings, a
// slip by the size of a number.
const (
	REL = 1e-4
	ABS = 1e-4
)

// Within says whether y matches k, with scale the size of the row k comes
// from. NaN never matches; ±∞ matches only itself.
func Within(y, k, scale float64) bool {
	if math.IsNaN(y) || math.IsNaN(k) {
		return false
	}
	if math.IsInf(k, 0) || math.IsInf(y, 0) {
		return y == k
	}
	return math.Abs(y-k) <= REL*math.Abs(k)+ABS*scale
}

// ScaleOf is the size of the row ks: its largest finite |value|, at least
// 1e-30 (the scale Within takes).
func ScaleOf(ks []float64) float64 {
	s := 1e-30
	for _, k := range ks {
		if !math.IsInf(k, 0) && !math.IsNaN(k) {
			s = math.Max(s, math.Abs(k))
		}
	}
	return s
}

// Miss is where a submission first differs: Run is the run's index (0 the
// exercise's own, then the hidden ones), BH/I/J/Row the place (J −1: the
// end, O and the LSE), Quantity "m", "l", "O", "LSE" or "" (a record that
// is missing or extra, said in Message), X the element of O.
type Miss struct {
	Run, BH, I, J, Row int
	Quantity           string
	X                  int
	Yours, Kernel      Number
	Message            string
}

// Number is a float64 that JSON carries whatever it holds: a student's
// value is often −∞ or NaN, which JSON's numbers cannot be, so those go as
// the strings "-Infinity", "Infinity" and "NaN" (JavaScript's names).
type Number float64

func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// GradeKernelRun holds one run's results to the mirror's trace of run c
// (records in trace order). Steps are compared only for the exercise's own
// run (steps true); O and the LSE always, to the float64 reference.
func GradeKernelRun(c kernels.Config, got KernelRun, recs []*instrument.Record, steps bool) *Miss {
	if steps {
		if m := GradeSteps(c, got.Steps, recs); m != nil {
			return m
		}
	}
	d := c.D
	// O and the LSE against the float64 reference.
	for bh := range c.Batch * c.Heads {
		in := kernels.GenerateInputs(&c, bh)
		o, lse := kernels.Reference(in, c.N, d, c.Causal)
		for row := range c.N {
			at := Miss{BH: bh, I: row / c.Br, J: -1, Row: row, X: -1}
			if y, k := float64(got.LSE[bh*c.N+row]), lse[row]; !Within(y, k, math.Max(math.Abs(k), 1)) {
				at.Quantity, at.Yours, at.Kernel = "LSE", Number(y), Number(k)
				return &at
			}
			ko := o[row*d : (row+1)*d]
			sc := ScaleOf(ko)
			for x := range d {
				if y := float64(got.O[(bh*c.N+row)*d+x]); !Within(y, ko[x], sc) {
					at.Quantity, at.X, at.Yours, at.Kernel = "O", x, Number(y), Number(ko[x])
					return &at
				}
			}
		}
	}
	return nil
}

// GradeSteps holds a kernel's records (fs_record_step) to the mirror's
// trace of run c: every row of every kv-tile the reference kernel visits,
// none that it skips.
func GradeSteps(c kernels.Config, got []StepSeen, recs []*instrument.Record) *Miss {
	d := c.D
	seen := map[[4]int]StepSeen{}
	for _, s := range got {
		seen[[4]int{s.BH, s.I, s.J, s.R}] = s
	}
	want := map[[3]int]bool{}
	for _, r := range recs {
		if r.Kind != instrument.KindFlashStep {
			continue
		}
		want[[3]int{r.BH, r.I, r.J}] = true
		lScale := ScaleOf(f64(r.L[:r.RowsValid]))
		for row := range r.RowsValid {
			at := Miss{BH: r.BH, I: r.I, J: r.J, Row: r.I*c.Br + row, X: -1}
			s, ok := seen[[4]int{r.BH, r.I, r.J, row}]
			if !ok {
				at.Message = fmt.Sprintf("your thread of row %d recorded nothing after kv-tile %d (fs_record_step)", at.Row, r.J)
				return &at
			}
			if m, k := float64(s.M), float64(r.MNew[row]); !Within(m, k, math.Max(math.Abs(k), 1)) {
				at.Quantity, at.Yours, at.Kernel = "m", Number(m), Number(k)
				return &at
			}
			if l, k := float64(s.L), float64(r.L[row]); !Within(l, k, lScale) {
				at.Quantity, at.Yours, at.Kernel = "l", Number(l), Number(k)
				return &at
			}
			ko := f64(r.O[row*d : (row+1)*d])
			sc := ScaleOf(ko)
			for x := range d {
				if y := float64(s.O[x]); !Within(y, ko[x], sc) {
					at.Quantity, at.X, at.Yours, at.Kernel = "O", x, Number(y), Number(ko[x])
					return &at
				}
			}
		}
	}
	for _, s := range got {
		if !want[[3]int{s.BH, s.I, s.J}] {
			return &Miss{BH: s.BH, I: s.I, J: s.J, Row: s.I*c.Br + s.R, X: -1,
				Message: fmt.Sprintf("your kernel recorded kv-tile %d for q-tile %d, which the reference kernel skips: under the causal mask it is masked for every row of the q-tile", s.J, s.I)}
		}
	}
	return nil
}

func f64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for k, x := range xs {
		out[k] = float64(x)
	}
	return out
}

// Describe says where m is, in the student's words: "row 5, q-tile 1,
// kv-tile 0: your m is −inf, the reference kernel's 0.2413".
func (m *Miss) Describe(c kernels.Config) string {
	where := fmt.Sprintf("row %d, q-tile %d, kv-tile %d", m.Row, m.I, m.J)
	if m.J < 0 {
		where = fmt.Sprintf("row %d, the output", m.Row)
	}
	if c.Batch*c.Heads > 1 {
		where += fmt.Sprintf(", batch-head %d", m.BH)
	}
	if m.Run > 0 {
		where = fmt.Sprintf("a hidden run (N=%d, %d×%d heads, causal %v), %s", c.N, c.Batch, c.Heads, c.Causal, where)
	}
	if m.Quantity == "" {
		return strings.ToUpper(where[:1]) + where[1:] + ": " + m.Message + "."
	}
	q := m.Quantity
	if q == "O" {
		q = fmt.Sprintf("O[%d]", m.X)
	}
	theirs := "the reference kernel's"
	if m.J < 0 {
		theirs = "the float64 reference's"
	}
	return fmt.Sprintf("%s%s: your %s is %.6g, %s %.6g.", strings.ToUpper(where[:1]), where[1:], q, m.Yours, theirs, m.Kernel)
}

var errorLine = regexp.MustCompile(`student\.cu\((\d+)\): (?:catastrophic )?error`)

// FirstErrorLine is the line of the compiler's first error in log, 0 for
// none.
func FirstErrorLine(log string) int {
	if m := errorLine.FindStringSubmatch(log); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}
