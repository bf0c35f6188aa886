package lessons

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"flashstep/ladder"
)

// Figures a lesson quotes from the recordings. A lesson writes a measured
// figure as a token, replaced when the course loads, so that it says what
// the recordings say, and says it anew when they are measured again:
//
//	{{ladder RUNG d=D [causal] tflops|ms}}  a cell of the /ladder page's table
//	{{ladder-range RUNG… tflops|ms}}         the lowest and highest of those rungs over the table's shapes: "2.2 to 4.0"
//	{{ladder-range RUNG d=D tflops|ms}}      the same over one head dim, with and without the mask
//	{{bench KERNEL tflops|ms}}               a row of the ladder bench's recording by its kernel's name (its controls too)
//	{{sweep VARIANT d=D [causal] tflops|ms}} the recorded sweep at the table's N
//	{{sdpa flash|cudnn d=D [causal]}}        PyTorch's SDPA backend in TFLOP/s, as the table's rows carry it
//	{{vs-sdpa RUNG}}                         a rung's speed over SDPA's FlashAttention-2 backend, lowest to highest over the shapes
//	{{peak RUNG d=D [causal]}}               a rung's TFLOP/s as a percentage of the tensor cores' peak
//
// TFLOP/s are given to one decimal, times to three significant digits,
// ratios to two decimals, as the ladder page gives them.
var reFigure = regexp.MustCompile(`\{\{([^{}]*)\}\}`)

// fillFigures replaces every figure token of src, or says which cannot be
// read.
func fillFigures(src string) (string, error) {
	var errs []string
	out := reFigure.ReplaceAllStringFunc(src, func(tok string) string {
		v, err := Figure(strings.TrimSpace(tok[2 : len(tok)-2]))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", tok, err))
			return tok
		}
		return v
	})
	if len(errs) > 0 {
		return "", fmt.Errorf("figures: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// figureArgs is a token's words: its kind, its names, d=, causal and unit.
type figureArgs struct {
	kind   string
	names  []string
	d      int
	causal bool
	unit   string // tflops or ms; empty for the kinds that have one
}

func parseFigure(tok string) (figureArgs, error) {
	words := strings.Fields(tok)
	if len(words) == 0 {
		return figureArgs{}, fmt.Errorf("an empty figure")
	}
	a := figureArgs{kind: words[0]}
	for _, w := range words[1:] {
		switch {
		case strings.HasPrefix(w, "d="):
			d, err := strconv.Atoi(w[2:])
			if err != nil {
				return a, fmt.Errorf("d must be a whole number, got %q", w)
			}
			a.d = d
		case w == "causal":
			a.causal = true
		case w == "tflops" || w == "ms":
			a.unit = w
		default:
			a.names = append(a.names, w)
		}
	}
	return a, nil
}

// Figure is the value of one figure token (without its braces).
func Figure(tok string) (string, error) {
	a, err := parseFigure(tok)
	if err != nil {
		return "", err
	}
	t, err := LadderTable()
	if err != nil {
		return "", err
	}
	one := func() (string, error) {
		if len(a.names) != 1 {
			return "", fmt.Errorf("%s names one kernel, got %v", a.kind, a.names)
		}
		return a.names[0], nil
	}
	switch a.kind {
	case "ladder", "peak":
		name, err := one()
		if err != nil {
			return "", err
		}
		c, _, err := ladderCell(t, name, ladder.Shape{D: a.d, Causal: a.causal})
		if err != nil {
			return "", err
		}
		if a.kind == "peak" {
			return fmt.Sprintf("%.0f%%", c.TFLOPs*1e12/TensorPeakFLOPs*100), nil
		}
		return formatUnit(a.unit, c.Ms, c.TFLOPs)
	case "ladder-range":
		var lo, hi = math.Inf(1), math.Inf(-1)
		for _, name := range a.names {
			for _, sh := range t.Shapes {
				if a.d != 0 && sh.D != a.d {
					continue
				}
				c, _, err := ladderCell(t, name, sh)
				if err != nil {
					return "", err
				}
				v := c.TFLOPs
				if a.unit == "ms" {
					v = c.Ms
				}
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if len(a.names) == 0 || math.IsInf(lo, 0) {
			return "", fmt.Errorf("ladder-range names no rung with figures")
		}
		l, err := formatUnit(a.unit, lo, lo)
		if err != nil {
			return "", err
		}
		h, _ := formatUnit(a.unit, hi, hi)
		return l + " to " + h, nil
	case "bench":
		name, err := one()
		if err != nil {
			return "", err
		}
		if t.Bench == nil {
			return "", fmt.Errorf("no ladder bench recording ships")
		}
		for _, r := range t.Bench.Rows {
			if r.Kernel == name {
				return formatUnit(a.unit, r.Ms, r.TFLOPs)
			}
		}
		return "", fmt.Errorf("the ladder bench recorded no kernel %q", name)
	case "sweep":
		name, err := one()
		if err != nil {
			return "", err
		}
		if t.Sweep == nil {
			return "", fmt.Errorf("no recorded sweep ships")
		}
		for _, r := range t.Sweep.Results {
			if r.VariantName == name && r.N == ladder.N && r.D == a.d && r.Causal == a.causal && r.Ms > 0 && !r.OutOfMem {
				return formatUnit(a.unit, r.Ms, r.TFLOPs)
			}
		}
		return "", fmt.Errorf("the recorded sweep has no %s at N=%d, d=%d, causal %v", name, ladder.N, a.d, a.causal)
	case "sdpa":
		name, err := one()
		if err != nil {
			return "", err
		}
		c, _, err := ladderCell(t, "flash2_fast", ladder.Shape{D: a.d, Causal: a.causal})
		if err != nil {
			return "", err
		}
		switch name {
		case "flash":
			return fmt.Sprintf("%.1f", c.SDPAFlash), nil
		case "cudnn":
			return fmt.Sprintf("%.1f", c.SDPACuDNN), nil
		}
		return "", fmt.Errorf("sdpa is flash or cudnn, got %q", name)
	case "vs-sdpa":
		name, err := one()
		if err != nil {
			return "", err
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, sh := range t.Shapes {
			c, _, err := ladderCell(t, name, sh)
			if err != nil || c.Ratio == 0 {
				return "", fmt.Errorf("%s at d=%d: no ratio to SDPA", name, sh.D)
			}
			lo, hi = min(lo, c.Ratio), max(hi, c.Ratio)
		}
		return fmt.Sprintf("%.2f and %.2f", lo, hi), nil
	}
	return "", fmt.Errorf("unknown figure kind %q: ladder, ladder-range, bench, sweep, sdpa, vs-sdpa or peak", a.kind)
}

func formatUnit(unit string, ms, tflops float64) (string, error) {
	switch unit {
	case "tflops":
		return fmt.Sprintf("%.1f", tflops), nil
	case "ms":
		return strconv.FormatFloat(ms, 'g', 3, 64), nil
	}
	return "", fmt.Errorf("say tflops or ms")
}
