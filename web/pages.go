package web

import (
	"flashstep/api"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/sweep"
	"flashstep/templates"
)

func (s *Server) home(w http.ResponseWriter, r *http.Request) error {
	return render(w, r, http.StatusOK, templates.HomePage(s.page("Step through FlashAttention", "home"), lessons.Starters, lessons.Pages))
}

// stepper renders the run form filled from the URL, each field's problem
// beside it, and, for a valid configuration, the data the browser needs to
// start the run at the step the URL names (api.Stepper reads the URL; the
// static site's stepper page reads it the same way, in the browser).
func (s *Server) stepper(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	st, err := api.Stepper(q, func(run kernels.Run) (string, error) { return s.runner.Route(run).Says, nil })
	if err != nil {
		return err
	}
	v := templates.StepperView{
		Values:   st.Values,
		Errors:   st.Errors,
		Valid:    st.Data.Valid,
		Query:    st.Data.Query,
		Summary:  st.Summary,
		Estimate: st.Estimate,
		RunsOn:   st.RunsOn,
		Data:     st.Data,
		Variants: variantOptions(),
		Patterns: patternOptions(),
		Engines:  []templates.Option{{Value: "auto", Label: "auto"}, {Value: instrument.SourceGPU.String(), Label: "GPU"}, {Value: instrument.SourceCPUMirror.String(), Label: "CPU mirror"}},
		Modes:    []templates.Option{{Value: "full", Label: "full"}, {Value: "timing", Label: "timing"}, {Value: "roles", Label: "roles"}},
		GPUTiles: gpuTileOptions(),
		Limits: templates.Limits{MaxN: kernels.MaxN, MaxD: kernels.MaxD, MaxTile: kernels.MaxTile,
			MaxBatch: kernels.MaxBatch, MaxHeads: kernels.MaxHeads, MaxTrace: kernels.FormatBytes(kernels.MaxTraceBytes)},
	}
	pg := s.page("Stepper", "step")
	pg.Embed = v.Data.Embed
	v.Classroom = s.class.View(r, "step", v.Query, v.Data.Embed)
	return render(w, r, http.StatusOK, templates.StepperPage(pg, v))
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func gpuTileOptions() []templates.Option {
	// Rungs compiled at the same tiles (the float32 ones) share an option:
	// its value lists them all, and the form keeps the chosen one of them.
	var o []templates.Option
	var groups [][]*kernels.VariantInfo
	for _, info := range kernels.Variants() {
		if info.Tiles == nil {
			continue
		}
		k := slices.IndexFunc(groups, func(g []*kernels.VariantInfo) bool { return slices.Equal(g[0].Tiles, info.Tiles) })
		if k < 0 {
			groups = append(groups, nil)
			k = len(groups) - 1
		}
		groups[k] = append(groups[k], info)
	}
	for _, g := range groups {
		var names []string
		for _, info := range g {
			names = append(names, info.Name())
		}
		label := names[0]
		if len(g) > 1 {
			label = map[instrument.DType]string{instrument.DTypeF32: "float32", instrument.DTypeBF16: "bf16"}[g[0].DType]
		}
		for _, t := range g[0].Tiles {
			o = append(o, templates.Option{Value: fmt.Sprintf("%s,%d,%d,%d", strings.Join(names, "|"), t.Br, t.Bc, t.D), Label: fmt.Sprintf("%s %s", label, t)})
		}
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
		instrument.PatternNormal: "normal",
		instrument.PatternPeaked: "peaked rows",
		instrument.PatternLarge:  "large logits",
	}
	var o []templates.Option
	for _, p := range instrument.Patterns {
		o = append(o, templates.Option{Value: p.String(), Label: labels[p]})
	}
	return o
}

// render writes a page (templates.Write).
var render = templates.Write

func (s *Server) sweepPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.SweepView{Site: s.site}
	if hello, ok := s.runner.GPUHello(); ok {
		v.GPU = hello.GPU
	}
	if s.recorded != nil {
		v.HasRecorded = true
		v.RecordedOn = fmt.Sprintf("%s on %s", s.recorded.Source, s.recorded.Recorded.Format("2006-01-02"))
	}
	v.Data = templates.SweepData{GPU: v.GPU != "", HasRecorded: v.HasRecorded, DefaultNs: "64,128,256",
		MaxGPUN: sweep.MaxGPUN, MaxCPUN: sweep.MaxCPUN, DefaultVariants: map[string][]string{}}
	engine := instrument.SourceCPUMirror
	if v.GPU != "" {
		v.Data.DefaultNs = "512,1024,2048,4096,8192,16384,32768"
		engine = instrument.SourceGPU
	}
	// The form offers every kernel, forward and backward, and ticks the
	// default sweep's: the forward pass's.
	for _, e := range []instrument.Source{instrument.SourceGPU, instrument.SourceCPUMirror} {
		for _, vr := range sweep.DefaultSpec(e).Variants {
			v.Data.DefaultVariants[e.String()] = append(v.Data.DefaultVariants[e.String()], vr.String())
		}
	}
	for _, info := range kernels.Variants() {
		if info.Decode { // a sweep's runs are square: decoding's rungs have a bench of their own
			continue
		}
		v.Kernels = append(v.Kernels, templates.SweepKernel{Name: info.Name(), DType: info.DType.String(), Backward: info.Backward,
			Ticked: slices.Contains(v.Data.DefaultVariants[engine.String()], info.Name())})
	}
	return render(w, r, http.StatusOK, templates.SweepPage(s.page("Naive against flash, timed", "sweep"), v))
}

// comparePage renders the side-by-side page for the run in the URL, traced
// by both kernels (api.Compare reads the URL; the static site's page reads
// it the same way, in the browser).
func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) error {
	st, err := api.Compare(r.URL.Query())
	if err != nil {
		return err
	}
	v := templates.CompareView{Values: st.Values, Errors: st.Errors, Summary: st.Summary, Offer: st.Offer, OfferText: st.OfferText, Data: st.Data}
	pg := s.page("Naive against flash", "compare")
	pg.Embed = v.Data.Embed
	v.Classroom = s.class.View(r, "compare", v.Data.FlashQuery, v.Data.Embed)
	return render(w, r, http.StatusOK, templates.ComparePage(pg, v))
}
