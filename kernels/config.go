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
	// Nq is the run's query rows, the last Nq of its N positions (0: N, a
	// square run: training, a prompt's first pass); fewer is inference,
	// new tokens' queries against a cache of N keys. KVHeads is the heads
	// of K and V (0: Heads), each serving Heads/KVHeads query heads
	// (grouped-query attention; 1 is multi-query). Zero, not N or Heads,
	// is how a square run says so, so that its URL and key are as before.
	Nq, KVHeads int
	Causal      bool
	Pattern     instrument.Pattern
	Seed        uint64

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

// Tr and Tc are the numbers of q-tiles (of the Nq query rows) and kv-tiles
// (of the N keys).
func (c *Config) Tr() int { return ceilDiv(c.Queries(), c.Br) }
func (c *Config) Tc() int { return ceilDiv(c.N, c.Bc) }

// Queries is the run's query rows: Nq, or N where it is zero.
func (c *Config) Queries() int {
	if c.Nq == 0 {
		return c.N
	}
	return c.Nq
}

// KVHeadCount is the heads of K and V: KVHeads, or Heads where it is zero.
func (c *Config) KVHeadCount() int {
	if c.KVHeads == 0 {
		return c.Heads
	}
	return c.KVHeads
}

// Group is how many query heads share one head of K and V.
func (c *Config) Group() int { return c.Heads / max(1, c.KVHeadCount()) }

// KVSource is the query batch-head whose K and V batch-head bh reads: the
// first head of its group (itself without grouping). Inputs of a grouped
// run draw K and V there, so that the group's heads read one K and V.
func (c *Config) KVSource(bh int) int {
	g := c.Group()
	h := bh % c.Heads
	return bh - h%g
}

// QueryOffset is the position of query row 0: the queries are the last Nq
// of the N positions, so query row r is position QueryOffset()+r, and a
// causal mask lets it see keys 0 to QueryOffset()+r.
func (c *Config) QueryOffset() int { return c.N - c.Queries() }

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
	FieldNq      = "nq"
	FieldKVHeads = "kv_heads"
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
	okNq := c.validateShape(okN, okH, add)
	okN = okN && okNq
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
			rows := fmt.Sprintf("N=%d", c.N)
			if c.Queries() != c.N {
				rows = fmt.Sprintf("nq=%d", c.Queries())
			}
			add(FieldTraceQ, "traced q-tiles must lie within 0-%d (%s has %d q-tiles of Br=%d)", c.Tr()-1, rows, c.Tr(), c.Br)
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

// validateShape checks nq and kv_heads: nq from 1 to N, kv_heads dividing
// heads, and a rung that takes the shape (VariantInfo.Shapes). It reports
// whether nq is usable for the q-tile checks that follow.
func (c *Config) validateShape(okN, okH bool, add func(field, format string, args ...any)) bool {
	ok := true
	if c.Nq != 0 && okN && (c.Nq < 1 || c.Nq > c.N) {
		add(FieldNq, "nq (query rows) must be between 1 and N=%d (got %d)", c.N, c.Nq)
		ok = false
	} else if c.Nq < 0 {
		add(FieldNq, "nq (query rows) must be at least 1 (got %d)", c.Nq)
		ok = false
	}
	if c.KVHeads != 0 && okH && (c.KVHeads < 1 || c.KVHeads > c.Heads || c.Heads%c.KVHeads != 0) {
		add(FieldKVHeads, "kv_heads must divide heads=%d: one of %s (got %d)", c.Heads, divisors(c.Heads), c.KVHeads)
	} else if c.KVHeads < 0 {
		add(FieldKVHeads, "kv_heads must be at least 1 (got %d)", c.KVHeads)
	}
	info := variantInfo[c.Variant]
	if info == nil {
		return ok
	}
	if c.Nq != 0 && c.Nq != c.N && !info.Shapes.Queries {
		add(FieldNq, "%s runs N queries against N keys: nq must equal N=%d (got %d); %s take fewer queries", c.Variant, c.N, c.Nq,
			strings.Join(shapeVariants(func(s Shapes) bool { return s.Queries }), ", "))
	}
	if c.KVHeads != 0 && c.KVHeads != c.Heads && !info.Shapes.GroupedHeads {
		add(FieldKVHeads, "%s gives each head its own K and V: kv_heads must equal heads=%d (got %d); %s share them", c.Variant, c.Heads, c.KVHeads,
			strings.Join(shapeVariants(func(s Shapes) bool { return s.GroupedHeads }), ", "))
	}
	return ok
}

// divisors lists n's divisors, "1, 2, 4, 8", for an error that must name
// the values kv_heads may take.
func divisors(n int) string {
	var d []string
	for k := 1; k <= n; k++ {
		if n%k == 0 {
			d = append(d, strconv.Itoa(k))
		}
	}
	return strings.Join(d, ", ")
}

// shapeVariants names the rungs whose Shapes pass take.
func shapeVariants(take func(Shapes) bool) []string {
	var out []string
	for _, v := range rungs {
		if take(v.Shapes) {
			out = append(out, v.Name())
		}
	}
	if len(out) == 0 {
		return []string{"no rung yet"}
	}
	return out
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
	// A square run's URL and key stay as they were before the shapes.
	if c.Nq != 0 && c.Nq != c.N {
		v.Set(FieldNq, strconv.Itoa(c.Nq))
	}
	if c.KVHeads != 0 && c.KVHeads != c.Heads {
		v.Set(FieldKVHeads, strconv.Itoa(c.KVHeads))
	}
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
var configFields = []string{FieldVariant, FieldN, FieldNq, FieldD, FieldBr, FieldBc, FieldBatch, FieldHeads, FieldKVHeads, FieldCausal,
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
	// nq and kv_heads left blank are their defaults, N and heads (a form
	// asks for them only where a run differs), written as zero.
	for _, f := range []struct {
		field, name string
		dst         *int
	}{{FieldNq, "nq", &c.Nq}, {FieldKVHeads, "kv_heads", &c.KVHeads}} {
		if strings.TrimSpace(v.Get(f.field)) != "" {
			intField(f.field, f.name, f.dst)
			// Zero is how a Config says "the default"; typed, it is out
			// of range, not a quiet N or heads.
			if *f.dst == 0 {
				add(f.field, "%s must be at least 1 (got 0); leave it empty for the default", f.name)
				*f.dst = -1
			}
		}
	}
	if c.Nq == c.N {
		c.Nq = 0
	}
	if c.KVHeads == c.Heads {
		c.KVHeads = 0
	}
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
