package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/templates"

	"github.com/a-h/templ"
)

func (s *Server) home(w http.ResponseWriter, r *http.Request) error {
	return render(w, r, http.StatusOK, templates.HomePage(s.page("Step through FlashAttention", "home"), lessons.Starters, lessons.Pages))
}

func (s *Server) lessonIndex(w http.ResponseWriter, r *http.Request) error {
	return render(w, r, http.StatusOK, templates.LessonsPage(s.page("Lessons", "lessons"), lessons.Course))
}

// stepper renders the run form filled from the URL, each field's problem
// beside it, and, for a valid configuration, the data the browser needs to
// start the run at the step the URL names.
func (s *Server) stepper(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v := templates.StepperView{
		Values:   formValues(q),
		Errors:   map[string]string{},
		Variants: variantOptions(),
		Patterns: patternOptions(),
		Engines:  []templates.Option{{Value: "auto", Label: "auto: GPU, recording or CPU"}, {Value: kernels.EngineGPU, Label: "GPU"}, {Value: kernels.EngineCPU, Label: "CPU mirror"}},
		Modes:    []templates.Option{{Value: "full", Label: "full: every array"}, {Value: "timing", Label: "timing: every block, SM and clock"}},
		GPUTiles: gpuTileOptions(),
		Limits: templates.Limits{MaxN: kernels.MaxN, MaxD: kernels.MaxD, MaxTile: kernels.MaxTile,
			MaxBatch: kernels.MaxBatch, MaxHeads: kernels.MaxHeads, MaxTrace: kernels.FormatBytes(kernels.MaxTraceBytes)},
	}
	c, err := kernels.ParseConfig(q)
	var fe kernels.FieldErrors
	switch {
	case errors.As(err, &fe):
		v.Errors = fe.ByField()
	case err != nil:
		return err
	default:
		v.Valid = true
		v.Query = c.Values().Encode()
		v.Estimate = estimate(&c)
		v.RunsOn = s.runner.For(&c)
	}
	step, _ := strconv.Atoi(q.Get("step"))
	v.Data = templates.StepperData{Valid: v.Valid, Query: v.Query, Step: max(step, 0)}
	return render(w, r, http.StatusOK, templates.StepperPage(s.page("Stepper", "step"), v))
}

// formValues is what the form shows: the defaults, overridden by whatever the
// URL holds, as typed, so a mistyped value stays in its field beside its error.
func formValues(q url.Values) map[string]string {
	def := kernels.DefaultConfig()
	vals := map[string]string{}
	for k, v := range def.Values() {
		vals[k] = v[0]
	}
	for _, k := range []string{kernels.FieldVariant, kernels.FieldN, kernels.FieldD, kernels.FieldBr, kernels.FieldBc,
		kernels.FieldBatch, kernels.FieldHeads, kernels.FieldCausal, kernels.FieldPattern, kernels.FieldSeed,
		kernels.FieldTraceBH, kernels.FieldTraceQ, kernels.FieldEngine, kernels.FieldMode} {
		if q.Has(k) {
			vals[k] = q.Get(k)
		}
	}
	// An unchecked checkbox is absent from a submitted form.
	if q.Has(kernels.FieldN) && !q.Has(kernels.FieldCausal) {
		vals[kernels.FieldCausal] = "0"
	}
	if vals[kernels.FieldCausal] == "true" || vals[kernels.FieldCausal] == "on" {
		vals[kernels.FieldCausal] = "1"
	}
	if vals[kernels.FieldEngine] == "" {
		vals[kernels.FieldEngine] = "auto"
	}
	if vals[kernels.FieldMode] == "" {
		vals[kernels.FieldMode] = "full"
	}
	return vals
}

func estimate(c *kernels.Config) string {
	h := c.Header(instrument.SourceCPUMirror, "")
	return fmt.Sprintf("%s, %d records", kernels.FormatBytes(c.TraceBytes()), h.Records)
}

func gpuTileOptions() []templates.Option {
	var o []templates.Option
	for _, f := range kernels.Flash2Instances {
		o = append(o, templates.Option{Value: fmt.Sprintf("%d,%d,%d", f.Br, f.Bc, f.D), Label: fmt.Sprintf("%d×%d tiles, d=%d", f.Br, f.Bc, f.D)})
	}
	return o
}

func variantOptions() []templates.Option {
	var o []templates.Option
	for _, v := range kernels.Variants() {
		o = append(o, templates.Option{Value: v.Variant.String(), Label: v.Title})
	}
	return o
}

func patternOptions() []templates.Option {
	labels := map[instrument.Pattern]string{
		instrument.PatternNormal: "normal N(0,1)",
		instrument.PatternPeaked: "peaked rows",
		instrument.PatternLarge:  "large logits",
	}
	var o []templates.Option
	for _, p := range instrument.Patterns {
		o = append(o, templates.Option{Value: p.String(), Label: labels[p]})
	}
	return o
}

// render writes a templ component as an HTML response.
func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	return c.Render(r.Context(), w)
}

func (s *Server) sweepPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.SweepView{}
	if hello, ok := s.runner.GPUHello(); ok {
		v.GPU = hello.GPU
	}
	if s.recorded != nil {
		v.HasRecorded = true
		v.RecordedOn = fmt.Sprintf("%s on %s", s.recorded.Source, s.recorded.Recorded.Format("2006-01-02"))
	}
	v.Data = templates.SweepData{GPU: v.GPU != "", HasRecorded: v.HasRecorded, DefaultNs: "64,128,256"}
	if v.GPU != "" {
		v.Data.DefaultNs = "512,1024,2048,4096,8192,16384,32768"
	}
	return render(w, r, http.StatusOK, templates.SweepPage(s.page("Naive against flash, timed", "sweep"), v))
}

// comparePage renders the side-by-side page for the run in the URL, traced
// by both kernels: the same configuration with variant flash2 and naive.
func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v := templates.CompareView{Values: formValues(q), Errors: map[string]string{}}
	q.Set(kernels.FieldVariant, "flash2")
	flash, err := kernels.ParseConfig(q)
	var fe kernels.FieldErrors
	if errors.As(err, &fe) {
		v.Errors = fe.ByField()
	} else if err != nil {
		return err
	}
	naive := flash
	naive.Variant = instrument.VariantNaive
	if err == nil {
		if verr := naive.Validate(); errors.As(verr, &fe) {
			v.Errors = fe.ByField()
			v.Errors["form"] = "naive's trace of this run: " + fe.Error()
			err = verr
		}
	}
	if err == nil {
		step, _ := strconv.Atoi(q.Get("step"))
		v.Data = templates.CompareData{Valid: true, FlashQuery: flash.Values().Encode(), NaiveQuery: naive.Values().Encode(), Step: max(step, 0)}
	}
	return render(w, r, http.StatusOK, templates.ComparePage(s.page("Naive against flash", "compare"), v))
}
