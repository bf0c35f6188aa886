// Package loop owns the tiled-attention loop of the debugging lesson: FlashAttention's
// loop over the kv-tiles of one q-tile, written plainly in Go with float32
// arithmetic, with a switch for each of three slips that are easy to make
// when the loop is written from its formulas. Run gives, after every kv-tile, the
// running max m, the rescale factor α as applied, the running sum l and the
// accumulator O, and the q-tile's output at the end; the lesson puts a
// slipped run beside the correct one and asks where they part.
//
// With no slips the loop is the CPU mirror's flash2 block step for step
// (the tests hold it to kernels.RunMirror); it exists apart from the mirror
// so that the mirror, the tests' oracle, never carries switches for bugs.
package loop

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Slip is one mistake the loop can be switched to make.
type Slip string

const (
	// POverwrite (a): the line that should compute the new row sum into l
	// writes it into P instead, so P·V multiplies V by the row sum, not by
	// the probabilities. (As printed, a column of row sums times V_j only
	// fits when a tile holds one key; this loop spreads each row's sum
	// over the row's columns, the nearest version that runs.)
	POverwrite Slip = "p-overwrite"
	// StaleMax (b): the previous max is updated once per q-tile, after the
	// kv loop, not once per kv-tile; inside the loop it stays −inf, so
	// α = exp(−inf − m) = 0 and every kv-tile throws away the ones before.
	StaleMax Slip = "stale-max"
	// NoDivide (c): the q-tile's output is O as accumulated, never divided
	// by l.
	NoDivide Slip = "no-divide"
)

// Slips in the order the lesson names them, (a) to (c).
var Slips = []Slip{POverwrite, StaleMax, NoDivide}

// ParseSlips reads "p-overwrite,stale-max" (or "" for none).
func ParseSlips(s string) ([]Slip, error) {
	var out []Slip
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "none" {
			continue
		}
		if !slices.Contains(Slips, Slip(name)) {
			return nil, fmt.Errorf("unknown slip %q: p-overwrite, stale-max or no-divide, separated by commas", truncate(name))
		}
		if !slices.Contains(out, Slip(name)) {
			out = append(out, Slip(name))
		}
	}
	slices.Sort(out)
	return out, nil
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 24 {
		return string(r[:24]) + "…"
	}
	return s
}

// Floats are float32s that survive JSON: −inf (m before the first tile) and
// any inf or NaN a slip makes are written as the strings JavaScript's
// Number() reads back, "Infinity", "-Infinity" and "NaN".
type Floats []float32

func (f Floats) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for k, x := range f {
		if k > 0 {
			b = append(b, ',')
		}
		switch v := float64(x); {
		case math.IsNaN(v):
			b = append(b, `"NaN"`...)
		case math.IsInf(v, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(v, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, v, 'g', -1, 32)
		}
	}
	return append(b, ']'), nil
}

var _ json.Marshaler = Floats{}

// Step is the loop's state after one kv-tile; arrays hold the q-tile's Br
// rows (O: Br×d, row-major), padding rows included.
type Step struct {
	KV    int    `json:"kv"`     // the kv-tile, from 0
	MPrev Floats `json:"m_prev"` // the max the loop rescales from
	M     Floats `json:"m"`      // the running max after the tile
	Alpha Floats `json:"alpha"`  // exp(m_prev − m), as applied
	L     Floats `json:"l"`
	O     Floats `json:"o"`
}

// Trace is one run of the loop over one q-tile.
type Trace struct {
	Slips []Slip `json:"slips"`
	Steps []Step `json:"steps"`
	Out   Floats `json:"out"` // the q-tile's output as the loop writes it
}

// Limits of one loop: the q-tile's rows × d × the kv-tiles, the numbers a
// trace holds (and the lesson's page draws).
const MaxValues = 1 << 18

// Validate checks that the loop can run q-tile q of batch-head bh of r:
// a full FlashAttention-2 run, a q-tile and batch-head that exist, and a
// trace of at most MaxValues. These are the loop's own limits, beyond a
// run's (which r, a kernels.Run, has passed).
func Validate(r kernels.Run, bh, q int) error {
	c := r.Config()
	var errs kernels.FieldErrors
	if c.Variant != instrument.VariantFlash2 {
		errs = append(errs, kernels.FieldError{Field: kernels.FieldVariant, Message: "the loop is FlashAttention's: variant must be flash2"})
	}
	if c.Timing {
		errs = append(errs, kernels.FieldError{Field: kernels.FieldMode, Message: "the loop records its numbers: mode must be full, not timing"})
	}
	if q < 0 || q >= c.Tr() {
		errs = append(errs, kernels.FieldError{Field: "q", Message: fmt.Sprintf("q is the q-tile, a whole number from 0 to %d for N=%d in tiles of Br=%d", c.Tr()-1, c.N, c.Br)})
	}
	if bh < 0 || bh >= c.Batch*c.Heads {
		errs = append(errs, kernels.FieldError{Field: "bh", Message: fmt.Sprintf("bh is the batch-head, a whole number from 0 to %d", c.Batch*c.Heads-1)})
	}
	if v := c.Tc() * (c.Br*c.D + 4*c.Br); v > MaxValues {
		errs = append(errs, kernels.FieldError{Field: kernels.FieldN, Message: fmt.Sprintf("the loop's trace would hold %d numbers (%d kv-tiles × Br=%d rows × (d=%d + 4)); at most %d: use a smaller N or d, or larger kv-tiles", v, c.Tc(), c.Br, c.D, MaxValues)})
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// float32 arithmetic, each operation rounded on its own (Go never fuses a
// float32(…) product into a multiply-add), exp in float64 rounded once: the
// same arithmetic as the CPU mirror.
func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// Run runs the loop over q-tile q of batch-head bh on c's inputs, with the
// given slips. c must be the configuration of a run that passed Validate.
func Run(c *kernels.Config, bh, q int, slips []Slip) *Trace {
	in := kernels.GenerateInputs(c, bh)
	br, bc, d, n := c.Br, c.Bc, c.D, c.N
	scale := c.Scale()
	negInf := float32(math.Inf(-1))
	r0 := q * br
	rows := min(br, n-r0)

	m := make([]float32, br)
	mPrev := make([]float32, br) // slip (b): the "previous max", refreshed only per q-tile
	l := make([]float32, br)
	o := make([]float32, br*d)
	for r := range br {
		m[r], mPrev[r] = negInf, negInf
	}
	t := &Trace{Slips: slips}
	has := func(s Slip) bool { return slices.Contains(slips, s) }

	// The kv-tiles this q-tile visits: all, or under a causal mask those
	// that hold a key at or before the q-tile's last row.
	tiles := c.Tc()
	if c.Causal {
		tiles = min(tiles, (r0+rows-1)/bc+1)
	}
	s := make([]float32, bc)
	p := make([]float32, bc)
	for j := range tiles {
		c0 := j * bc
		cols := min(bc, n-c0)
		st := Step{KV: j, MPrev: make(Floats, br), M: make(Floats, br), Alpha: make(Floats, br), L: make(Floats, br)}
		for r := range rows {
			qr := in.Q[(r0+r)*d : (r0+r+1)*d]
			// Scores of this row against the tile's keys; masked ones −inf.
			rowMax := negInf
			for col := range bc {
				s[col] = negInf
				if col < cols && !(c.Causal && c0+col > r0+r) {
					kc := in.K[(c0+col)*d : (c0+col+1)*d]
					var dot float32
					for x := range d {
						dot = float32(dot + float32(qr[x]*kc[x]))
					}
					s[col] = float32(dot * scale)
				}
				rowMax = max(rowMax, s[col])
			}
			mNew := max(m[r], rowMax)
			shift := mNew
			if shift == negInf { // nothing seen yet: exp(−inf − 0) = 0, not NaN
				shift = 0
			}
			from := m[r]
			if has(StaleMax) {
				from = mPrev[r]
			}
			alpha := exp32(from - shift)
			var rowSum float32
			for col := range bc {
				p[col] = exp32(s[col] - shift)
				rowSum = float32(rowSum + p[col])
			}
			lNew := float32(float32(alpha*l[r]) + rowSum)
			if has(POverwrite) {
				for col := range cols {
					p[col] = lNew
				}
			}
			or := o[r*d : (r+1)*d]
			for x := range d {
				acc := float32(alpha * or[x])
				for col := range cols { // padding keys have no value row
					acc = float32(acc + float32(p[col]*in.V[(c0+col)*d+x]))
				}
				or[x] = acc
			}
			st.MPrev[r], st.M[r], st.Alpha[r], st.L[r] = from, mNew, alpha, lNew
			l[r], m[r] = lNew, mNew
		}
		for r := rows; r < br; r++ { // padding rows: nothing seen
			st.MPrev[r], st.M[r] = negInf, negInf
		}
		st.O = append(Floats(nil), o...)
		t.Steps = append(t.Steps, st)
	}
	copy(mPrev, m) // where the slipped loop refreshes its "previous max": too late

	t.Out = make(Floats, br*d)
	for r := range rows {
		for x := range d {
			switch {
			case has(NoDivide):
				t.Out[r*d+x] = o[r*d+x]
			case l[r] != 0: // a row with every key masked has no output
				t.Out[r*d+x] = float32(o[r*d+x] / l[r])
			}
		}
	}
	return t
}

// Parting is where a slipped run first differs from the correct one, for
// one row of the q-tile.
type Parting struct {
	Row    int  `json:"row"`    // within the q-tile
	KV     int  `json:"kv"`     // the first kv-tile after which m, l or O differ; −1 if none does
	Output bool `json:"output"` // whether the q-tile's output differs
	// What differs first: "m", "l" or "O" (the first that does, in that order).
	What string `json:"what,omitempty"`
}

// same says two float32s are the same number; NaN is the same as NaN,
// since a slip that makes NaN where the correct loop has NaN too has not
// parted from it there.
func same(a, b float32) bool { return a == b || a != a && b != b }

func sameAll(a, b []float32) bool {
	for k := range a {
		if !same(a[k], b[k]) {
			return false
		}
	}
	return true
}

// Part compares row r (within the q-tile) of two runs of the same loop.
// The two runs do the same float32 operations until a slip changes one,
// so any difference at all is the slip's.
func Part(correct, slipped *Trace, r, d int) Parting {
	p := Parting{Row: r, KV: -1}
	for k := range min(len(correct.Steps), len(slipped.Steps)) {
		a, b := correct.Steps[k], slipped.Steps[k]
		switch {
		case !same(a.M[r], b.M[r]):
			p.What = "m"
		case !same(a.L[r], b.L[r]):
			p.What = "l"
		case !sameAll(a.O[r*d:(r+1)*d], b.O[r*d:(r+1)*d]):
			p.What = "O"
		}
		if p.What != "" {
			p.KV = a.KV
			break
		}
	}
	p.Output = !sameAll(correct.Out[r*d:(r+1)*d], slipped.Out[r*d:(r+1)*d])
	return p
}
