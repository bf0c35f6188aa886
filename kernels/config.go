package kernels

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/problem"
)

// Config is one attention run: which kernel, the problem's shape, the inputs,
// and which part of it to trace. Its URL form (Values, ParseConfig) is how
// pages, links, the websocket and lesson presets name a run.
type Config struct {
	Variant instrument.Variant
	N, D    int // sequence length, head dimension
	Br, Bc  int // q-tile rows, kv-tile columns
	Batch   int
	Heads   int
	Causal  bool
	Pattern instrument.Pattern
	Seed    uint64

	// TraceBH and TraceQ select the batch-heads and q-tiles to record; the
	// zero Range means all of them.
	TraceBH instrument.Range
	TraceQ  instrument.Range

	// Timing records only the SM and start and end times of every step of
	// every block of the grid (a GPU timeline), no arrays.
	Timing bool
	// Roles, with Timing (mode=roles): a warp-specialised rung also
	// records its warp roles' spans in every block (roles.go).
	Roles bool

	// Engine asks for where to run: instrument.SourceAny (the GPU if there
	// is one and it runs this shape, else a recording of this run, else
	// the CPU mirror), SourceGPU or SourceCPUMirror.
	Engine instrument.Source
}

// Limits of what the CPU mirror runs and what one trace may hold.
const (
	MaxN          = 4096
	MaxD          = 256
	MaxTile       = 256
	MaxBatch      = 16
	MaxHeads      = 64
	MaxTraceBytes = 32 << 20
)

// DefaultConfig is the toy run a class can read on a projector.
func DefaultConfig() Config {
	return Config{Variant: instrument.VariantFlash2, N: 8, D: 4, Br: 2, Bc: 2, Batch: 1, Heads: 1,
		Pattern: instrument.PatternNormal, Seed: 1}
}

// Tr and Tc are the numbers of q-tiles and kv-tiles.
func (c *Config) Tr() int { return ceilDiv(c.N, c.Br) }
func (c *Config) Tc() int { return ceilDiv(c.N, c.Bc) }

// Scale is the softmax scale 1/√d, rounded to float32 as the kernels use it.
func (c *Config) Scale() float32 { return float32(1 / math.Sqrt(float64(c.D))) }

// TracedBH and TracedQ resolve the selection: all when left zero.
func (c *Config) TracedBH() instrument.Range {
	if c.TraceBH == (instrument.Range{}) {
		return instrument.Range{Lo: 0, Hi: c.Batch * c.Heads}
	}
	return c.TraceBH
}

func (c *Config) TracedQ() instrument.Range {
	if c.TraceQ == (instrument.Range{}) {
		return instrument.Range{Lo: 0, Hi: c.Tr()}
	}
	return c.TraceQ
}

// FieldError is a problem with one field of a configuration, named as in the
// URL and the form; FieldErrors is every problem found in a configuration.
// They are package problem's, whose errors every transport maps.
type (
	FieldError  = problem.Field
	FieldErrors = problem.Fields
)

// Field names, as in URLs and forms.
const (
	FieldVariant = "variant"
	FieldN       = "n"
	FieldD       = "d"
	FieldBr      = "br"
	FieldBc      = "bc"
	FieldBatch   = "batch"
	FieldHeads   = "heads"
	FieldCausal  = "causal"
	FieldPattern = "pattern"
	FieldSeed    = "seed"
	FieldTraceBH = "trace_bh"
	FieldTraceQ  = "trace_q"
	FieldMode    = "mode"
	FieldEngine  = "engine"
)

// Validate checks every field against its limit and the whole trace against
// MaxTraceBytes. The error is FieldErrors.
func (c *Config) Validate() error {
	var errs FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	inRange := func(field, name string, v, lo, hi int) bool {
		if v < lo || v > hi {
			add(field, "%s must be between %d and %d (got %d)", name, lo, hi, v)
			return false
		}
		return true
	}
	if _, ok := variantInfo[c.Variant]; !ok {
		add(FieldVariant, "variant must be one of %s", strings.Join(variantNames(), ", "))
	}
	if !validPattern(c.Pattern) {
		add(FieldPattern, "pattern must be one of %s", strings.Join(patternNames(), ", "))
	}
	okN := inRange(FieldN, "N", c.N, 1, MaxN)
	inRange(FieldD, "d", c.D, 1, MaxD)
	okBr := inRange(FieldBr, "Br", c.Br, 1, MaxTile)
	inRange(FieldBc, "Bc", c.Bc, 1, MaxTile)
	okB := inRange(FieldBatch, "batch", c.Batch, 1, MaxBatch)
	okH := inRange(FieldHeads, "heads", c.Heads, 1, MaxHeads)
	// A tile may be larger than N (decoding's few queries, a short prompt):
	// the run is then one ragged tile each way, its rows and columns past N
	// padding, as a last tile's are.
	if okB && okH && c.TraceBH != (instrument.Range{}) {
		if bh := c.Batch * c.Heads; c.TraceBH.Lo < 0 || c.TraceBH.Lo >= c.TraceBH.Hi || c.TraceBH.Hi > bh {
			add(FieldTraceBH, "traced batch-heads must lie within 0-%d", bh-1)
		}
	}
	if okN && okBr && c.TraceQ != (instrument.Range{}) {
		if c.TraceQ.Lo < 0 || c.TraceQ.Lo >= c.TraceQ.Hi || c.TraceQ.Hi > c.Tr() {
			add(FieldTraceQ, "traced q-tiles must lie within 0-%d (N=%d has %d q-tiles of Br=%d)", c.Tr()-1, c.N, c.Tr(), c.Br)
		}
	}
	if c.Timing && (c.TraceBH != (instrument.Range{}) || c.TraceQ != (instrument.Range{})) {
		add(FieldMode, "timing mode records every block of the grid: leave the traced batch-heads and q-tiles at all")
	}
	if c.Roles {
		if info := variantInfo[c.Variant]; info != nil && info.Roles == nil {
			add(FieldMode, "roles mode records the warp roles of a warp-specialised rung: %s", strings.Join(roleVariants(), " or "))
		} else if !c.Timing {
			add(FieldMode, "roles mode is a timing mode: set Timing with Roles")
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if size := c.TraceBytes(); size > MaxTraceBytes {
		if c.Timing {
			return FieldErrors{{Field: FieldMode, Message: fmt.Sprintf("a timing trace of the whole grid would be %s, above the %s limit: fewer batch-heads or a smaller N",
				FormatBytes(size), FormatBytes(MaxTraceBytes))}}
		}
		return FieldErrors{{Field: FieldTraceBH, Message: c.oversizeAdvice(size)}}
	}
	return nil
}

// oversizeAdvice says by how much a trace is too large and which smaller
// selections would fit.
func (c *Config) oversizeAdvice(size int64) string {
	msg := fmt.Sprintf("the trace would be %s, above the %s limit of one traced run", FormatBytes(size), FormatBytes(MaxTraceBytes))
	var offers []string
	bh, q := c.TracedBH(), c.TracedQ()
	if bh.Len() > 1 {
		t := *c
		t.TraceBH = instrument.Range{Lo: bh.Lo, Hi: bh.Lo + 1}
		t.TraceQ = q
		if s := t.TraceBytes(); s <= MaxTraceBytes {
			offers = append(offers, fmt.Sprintf("trace one batch-head (trace_bh=%d-%d, %s)", bh.Lo, bh.Lo, FormatBytes(s)))
		}
	}
	if t, ok := c.FittingPart(); ok {
		lo, hi := t.TraceQ.Lo, t.TraceQ.Hi
		offers = append(offers, fmt.Sprintf("trace q-tiles %d-%d of batch-head %d (trace_q=%d-%d, %s)", lo, hi-1, bh.Lo, lo, hi-1, FormatBytes(t.TraceBytes())))
	}
	if len(offers) == 0 {
		return msg + "; even one q-tile of one batch-head is too large: lower N or d, or raise Bc"
	}
	return msg + ": " + strings.Join(offers, ", or ")
}

// FittingPart is c traced over its first traced batch-head and the longest
// run of q-tiles, from the first traced one, whose trace fits MaxTraceBytes;
// false when not even one q-tile fits.
//
// Its cost grows with the q-tiles of N, so it answers false at once for a
// run whose sizes break their limits: a URL's N=10^9 must cost nothing.
func (c *Config) FittingPart() (Config, bool) {
	if c.N < 1 || c.N > MaxN || c.D < 1 || c.D > MaxD || c.Br < 1 || c.Br > MaxTile || c.Bc < 1 || c.Bc > MaxTile ||
		c.Batch < 1 || c.Batch > MaxBatch || c.Heads < 1 || c.Heads > MaxHeads {
		return *c, false
	}
	if _, ok := variantInfo[c.Variant]; !ok {
		return *c, false
	}
	bh, q := c.TracedBH(), c.TracedQ()
	if q.Lo < 0 || q.Hi > c.Tr() || q.Lo >= q.Hi || bh.Lo < 0 || bh.Lo >= c.Batch*c.Heads {
		return *c, false
	}
	t := *c
	t.TraceBH = instrument.Range{Lo: bh.Lo, Hi: bh.Lo + 1}
	// Walk the q-tiles from the first traced one while they fit: the walk
	// costs the records that fit and one q-tile more, however large N.
	sizes := c.recordSizes()
	size := int64(sizes.h.HeaderBytes()) + sizes.of(instrument.KindInputs)
	hi := q.Lo
	for ; hi < q.Hi; hi++ {
		if size += c.qTileBytes(sizes, hi); size > MaxTraceBytes {
			break
		}
	}
	t.TraceQ = instrument.Range{Lo: q.Lo, Hi: hi}
	return t, hi > q.Lo
}

// Values is the configuration in URL form; ParseConfig reads it back.
func (c *Config) Values() url.Values {
	v := url.Values{}
	v.Set(FieldVariant, c.Variant.String())
	v.Set(FieldN, strconv.Itoa(c.N))
	v.Set(FieldD, strconv.Itoa(c.D))
	v.Set(FieldBr, strconv.Itoa(c.Br))
	v.Set(FieldBc, strconv.Itoa(c.Bc))
	v.Set(FieldBatch, strconv.Itoa(c.Batch))
	v.Set(FieldHeads, strconv.Itoa(c.Heads))
	v.Set(FieldCausal, map[bool]string{false: "0", true: "1"}[c.Causal])
	v.Set(FieldPattern, c.Pattern.String())
	v.Set(FieldSeed, strconv.FormatUint(c.Seed, 10))
	if c.TraceBH != (instrument.Range{}) {
		v.Set(FieldTraceBH, formatRange(c.TraceBH))
	}
	if c.TraceQ != (instrument.Range{}) {
		v.Set(FieldTraceQ, formatRange(c.TraceQ))
	}
	if c.Roles {
		v.Set(FieldMode, "roles")
	} else if c.Timing {
		v.Set(FieldMode, "timing")
	}
	if c.Engine != instrument.SourceAny {
		v.Set(FieldEngine, c.Engine.String())
	}
	return v
}

// Key names the run's numbers: its URL form without the engine, so a
// recording or a cached trace of the same run is found whoever asks.
func (c *Config) Key() string {
	k := *c
	k.Engine = instrument.SourceAny
	return k.Values().Encode()
}

// ParseConfig reads a configuration from URL values, starting from the
// defaults for absent fields, and validates it. Every field that cannot be
// parsed or breaks a limit is reported in the FieldErrors.
func ParseConfig(v url.Values) (Config, error) {
	c, errs := parseFields(v)
	if len(errs) > 0 {
		return c, mergeErrors(errs, &c)
	}
	return c, c.Validate()
}

// Run is a configuration that passed Validate: one every engine can compute.
// Its fields are read through Config (a copy), and the only ways to make one
// are Config.Check and ParseRun, so whatever takes a Run need not check it
// again. The zero Run is what a failed Check returns: no run at all.
type Run struct{ c Config }

// Check validates c (see Validate) and wraps it as a Run; on failure the
// error is FieldErrors and the Run is zero.
func (c Config) Check() (Run, error) {
	if err := c.Validate(); err != nil {
		return Run{}, err
	}
	return Run{c}, nil
}

// ParseRun reads and validates a run from URL values, as ParseConfig does;
// the error is its FieldErrors.
func ParseRun(v url.Values) (Run, error) {
	c, err := ParseConfig(v)
	if err != nil {
		return Run{}, err
	}
	return Run{c}, nil
}

// Config is the run's configuration: a copy, which changing leaves the Run
// as it was.
func (r Run) Config() Config { return r.c }

// Key is the run's Config.Key.
func (r Run) Key() string { return r.c.Key() }

// configFields are every field of a run's URL form.
var configFields = []string{FieldVariant, FieldN, FieldD, FieldBr, FieldBc, FieldBatch, FieldHeads, FieldCausal,
	FieldPattern, FieldSeed, FieldTraceBH, FieldTraceQ, FieldMode, FieldEngine}

// UnknownFields names each field of v that is neither a run's nor one of
// extra: an API that takes a run refuses a misspelt field (ns= for n=)
// rather than run the default in its place.
func UnknownFields(v url.Values, extra ...string) FieldErrors {
	var errs FieldErrors
	for k := range v {
		if !slices.Contains(configFields, k) && !slices.Contains(extra, k) {
			errs = append(errs, FieldError{Field: truncate(k), Message: fmt.Sprintf("%q is not a field of a run: its fields are %s",
				truncate(k), strings.Join(append(append([]string(nil), configFields...), extra...), ", "))})
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// ParseBenchFields reads a configuration for an untraced GPU run: the
// stepper's limits (which bound a trace) do not apply; the GPU's, which
// launch.ParseBenchConfig adds, do.
func ParseBenchFields(v url.Values) (Config, error) {
	c, errs := parseFields(v)
	if len(errs) > 0 {
		return c, errs
	}
	if c.N < 1 || c.D < 1 || c.Br < 1 || c.Bc < 1 || c.Batch < 1 || c.Heads < 1 {
		return c, FieldErrors{{Field: FieldN, Message: "every size must be positive"}}
	}
	return c, nil
}

// parseFields reads every field, reporting those it cannot read.
func parseFields(v url.Values) (Config, FieldErrors) {
	c := DefaultConfig()
	var errs FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	intField := func(field, name string, dst *int) {
		s := strings.TrimSpace(v.Get(field))
		if s == "" {
			// Absent means the default; present but empty is a form field
			// left blank, which must not quietly become the default.
			if v.Has(field) {
				add(field, "%s is required: a whole number", name)
				*dst = -1
			}
			return
		}
		n, err := strconv.Atoi(s)
		if err != nil || len(s) > 12 {
			add(field, "%s must be a whole number (got %q)", name, truncate(s))
			*dst = -1
			return
		}
		*dst = n
	}
	if s := v.Get(FieldVariant); s != "" {
		if vr, ok := instrument.ParseVariant(s); ok {
			c.Variant = vr
		} else {
			add(FieldVariant, "variant must be one of %s (got %q)", strings.Join(variantNames(), ", "), truncate(s))
		}
	}
	intField(FieldN, "N", &c.N)
	intField(FieldD, "d", &c.D)
	intField(FieldBr, "Br", &c.Br)
	intField(FieldBc, "Bc", &c.Bc)
	intField(FieldBatch, "batch", &c.Batch)
	intField(FieldHeads, "heads", &c.Heads)
	switch s := strings.ToLower(strings.TrimSpace(v.Get(FieldCausal))); s {
	case "", "0", "false", "off":
		c.Causal = false
	case "1", "true", "on":
		c.Causal = true
	default:
		add(FieldCausal, "causal must be 0 or 1 (got %q)", truncate(s))
	}
	if s := v.Get(FieldPattern); s != "" {
		if p, ok := instrument.ParsePattern(s); ok {
			c.Pattern = p
		} else {
			add(FieldPattern, "pattern must be one of %s (got %q)", strings.Join(patternNames(), ", "), truncate(s))
		}
	}
	if s := strings.TrimSpace(v.Get(FieldSeed)); s == "" && v.Has(FieldSeed) {
		add(FieldSeed, "seed is required: a whole number from 0 to %d", uint64(math.MaxUint64))
	} else if s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			add(FieldSeed, "seed must be a whole number from 0 to %d (got %q)", uint64(math.MaxUint64), truncate(s))
		}
		c.Seed = n
	}
	switch s := strings.TrimSpace(v.Get(FieldEngine)); s {
	case "", "auto":
	case instrument.SourceGPU.String(), instrument.SourceCPUMirror.String():
		c.Engine, _ = instrument.ParseSource(s)
	default:
		add(FieldEngine, "engine must be auto, gpu or cpu (got %q)", truncate(s))
	}
	switch s := strings.TrimSpace(v.Get(FieldMode)); s {
	case "", "full":
	case "timing":
		c.Timing = true
	case "roles":
		c.Timing, c.Roles = true, true
	default:
		add(FieldMode, "mode must be full, timing or roles (got %q)", truncate(s))
	}
	for _, f := range []struct {
		field string
		dst   *instrument.Range
	}{{FieldTraceBH, &c.TraceBH}, {FieldTraceQ, &c.TraceQ}} {
		s := strings.TrimSpace(v.Get(f.field))
		if s == "" || s == "all" {
			continue
		}
		r, err := parseRange(s)
		if err != nil {
			add(f.field, "%s (got %q)", err, truncate(s))
			continue
		}
		*f.dst = r
	}
	return c, errs
}

// mergeErrors adds Validate's findings about fields that did parse.
func mergeErrors(parse FieldErrors, c *Config) FieldErrors {
	bad := parse.ByField()
	var verr FieldErrors
	if errors.As(c.Validate(), &verr) {
		for _, e := range verr {
			if _, seen := bad[e.Field]; !seen {
				parse = append(parse, e)
				bad[e.Field] = e.Message
			}
		}
	}
	return parse
}

// parseRange reads "lo-hi" (inclusive) or a single index.
func parseRange(s string) (instrument.Range, error) {
	lo, hi, found := strings.Cut(s, "-")
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b := a
	var err2 error
	if found {
		b, err2 = strconv.Atoi(strings.TrimSpace(hi))
	}
	if err1 != nil || err2 != nil || len(s) > 24 || a < 0 || b < a {
		return instrument.Range{}, errors.New(`must be a range "first-last" of indices from 0, or "all"`)
	}
	return instrument.Range{Lo: a, Hi: b + 1}, nil
}

func formatRange(r instrument.Range) string {
	if r.Len() == 1 {
		return strconv.Itoa(r.Lo)
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi-1)
}

func truncate(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

func validPattern(p instrument.Pattern) bool {
	for _, q := range instrument.Patterns {
		if p == q {
			return true
		}
	}
	return false
}

func patternNames() []string {
	var n []string
	for _, p := range instrument.Patterns {
		n = append(n, p.String())
	}
	return n
}

// FormatBytes writes a byte count for people: 512 B, 12.5 KiB, 32.0 MiB.
func FormatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
