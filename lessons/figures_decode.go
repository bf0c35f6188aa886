package lessons

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
)

// Figures read from a split-KV run's trace (decode_split), as tokens:
//
//	{{split PRESET bh=B row=R s=S lse}}   split S's LSE_s for query row R of batch-head B
//	{{split PRESET bh=B row=R s=S o=C}}   its partial O_s (already divided by its own l) in column C
//
// so that a checkpoint on the merge can give the numbers it merges in its
// question, as the trace holds them, six significant digits (the stepper's
// rows table's). The trace is the CPU mirror's, and the preset must be a
// run the GPU's compiled kernels do not take: then every engine (a GPU
// server, a recording-only one, the static site's WebAssembly) steps that
// very trace, and the numbers the question gives are the ones its widget
// shows and its answer is solved from.

// splitFigureArgs is a split token's words.
type splitFigureArgs struct {
	preset          string
	bh, row, s, col int
	lse             bool
}

func parseSplitFigure(tok string) (splitFigureArgs, error) {
	words := strings.Fields(tok)
	if len(words) != 6 || words[0] != "split" {
		return splitFigureArgs{}, fmt.Errorf("want {{split PRESET bh=B row=R s=S lse|o=C}}, got %q", tok)
	}
	a := splitFigureArgs{preset: words[1], col: -1}
	seen := map[string]bool{}
	for _, w := range words[2:] {
		key := "what" // lse or o=: what the figure reads
		if w == "lse" {
			a.lse = true
		} else {
			name, val, ok := strings.Cut(w, "=")
			n, err := strconv.Atoi(val)
			if !ok || err != nil || n < 0 {
				return a, fmt.Errorf("%q: want lse, or name=WHOLE NUMBER", w)
			}
			switch name {
			case "bh":
				a.bh, key = n, name
			case "row":
				a.row, key = n, name
			case "s":
				a.s, key = n, name
			case "o":
				a.col = n
			default:
				return a, fmt.Errorf("%q: a split figure takes bh=, row=, s= and lse or o=", w)
			}
		}
		if seen[key] {
			return a, fmt.Errorf("%q: given twice", w)
		}
		seen[key] = true
	}
	for _, k := range []string{"bh", "row", "s", "what"} {
		if !seen[k] {
			return a, fmt.Errorf("%q names no %s", tok, map[string]string{"bh": "bh=", "row": "row=", "s": "s=", "what": "lse or o="}[k])
		}
	}
	return a, nil
}

var splitTraces sync.Map // preset → func() (mirrorRun, error)

// mirrorRun is a preset's run and its records (but the inputs), as the CPU
// mirror computes them.
type mirrorRun struct {
	cfg  kernels.Config
	recs []*instrument.Record
}

// mirrorSteps is preset's run as the CPU mirror computes it, once; the
// preset must be a run no GPU takes.
func mirrorSteps(preset string) (mirrorRun, error) {
	f, _ := splitTraces.LoadOrStore(preset, sync.OnceValues(func() (mirrorRun, error) {
		var out mirrorRun
		run, err := presetRun(preset)
		if err != nil {
			return out, err
		}
		out.cfg = run.Config()
		if launch.ValidateTraced(&out.cfg) == nil {
			return out, fmt.Errorf("the GPU runs preset %q: where it does, its trace is not the CPU mirror's, and a figure read from the mirror could disagree with the widget; name a run of a shape only the mirror takes", preset)
		}
		err = kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error {
			if r.Kind != instrument.KindInputs {
				out.recs = append(out.recs, r)
			}
			return nil
		})
		return out, err
	}))
	return f.(func() (mirrorRun, error))()
}

// SplitFigure is the value a split token names.
func SplitFigure(tok string) (float32, error) {
	a, err := parseSplitFigure(tok)
	if err != nil {
		return 0, err
	}
	m, err := mirrorSteps(a.preset)
	if err != nil {
		return 0, err
	}
	recs, c := m.recs, m.cfg
	if a.bh >= c.Batch*c.Heads || a.row >= c.Queries() || a.col >= c.D {
		return 0, fmt.Errorf("%q: preset %q has %d batch-heads, %d query rows and d = %d", tok, a.preset, c.Batch*c.Heads, c.Queries(), c.D)
	}
	i, row := a.row/c.Br, a.row%c.Br
	for _, r := range recs {
		if r.Kind != instrument.KindSplitEnd || r.BH != a.bh || r.I != i || r.J != a.s {
			continue
		}
		if a.lse {
			return r.LSE[row], nil
		}
		return r.O[row*c.D+a.col], nil
	}
	return 0, fmt.Errorf("%q: preset %q's trace has no end of split %d for query row %d of batch-head %d", tok, a.preset, a.s, a.row, a.bh)
}

func splitText(tok string) (string, error) {
	v, err := SplitFigure(tok)
	if err != nil {
		return "", err
	}
	return g6(v), nil
}

// A paged run's block table, as a token:
//
//	{{page PRESET b=B j=J}}   the page holding kv-tile J of batch row B (kernels.PageOf)
//
// the page the stepper's block table shows, and the kernel reads, for
// that kv-tile: a rule of the run's shape and seed, so any engine's trace
// of the preset reads the same page.
func pageFigure(tok string) (int, error) {
	words := strings.Fields(tok)
	if len(words) != 4 || words[0] != "page" {
		return 0, fmt.Errorf("want {{page PRESET b=B j=J}}, got %q", tok)
	}
	var b, j = -1, -1
	for _, w := range words[2:] {
		name, val, ok := strings.Cut(w, "=")
		n, err := strconv.Atoi(val)
		if !ok || err != nil || n < 0 {
			return 0, fmt.Errorf("%q: want b= or j= a whole number", w)
		}
		switch {
		case name == "b" && b < 0:
			b = n
		case name == "j" && j < 0:
			j = n
		default:
			return 0, fmt.Errorf("%q: a page figure takes b= and j=, once each", w)
		}
	}
	if b < 0 || j < 0 {
		return 0, fmt.Errorf("%q names no b= or no j=", tok)
	}
	run, err := presetRun(words[1])
	if err != nil {
		return 0, err
	}
	c := run.Config()
	if !kernels.Info(c.Variant).Paged {
		return 0, fmt.Errorf("%q: preset %q is a run of %s, which reads no block table", tok, words[1], c.Variant)
	}
	if b >= c.Batch || j >= c.Tc() {
		return 0, fmt.Errorf("%q: preset %q has %d batch rows of %d kv-tiles", tok, words[1], c.Batch, c.Tc())
	}
	return kernels.PageOf(&c, b, j), nil
}
