// Package sweep owns benchmark sweeps: naive against flash across sequence
// lengths, timed on the GPU (through the worker) or on the CPU (the mirrors),
// run as jobs one after another, with progress, cancellation, and results as
// a table, CSV and JSON. It also holds the sweep recorded on an H100 for
// machines without a GPU. A sweep times the forward pass's kernels unless it
// names backward ones (variants=flash2_bwd,...): a backward point times one
// backward pass, every kernel of it, and says so (Result.Pass).
package sweep

import (
	"fmt"
	"math"
	"net/url"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
)

// Spec is what to sweep.
type Spec struct {
	Engine   instrument.Source    `json:"engine"` // instrument.SourceGPU or SourceCPUMirror ("gpu", "cpu")
	Ns       []int                `json:"ns"`
	Ds       []int                `json:"ds"`
	Causal   []bool               `json:"causal"`
	Variants []instrument.Variant `json:"-"`
	// Batch and Heads fix the shape; zero means the FlashAttention benchmark
	// shapes, B = max(1, 16384/N) and H = 2048/d.
	Batch   int `json:"batch"`
	Heads   int `json:"heads"`
	Repeats int `json:"repeats"`
}

// Limits of a sweep.
const (
	MaxRepeats  = 20
	MaxGPUN     = 32768
	MaxCPUN     = 1024
	MaxGPUTime  = 20 * time.Minute
	MaxCPUTime  = 2 * time.Minute
	benchTokens = 16384 // B·N of the benchmark shapes
	benchHidden = 2048  // H·d
)

// The tiles a sweep runs: flash2's compiled 64×64 instantiations, and the
// same tiles for naive.
const sweepTile = 64

// Point is one measurement of a sweep.
type Point struct {
	Variant instrument.Variant `json:"-"`
	N       int                `json:"n"`
	D       int                `json:"d"`
	B       int                `json:"b"`
	H       int                `json:"h"`
	Causal  bool               `json:"causal"`
}

// The passes a point times.
const (
	PassForward  = "forward"
	PassBackward = "backward"
)

// Backward says whether the point times a backward kernel.
func (p Point) Backward() bool {
	info := kernels.Info(p.Variant)
	return info != nil && info.Backward
}

// Pass is the pass the point times: PassForward or PassBackward.
func (p Point) Pass() string {
	if p.Backward() {
		return PassBackward
	}
	return PassForward
}

// BackwardFLOPs is a backward pass's FLOPs as a multiple of the forward's.
// FlashAttention's benchmarks count them so (benchmark_flash_attention.py,
// flops(..., mode="bwd") = 2.5 × the forward's): the forward multiplies
// twice (S = QKᵀ, O = PV), the backward five times (S again, dV = PᵀdO,
// dP = dO Vᵀ, dQ = dS K, dK = dSᵀQ), each of the same 2·N²·d per head.
// bench/backward counts them the same way.
const BackwardFLOPs = 2.5

// FLOPs is the forward's 4·B·H·N²·d, halved under a causal mask (the usual
// count, although naive computes the masked half too), and for a backward
// point 2.5 times that (BackwardFLOPs), as FlashAttention's benchmarks
// count it (naive_bwd, too, computes the masked half).
func (p Point) FLOPs() float64 {
	f := 4 * float64(p.B) * float64(p.H) * float64(p.N) * float64(p.N) * float64(p.D)
	if p.Causal {
		f /= 2
	}
	if p.Backward() {
		f *= BackwardFLOPs
	}
	return f
}

// Config is the run a point times.
func (p Point) Config(seed uint64) kernels.Config {
	c := kernels.Config{Variant: p.Variant, N: p.N, D: p.D, Br: sweepTile, Bc: sweepTile, Batch: p.B, Heads: p.H,
		Causal: p.Causal, Pattern: instrument.PatternNormal, Seed: seed}
	// A kernel compiled at fixed tiles runs at its tile for the head dim.
	if t, ok := kernels.Info(p.Variant).SweepTile(p.D); ok {
		c.Br, c.Bc = t.Br, t.Bc
	}
	return c
}

// Points is the grid of the spec: for each d, N and causal, every variant.
func (s *Spec) Points() []Point {
	var out []Point
	for _, d := range s.Ds {
		for _, n := range s.Ns {
			for _, causal := range s.Causal {
				for _, v := range s.Variants {
					if n > maxSweptN(v) {
						continue
					}
					p := Point{Variant: v, N: n, D: d, B: s.Batch, H: s.Heads, Causal: causal}
					if s.Batch == 0 {
						p.B = max(1, benchTokens/n)
					}
					if s.Heads == 0 {
						p.H = max(1, benchHidden/d)
					}
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// rate is how fast the estimate assumes v runs on engine, in FLOP/s: its
// registry entry's figures, from docs/GPU.md and docs/LADDER.md (on an H100
// flash2 f32 at about 7 TFLOP/s, naive about 2, flash2_fast about 280; the
// CPU mirrors at about 2.5 GFLOP/s, the bf16 ones a fifth of that). A
// backward kernel's rate counts its FLOPs as Point.FLOPs does, 2.5 times the
// forward's: the float32 mirrors ran at 0.7 to 1.3 GFLOP/s so counted
// (flash2_bwd and naive_bwd, N = 64 to 512, d = 64, B = H = 1, on the
// two-core development machine, inputs included), and the entries say 1
// (0.4 for the bf16 mirror).
func rate(engine instrument.Source, v instrument.Variant) float64 {
	if engine == instrument.SourceCPUMirror {
		return kernels.Info(v).CPURate
	}
	return kernels.Info(v).GPURate
}

// Estimate is how long the sweep should take on this server.
func (s *Spec) Estimate() time.Duration { return s.estimate(hostCores()) }

// estimate is the sweep's time where the GPU worker's host has cores CPU
// cores: each point's runs (a warm-up and the repeats), and on the GPU a
// second and a half a point for its set-up, plus a backward point's inputs
// (hostInputs). On the CPU a backward mirror computes its inputs in every
// run, and its rate includes them.
func (s *Spec) estimate(cores int) time.Duration {
	var secs float64
	for _, p := range s.Points() {
		flops := p.FLOPs()
		if p.Causal && kernels.Info(p.Variant).Materialised {
			flops *= 2 // naive (and naive_bwd) computes every tile
		}
		secs += flops / rate(s.Engine, p.Variant) * float64(s.Repeats+1)
		if s.Engine == instrument.SourceGPU {
			secs += 1.5 + hostInputs(p, cores).Seconds()
		}
	}
	return time.Duration(secs * float64(time.Second))
}

// hostCores is how many CPU cores the GPU worker has to prepare a point's
// inputs with: the server's own, since it runs its worker beside it.
func hostCores() int { return runtime.GOMAXPROCS(0) }

// A backward point's inputs on the GPU. The worker draws Q, K, V and dO and
// then computes what the backward starts from, the exact forward's O and L
// (and for naive_bwd its P), in float64 on the host (kernels.InputsFor), a
// batch-head per core: 4·N²·d operations a batch-head, like the forward
// itself, where a forward point's inputs are N·d draws. hostInputRate is one
// core's speed at it in those units: 1.6 to 2.8·10⁹ measured on one core of
// the development machine (flash2_bwd, N = 512 to 2048, d = 64; slower when
// its cores were shared), 1.5·10⁹ assumed. naive_bwd's P costs half as much
// again (the scores a second time and an exp each).
//
// The worker says nothing to the server until it has timed the point, and
// the server takes a worker silent for a minute to be hung (runner's
// GPUOptions.IdleTimeout, one minute by default) and ends it, failing the
// sweep: a backward point whose inputs would take longer than
// maxHostInputs is refused.
const (
	hostInputRate = 1.5e9
	maxHostInputs = 40 * time.Second
)

// hostInputs is how long the GPU worker's host, with cores CPU cores, takes
// to prepare point p's inputs: nothing to speak of for a forward point.
func hostInputs(p Point, cores int) time.Duration {
	if !p.Backward() {
		return 0
	}
	perHead := 4 * float64(p.N) * float64(p.N) * float64(p.D)
	if p.Causal {
		perHead /= 2
	}
	if kernels.Info(p.Variant).Materialised {
		perHead *= 1.5
	}
	bh := p.B * p.H
	rounds := (bh + max(cores, 1) - 1) / max(cores, 1)
	return time.Duration(float64(rounds) * perHead / hostInputRate * float64(time.Second))
}

// sweptVariants are the kernels a sweep times by default: on the GPU every
// rung of the ladder and naive_mma; on the CPU mirror those whose entry
// says so (the float32 pair: the bf16 mirrors' tiles need N of 128 and
// more, and run slower). The backward kernels are timed only when a sweep
// names them: the default sweep, and the one recorded on an H100, are the
// forward pass's.
func sweptVariants(engine instrument.Source) []instrument.Variant {
	var out []instrument.Variant
	for _, info := range kernels.Variants() {
		if info.Backward {
			continue // on request only (variants=flash2_bwd,...)
		}
		if info.Decode {
			continue // decoding's shapes are not a sweep's square runs
		}
		if engine == instrument.SourceGPU || info.SweptOnCPU {
			out = append(out, info.Variant)
		}
	}
	return out
}

// maxSweptN is the longest sequence a sweep times a variant at: its entry's
// MaxSweptN, or no limit. The first rungs are there to be slow, and at the
// sweep's fixed work (B·N = 16384) their time still grows with N.
func maxSweptN(v instrument.Variant) int {
	if n := kernels.Info(v).MaxSweptN; n > 0 {
		return n
	}
	return math.MaxInt
}

// DefaultSpec is the sweep on the GPU, and a small one on the CPU.
func DefaultSpec(engine instrument.Source) Spec {
	if engine == instrument.SourceCPUMirror {
		return Spec{Engine: engine, Ns: []int{64, 128, 256}, Ds: []int{64}, Causal: []bool{false, true},
			Variants: sweptVariants(engine), Batch: 1, Heads: 1, Repeats: 3}
	}
	return Spec{Engine: instrument.SourceGPU, Ns: []int{512, 1024, 2048, 4096, 8192, 16384, 32768}, Ds: []int{64, 128},
		Causal: []bool{false, true}, Variants: sweptVariants(instrument.SourceGPU), Repeats: 5}
}

// MaxPoints is the most points a sweep may have: the default GPU sweep's
// (7 Ns × 2 head dims × 2 masks × every fast rung, and the slow rungs up to
// their longest N), so that the default always runs and nothing larger does.
var MaxPoints = func() int { s := DefaultSpec(instrument.SourceGPU); return len(s.Points()) }()

// Field names of a sweep's URL form.
const (
	FieldEngine   = "engine"
	FieldNs       = "n"
	FieldDs       = "d"
	FieldCausal   = "causal"
	FieldVariants = "variants"
	FieldBatch    = "batch"
	FieldHeads    = "heads"
	FieldRepeats  = "repeats"
)

// maxList bounds each list of a spec, before anything is made of it.
const maxList = 64

// specFields are every field a sweep's URL form may hold.
var specFields = []string{FieldEngine, FieldNs, FieldDs, FieldCausal, FieldVariants, FieldBatch, FieldHeads, FieldRepeats}

// ParseSpec reads a spec from URL values, starting from the engine's
// defaults, and checks it: every problem is a kernels.FieldError, and a
// sweep estimated to take too long is refused with the estimate.
func ParseSpec(v url.Values) (Spec, error) { return parseSpec(v, hostCores()) }

// parseSpec is ParseSpec where the GPU worker's host has cores CPU cores.
func parseSpec(v url.Values, cores int) (Spec, error) {
	var unknown kernels.FieldErrors
	for k := range v {
		if !slices.Contains(specFields, k) {
			unknown = append(unknown, kernels.FieldError{Field: trunc(k), Message: fmt.Sprintf("%q is not a field of a sweep: its fields are %s", trunc(k), strings.Join(specFields, ", "))})
		}
	}
	if len(unknown) > 0 {
		sort.Slice(unknown, func(i, j int) bool { return unknown[i].Field < unknown[j].Field })
		return Spec{}, unknown
	}
	var errs kernels.FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, kernels.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	engine := instrument.SourceGPU
	if name := v.Get(FieldEngine); name != "" {
		var ok bool
		if engine, ok = instrument.ParseSource(name); !ok || engine == instrument.SourceRecording {
			add(FieldEngine, "engine must be gpu or cpu (got %q)", trunc(name))
			engine = instrument.SourceGPU
		}
	}
	s := DefaultSpec(engine)
	maxN := map[instrument.Source]int{instrument.SourceGPU: MaxGPUN, instrument.SourceCPUMirror: MaxCPUN}[engine]
	ints := func(field, name string, lo, hi int, dst *[]int) {
		raw := strings.TrimSpace(v.Get(field))
		if raw == "" {
			return
		}
		if n := strings.Count(raw, ",") + 1; n > maxList {
			add(field, "%s is a list of at most %d values (got %d)", name, maxList, n)
			return
		}
		var out []int
		for _, f := range strings.Split(raw, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < lo || n > hi {
				add(field, "%s must be a comma-separated list of whole numbers from %d to %d (got %q)", name, lo, hi, trunc(f))
				return
			}
			out = append(out, n)
		}
		*dst = dedupe(out)
	}
	ints(FieldNs, "N", 16, maxN, &s.Ns)
	if engine == instrument.SourceGPU {
		ints(FieldDs, "d", 64, 128, &s.Ds)
		for _, d := range s.Ds {
			if d != 64 && d != 128 {
				add(FieldDs, "the GPU sweep runs d = 64 or 128, the head dims of flash2's compiled 64×64 tiles (got %d)", d)
				break
			}
		}
	} else {
		ints(FieldDs, "d", 1, 256, &s.Ds)
	}
	if raw := strings.TrimSpace(v.Get(FieldCausal)); len(raw) > 16 {
		add(FieldCausal, "causal must be 0, 1 or 0,1 (got %q)", trunc(raw))
	} else if raw != "" {
		s.Causal = nil
		for _, f := range strings.Split(raw, ",") {
			switch strings.TrimSpace(f) {
			case "0":
				s.Causal = append(s.Causal, false)
			case "1":
				s.Causal = append(s.Causal, true)
			default:
				add(FieldCausal, "causal must be 0, 1 or 0,1 (got %q)", trunc(raw))
			}
		}
	}
	if raw := strings.TrimSpace(v.Get(FieldVariants)); raw != "" && strings.Count(raw, ",") >= maxList {
		add(FieldVariants, "variants is a list of at most %d values", maxList)
	} else if raw != "" {
		s.Variants = nil
		for _, f := range strings.Split(raw, ",") {
			vr, ok := instrument.ParseVariant(strings.TrimSpace(f))
			// Decoding's rungs run a few queries against a cache: a sweep's
			// square runs are not theirs to time (scripts/bench-decode is).
			if !ok || kernels.Info(vr) == nil || kernels.Info(vr).Decode {
				var fwd, bwd []string
				for _, v := range kernels.Variants() {
					switch {
					case v.Decode:
					case v.Backward:
						bwd = append(bwd, v.Name())
					default:
						fwd = append(fwd, v.Name())
					}
				}
				add(FieldVariants, "variants must be a comma-separated list of the forward kernels %s and the backward kernels %s (got %q)",
					strings.Join(fwd, ", "), strings.Join(bwd, ", "), trunc(f))
				break
			}
			if !slices.Contains(s.Variants, vr) {
				s.Variants = append(s.Variants, vr)
			}
		}
	}
	one := func(field, name string, lo, hi int, dst *int) {
		raw := strings.TrimSpace(v.Get(field))
		if raw == "" {
			return
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < lo || n > hi {
			add(field, "%s must be a whole number from %d to %d (got %q)", name, lo, hi, trunc(raw))
			return
		}
		*dst = n
	}
	one(FieldBatch, "batch", 0, 512, &s.Batch)
	one(FieldHeads, "heads", 0, 256, &s.Heads)
	one(FieldRepeats, "repeats", 1, MaxRepeats, &s.Repeats)
	if len(errs) > 0 {
		return s, errs
	}
	if n := len(s.Points()); n == 0 || n > MaxPoints {
		msg := fmt.Sprintf("a sweep has 1 to %d points (sizes × head dims × masks × variants); this one has %d", MaxPoints, n)
		if n == 0 {
			for _, info := range kernels.Variants() {
				if info.MaxSweptN > 0 {
					msg += fmt.Sprintf("; %s is timed up to N=%d", info.Name(), info.MaxSweptN)
				}
			}
		}
		return s, kernels.FieldErrors{{Field: FieldNs, Message: msg}}
	}
	for _, p := range s.Points() {
		if engine == instrument.SourceGPU {
			c := p.Config(0)
			if err := launch.Validate(&c); err != nil {
				return s, kernels.FieldErrors{{Field: FieldBatch, Message: fmt.Sprintf("N=%d, d=%d: %v", p.N, p.D, err)}}
			}
			if t := hostInputs(p, cores); t > maxHostInputs {
				return s, kernels.FieldErrors{{Field: FieldNs, Message: hostInputsMessage(&s, p, t, cores)}}
			}
		} else if c := p.Config(0); p.N < max(c.Br, c.Bc) {
			return s, kernels.FieldErrors{{Field: FieldNs, Message: fmt.Sprintf("%s's tiles are %d×%d: N must be at least %d", p.Variant, c.Br, c.Bc, max(c.Br, c.Bc))}}
		}
	}
	limit := map[instrument.Source]time.Duration{instrument.SourceGPU: MaxGPUTime, instrument.SourceCPUMirror: MaxCPUTime}[engine]
	if est := s.estimate(cores); est > limit {
		return s, kernels.FieldErrors{{Field: FieldNs, Message: fmt.Sprintf("this sweep would take about %s, more than the %s a sweep may take here: fewer or smaller sizes, or fewer repeats",
			est.Round(time.Second), limit)}}
	}
	return s, nil
}

// hostInputsMessage refuses backward point p, whose inputs would take t to
// prepare on the GPU worker's cores host cores, and says how far this
// spec's shapes can go.
func hostInputsMessage(s *Spec, p Point, t time.Duration, cores int) string {
	msg := fmt.Sprintf("%s at N=%d, d=%d (B=%d, H=%d%s): a backward point's inputs, the exact forward (O and L%s) computed in float64 on this server's %d CPU cores, "+
		"would take about %s to prepare, and the GPU worker must answer within a minute",
		p.Variant, p.N, p.D, p.B, p.H, map[bool]string{true: ", causal"}[p.Causal], map[bool]string{true: ", and P"}[kernels.Info(p.Variant).Materialised],
		cores, t.Round(time.Second))
	fits := 0
	for n := 16; n <= MaxGPUN; n *= 2 {
		q := p
		q.N = n
		if s.Batch == 0 {
			q.B = max(1, benchTokens/n)
		}
		if hostInputs(q, cores) <= maxHostInputs {
			fits = n
		}
	}
	if fits > 0 {
		msg += fmt.Sprintf(": %s runs up to N=%d at these shapes here", p.Variant, fits)
	}
	return msg + " (fewer batch·heads go further)"
}

// Values is the spec in URL form.
func (s *Spec) Values() url.Values {
	v := url.Values{}
	v.Set(FieldEngine, s.Engine.String())
	v.Set(FieldNs, joinInts(s.Ns))
	v.Set(FieldDs, joinInts(s.Ds))
	var cs, vs []string
	for _, c := range s.Causal {
		cs = append(cs, map[bool]string{false: "0", true: "1"}[c])
	}
	for _, x := range s.Variants {
		vs = append(vs, x.String())
	}
	v.Set(FieldCausal, strings.Join(cs, ","))
	v.Set(FieldVariants, strings.Join(vs, ","))
	if s.Batch > 0 {
		v.Set(FieldBatch, strconv.Itoa(s.Batch))
	}
	if s.Heads > 0 {
		v.Set(FieldHeads, strconv.Itoa(s.Heads))
	}
	v.Set(FieldRepeats, strconv.Itoa(s.Repeats))
	return v
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func dedupe(xs []int) []int {
	sort.Ints(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func trunc(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

// Result is one point's measurement.
type Result struct {
	Point
	VariantName string `json:"variant"`
	// Pass is the pass the point timed, PassForward or PassBackward: a
	// backward point's time is every kernel of one backward pass, and its
	// FLOPs 2.5 times the forward's (Point.FLOPs).
	Pass    string    `json:"pass"`
	Kernel  string    `json:"kernel"` // what ran, with its data type
	DType   string    `json:"dtype"`
	Ms      float64   `json:"ms"` // median of the repeats
	TFLOPs  float64   `json:"tflops"`
	Repeats []float64 `json:"repeats_ms"`
	// PeakBytes is the device memory the run held: the drop in free memory
	// (cuMemGetInfo) once its buffers were allocated. On the CPU it is the
	// Go heap the mirror allocated, and says so in PeakHow.
	PeakBytes  int64  `json:"peak_bytes"`
	PeakHow    string `json:"peak_how"`
	OutOfMem   bool   `json:"out_of_memory"`
	Error      string `json:"error,omitempty"`
	FreeBefore int64  `json:"free_before,omitempty"`
	FreeAfter  int64  `json:"free_after,omitempty"`
}

// finish fills the median and rate from the repeats.
func (r *Result) finish() {
	if len(r.Repeats) == 0 {
		return
	}
	ms := append([]float64(nil), r.Repeats...)
	sort.Float64s(ms)
	r.Ms = ms[len(ms)/2]
	r.TFLOPs = r.FLOPs() / (r.Ms / 1e3) / 1e12
	if math.IsInf(r.TFLOPs, 0) || math.IsNaN(r.TFLOPs) {
		r.TFLOPs = 0
	}
}

// GPUTiming is what the GPU reports of a point: each repeat's time, and the
// free device memory before the run, while its buffers were allocated and
// after; or that it ran out of memory, or another error.
type GPUTiming struct {
	Ms                               []float64
	FreeBefore, FreeInUse, FreeAfter int64
	OutOfMem                         bool
	Error                            string
}

// GPUResult turns the GPU's timing into a point's result.
func GPUResult(p Point, t GPUTiming) Result {
	r := Result{Point: p, VariantName: p.Variant.String(), Pass: p.Pass(), Kernel: kernelLabel(p), DType: kernels.Info(p.Variant).DType.String(),
		Repeats: t.Ms, OutOfMem: t.OutOfMem, Error: t.Error, FreeBefore: t.FreeBefore, FreeAfter: t.FreeAfter,
		PeakHow: "the drop in free device memory (cuMemGetInfo) once the run's buffers were allocated"}
	if t.FreeInUse > 0 {
		r.PeakBytes = t.FreeBefore - t.FreeInUse
	}
	if r.OutOfMem {
		r.Error = fmt.Sprintf("out of memory at N=%d: %s", p.N, t.Error)
	}
	r.finish()
	return r
}
