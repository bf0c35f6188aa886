// Package api computes the answers of the server's read-only GET API from
// a request's query: pure functions of the query and of what ships with
// the build, each returning the value the server sends as JSON. The
// server's handlers (package web) call them, and so does the static site's
// WebAssembly (package offline), so that an answer is the same in both.
// Every bad field is a kernels.FieldErrors naming the field and its limit.
package api

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/lessons/loop"
	"flashstep/traffic"
)

// ParseRun reads a run's URL form as every API does: an unknown field
// (other than extra), or a value out of its limits, names the field.
func ParseRun(v url.Values, extra ...string) (kernels.Run, error) {
	if errs := kernels.UnknownFields(v, extra...); len(errs) > 0 {
		return kernels.Run{}, errs
	}
	return kernels.ParseRun(v)
}

// ConfigCheck is GET /api/config's answer for a valid configuration.
type ConfigCheck struct {
	OK         bool   `json:"ok"`
	Query      string `json:"query"` // canonical URL form
	TraceBytes int64  `json:"trace_bytes"`
	Records    int    `json:"records"`
	Estimate   string `json:"estimate"`
	RunsOn     string `json:"runs_on"`
	Summary    string `json:"summary"` // the run in one line
}

// Config validates a configuration and estimates its trace, so the form
// can show each field's problem and the trace size before a run. runsOn
// says where the run would come from, or refuses it (engine=gpu where
// there is none).
func Config(v url.Values, runsOn func(kernels.Run) (string, error)) (ConfigCheck, error) {
	run, err := ParseRun(v)
	if err != nil {
		return ConfigCheck{}, err
	}
	says, err := runsOn(run)
	if err != nil {
		return ConfigCheck{}, err
	}
	c := run.Config()
	return ConfigCheck{OK: true, Query: c.Values().Encode(), TraceBytes: c.TraceBytes(), Records: c.Header(instrument.SourceCPUMirror, "").Records,
		Estimate: Estimate(&c), RunsOn: says, Summary: Summary(&c)}, nil
}

// Summary is a run in one line.
func Summary(c *kernels.Config) string {
	s := fmt.Sprintf("%s · N=%d · d=%d · Br×Bc=%d×%d", c.Variant, c.N, c.D, c.Br, c.Bc)
	if c.Queries() != c.N {
		queries := fmt.Sprintf("%d queries", c.Queries())
		if c.Queries() == 1 {
			queries = "1 query"
		}
		s = fmt.Sprintf("%s · %s against N=%d keys · d=%d · Br×Bc=%d×%d", c.Variant, queries, c.N, c.D, c.Br, c.Bc)
	}
	if c.Batch*c.Heads > 1 {
		s += fmt.Sprintf(" · batch %d × %d heads", c.Batch, c.Heads)
	}
	if k := c.KVHeadCount(); k != c.Heads {
		s += fmt.Sprintf(" sharing %d K/V head%s", k, map[bool]string{false: "s", true: ""}[k == 1])
	}
	if c.Causal {
		s += " · causal"
	}
	s += fmt.Sprintf(" · %s inputs, seed %d", c.Pattern, c.Seed)
	switch {
	case c.Roles:
		s += " · timing and warp-role trace"
	case c.Timing:
		s += " · timing trace"
	}
	return s
}

// Estimate is a run's trace size, as the form shows it before a run.
func Estimate(c *kernels.Config) string {
	h := c.Header(instrument.SourceCPUMirror, "")
	return fmt.Sprintf("%s, %d records", kernels.FormatBytes(c.TraceBytes()), h.Records)
}

// Launched names the kernels a run (variant, n, d, br, bc, causal)
// launches on a GPU, so that the stepper names them without knowing any
// rung's symbols; none for a run the bench's form cannot read.
func Launched(v url.Values) []string {
	var out []string
	if !v.Has("variant") {
		return nil
	}
	if c, err := launch.ParseBenchConfig(v); err == nil {
		if p, err := launch.For(&c); err == nil {
			for _, k := range p.Kernels {
				out = append(out, k.Name)
			}
		}
	}
	return out
}

// Source is GET /api/source?variant=…: a kernel's CUDA source and its
// marked phases, which the stepper shows beside each step.
func Source(v url.Values) (any, error) {
	name := v.Get("variant")
	variant, ok := instrument.ParseVariant(name)
	if !ok {
		return nil, kernels.FieldErrors{{Field: kernels.FieldVariant, Message: fmt.Sprintf("variant must be one of the kernels (got %q)", truncateRunes(name, 24))}}
	}
	return kernels.Source(variant)
}

// MemoryGPU is the GPU a memory plan is made for: the server's, or the
// H100 the recordings come from.
type MemoryGPU struct {
	Name  string
	Bytes int64
}

// RecordingsGPU is the memory plan's GPU where there is none at hand.
var RecordingsGPU = MemoryGPU{"NVIDIA H100 80GB HBM3 (the recordings' GPU)", traffic.H100MemoryBytes}

// Memory is GET /api/memory, the memory calculator: naive against flash
// for any B, H, N, d, in the forward pass (the default) or the backward
// (pass=backward), on gpu.
func Memory(q url.Values, gpu MemoryGPU) (map[string]any, error) {
	var errs kernels.FieldErrors
	num := func(field string) int {
		n, err := strconv.Atoi(strings.TrimSpace(q.Get(field)))
		if err != nil {
			errs = append(errs, kernels.FieldError{Field: field, Message: field + " must be a whole number (got " + strconv.Quote(truncate(q.Get(field))) + ")"})
		}
		return n
	}
	b, h, n, d := num("b"), num("h"), num("n"), num("d")
	dt := instrument.DTypeF32
	switch q.Get("dtype") {
	case "", "f32":
	case "bf16":
		dt = instrument.DTypeBF16
	default:
		errs = append(errs, kernels.FieldError{Field: "dtype", Message: "dtype must be f32 or bf16 (got " + strconv.Quote(truncate(q.Get("dtype"))) + ")"})
	}
	pass, ok := traffic.ParsePass(q.Get("pass"))
	if !ok {
		errs = append(errs, kernels.FieldError{Field: "pass", Message: "pass must be " + string(traffic.PassForward) + " or " + string(traffic.PassBackward) + " (got " + strconv.Quote(truncate(q.Get("pass"))) + ")"})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	plan, err := traffic.PlanPass(pass, b, h, n, d, dt, gpu.Bytes)
	if err != nil {
		return nil, err
	}
	return map[string]any{"gpu": gpu.Name, "pass": plan.Pass, "plan": plan}, nil
}

// LoopAnswer is GET /api/loop's: the debugging lesson's loop over one
// q-tile, run correctly and with the slips named.
type LoopAnswer struct {
	Run      string         `json:"run"` // the run's query, as /step takes it
	Q        int            `json:"q"`
	BH       int            `json:"bh"`
	Br       int            `json:"br"`
	D        int            `json:"d"`
	Rows     int            `json:"rows"` // valid rows of the q-tile
	FirstRow int            `json:"first_row"`
	Correct  *loop.Trace    `json:"correct"`
	Slipped  *loop.Trace    `json:"slipped"`
	Parts    []loop.Parting `json:"parts"` // one per valid row
	Source   string         `json:"source"`
}

// Loop is GET /api/loop?<a run, as /step names it>&q=0&bh=0&slip=stale-max:
// the debugging lesson's tiled-attention loop over one q-tile twice,
// correctly and with the slips named, both runs' m, l and O after every
// kv-tile and where each row's numbers part. where says where it ran
// ("this server's CPU").
func Loop(v url.Values, where string) (*LoopAnswer, error) {
	if errs := kernels.UnknownFields(v, "q", "bh", "slip"); len(errs) > 0 {
		return nil, errs
	}
	run, err := kernels.ParseRun(v)
	var errs kernels.FieldErrors
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	whole := func(field, what string) int {
		str := strings.TrimSpace(v.Get(field))
		if str == "" {
			return 0
		}
		n, err := strconv.Atoi(str)
		if err != nil || len(str) > 9 {
			errs = append(errs, kernels.FieldError{Field: field, Message: fmt.Sprintf("%s must be a whole number (got %q)", what, str)})
			return 0
		}
		return n
	}
	q, bh := whole("q", "q, the q-tile,"), whole("bh", "bh, the batch-head,")
	slips, serr := loop.ParseSlips(v.Get("slip"))
	if serr != nil {
		errs = append(errs, kernels.FieldError{Field: "slip", Message: serr.Error()})
	}
	if len(errs) == 0 {
		if verr := loop.Validate(run, bh, q); verr != nil {
			return nil, verr
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	c := run.Config()
	ans := &LoopAnswer{Run: c.Values().Encode(), Q: q, BH: bh, Br: c.Br, D: c.D,
		Rows: min(c.Br, c.N-q*c.Br), FirstRow: q * c.Br,
		Correct: loop.Run(&c, bh, q, nil), Slipped: loop.Run(&c, bh, q, slips),
		Source: "the debugging lesson's loop on " + where + ", float32, on the run's inputs"}
	for row := range ans.Rows {
		ans.Parts = append(ans.Parts, loop.Part(ans.Correct, ans.Slipped, row, c.D))
	}
	return ans, nil
}

func truncate(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
