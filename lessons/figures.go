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
//	{{backward KERNEL tflops|ms}}            a row of the backward bench's recording by its kernel's name: flash2_bwd_mma_bc128_d128_causal
//	{{sweep VARIANT d=D [causal] tflops|ms}} the recorded sweep at the table's N
//	{{sdpa flash|cudnn d=D [causal]}}        PyTorch's SDPA backend in TFLOP/s, as the table's rows carry it
//	{{vs-sdpa RUNG}}                         a rung's speed over SDPA's FlashAttention-2 backend, lowest to highest over the shapes
//	{{vs-cudnn RUNG}}                        the same over SDPA's cuDNN backend, timed in the same run
//	{{vs-sdpa-backward KERNEL…}}             backward kernels' speed over SDPA's FlashAttention-2 backward in the same row, lowest to highest: "0.80 to 0.90"
//	{{vs-cudnn-backward KERNEL…}}            the same over SDPA's cuDNN backward
//	{{peak RUNG d=D [causal]}}               a rung's TFLOP/s as a percentage of the tensor cores' peak
//	{{ratio FIGURE / FIGURE}}                one ladder, bench, backward or sweep figure over another: "1.6"
//	{{roles NAME …}}                         a share or a span's mean length over a recorded roles trace (figures_roles.go)
//	{{split PRESET bh=B row=R s=S lse|o=C}}  a split's LSE_s or partial O_s in a split-KV run's trace (figures_decode.go)
//	{{page PRESET b=B j=J}}                  the page of kv-tile J of batch row B in a paged run's block table (figures_decode.go)
//
// TFLOP/s are given to one decimal, times to three significant digits,
// ratios to two decimals, as the ladder page gives them; a ratio of two
// figures to one decimal, worked out from the figures unrounded.
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

// FigureNumber is the value of a ladder, bench, backward, sweep, ratio, split,
// page or roles figure token (without its braces), unrounded (a roles share in
// [0, 1]): what a lesson's claims about the recordings are checked against.
func FigureNumber(tok string) (float64, error) {
	if strings.HasPrefix(tok, "roles ") {
		v, _, err := rolesFigure(tok)
		return v, err
	}
	if strings.HasPrefix(tok, "split ") {
		v, err := SplitFigure(tok)
		return float64(v), err
	}
	if strings.HasPrefix(tok, "page ") {
		p, err := pageFigure(tok)
		return float64(p), err
	}
	if num, den, ok := strings.Cut(tok, "/"); ok {
		first, _, _ := strings.Cut(strings.TrimSpace(num), " ")
		if first != "ratio" {
			return 0, fmt.Errorf("a / only divides in a ratio figure, got %q", tok)
		}
		x, err := FigureNumber(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(num), "ratio")))
		if err != nil {
			return 0, err
		}
		y, err := FigureNumber(strings.TrimSpace(den))
		if err != nil {
			return 0, err
		}
		if y == 0 {
			return 0, fmt.Errorf("%q divides by 0", tok)
		}
		return x / y, nil
	}
	a, err := parseFigure(tok)
	if err != nil {
		return 0, err
	}
	t, err := LadderTable()
	if err != nil {
		return 0, err
	}
	ms, tflops, err := measured(t, a)
	if err != nil {
		return 0, err
	}
	switch a.unit {
	case "ms":
		return ms, nil
	case "tflops":
		return tflops, nil
	}
	return 0, fmt.Errorf("say tflops or ms")
}

// measured is the time and speed a ladder, bench, backward or sweep figure
// names.
func measured(t *ladder.Table, a figureArgs) (ms, tflops float64, err error) {
	if len(a.names) != 1 {
		return 0, 0, fmt.Errorf("%s names one kernel, got %v", a.kind, a.names)
	}
	name := a.names[0]
	switch a.kind {
	case "ladder":
		c, _, err := ladderCell(t, name, ladder.Shape{D: a.d, Causal: a.causal})
		if err != nil {
			return 0, 0, err
		}
		return c.Ms, c.TFLOPs, nil
	case "bench":
		if t.Bench == nil {
			return 0, 0, fmt.Errorf("no ladder bench recording ships")
		}
		for _, r := range t.Bench.Rows {
			if r.Kernel == name {
				return r.Ms, r.TFLOPs, nil
			}
		}
		return 0, 0, fmt.Errorf("the ladder bench recorded no kernel %q", name)
	case "backward":
		r, err := t.Backward.Row(name)
		if err != nil {
			return 0, 0, err
		}
		return r.Ms, r.TFLOPs, nil
	case "sweep":
		if t.Sweep == nil {
			return 0, 0, fmt.Errorf("no recorded sweep ships")
		}
		for _, r := range t.Sweep.Results {
			if r.VariantName == name && r.N == ladder.N && r.D == a.d && r.Causal == a.causal && r.Ms > 0 && !r.OutOfMem {
				return r.Ms, r.TFLOPs, nil
			}
		}
		return 0, 0, fmt.Errorf("the recorded sweep has no %s at N=%d, d=%d, causal %v", name, ladder.N, a.d, a.causal)
	}
	return 0, 0, fmt.Errorf("%s figures are not measured times: ladder, bench, backward or sweep", a.kind)
}

// Figure is the value of one figure token (without its braces).
func Figure(tok string) (string, error) {
	if strings.HasPrefix(tok, "roles ") {
		return rolesText(tok)
	}
	if strings.HasPrefix(tok, "split ") {
		return splitText(tok)
	}
	if strings.HasPrefix(tok, "page ") {
		p, err := pageFigure(tok)
		return strconv.Itoa(p), err
	}
	if strings.HasPrefix(tok, "ratio ") {
		x, err := FigureNumber(tok)
		if err != nil {
			return "", err
		}
		return strconv.FormatFloat(x, 'f', 1, 64), nil
	}
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
	case "bench", "backward", "sweep":
		ms, tflops, err := measured(t, a)
		if err != nil {
			return "", err
		}
		return formatUnit(a.unit, ms, tflops)
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
	case "vs-sdpa", "vs-cudnn":
		name, err := one()
		if err != nil {
			return "", err
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, sh := range t.Shapes {
			c, _, err := ladderCell(t, name, sh)
			ratio := c.Ratio
			if a.kind == "vs-cudnn" {
				ratio = 0
				if c.SDPACuDNN > 0 {
					ratio = c.TFLOPs / c.SDPACuDNN
				}
			}
			if err != nil || ratio == 0 {
				return "", fmt.Errorf("%s at %s: no ratio to SDPA's %s backend", name, shapeWords(sh), strings.TrimPrefix(a.kind, "vs-"))
			}
			lo, hi = min(lo, ratio), max(hi, ratio)
		}
		return fmt.Sprintf("%.2f and %.2f", lo, hi), nil
	case "vs-sdpa-backward", "vs-cudnn-backward":
		if a.d != 0 || a.causal || a.unit != "" {
			return "", fmt.Errorf("%s names backward kernels and nothing else, got %q", a.kind, tok)
		}
		backend := "flash"
		if a.kind == "vs-cudnn-backward" {
			backend = "cudnn"
		}
		lo, hi, err := t.Backward.VsSDPA(backend, a.names...)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%.2f to %.2f", lo, hi), nil
	}
	return "", fmt.Errorf("unknown figure kind %q: ladder, ladder-range, bench, backward, sweep, sdpa, vs-sdpa, vs-cudnn, vs-sdpa-backward, vs-cudnn-backward, peak, ratio, roles, split or page", a.kind)
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
