package api

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"flashstep/kernels"
)

// StepperData is the stepper page's JSON for the browser.
type StepperData struct {
	Valid     bool     `json:"valid"`
	Query     string   `json:"query"`
	Step      int      `json:"step"`       // 1-based, as the page shows it; 0 when the URL names none
	StepError string   `json:"step_error"` // why the URL's step could not be read
	Embed     bool     `json:"embed"`      // inside a lesson: no site chrome, no form
	Panels    []string `json:"panels"`     // the views to show; empty for all
	// MaxFileBytes is the largest trace file a replay reads: the largest
	// trace a run makes, with room for its label.
	MaxFileBytes int64 `json:"max_file_bytes"`
}

// Shows says whether the page shows a view: the panels a URL's panels=
// names, or all of them. The page is sent with the others hidden, so
// nothing on it moves when the script starts.
func (d StepperData) Shows(panel string) bool {
	return len(d.Panels) == 0 || slices.Contains(d.Panels, panel)
}

// StepperPanels are the stepper's views, by the names a URL's panels=
// (and a lesson's widget) use. The first five are the key views, which the
// projector layout fits on one screen; "merge" is split-KV's merge
// (merge_view.js), "pages" a paged cache's block table (page_table_view.js).
var StepperPanels = []string{"grid", "s", "p", "rows", "o", "qkv", "final", "bytes", "timeline", "source", "merge", "pages"}

// StepperState is the stepper page as a URL opens it: the form's values,
// each field's problem, the run's summary, and the data the page's script
// starts from.
type StepperState struct {
	Values   map[string]string `json:"values"`
	Errors   map[string]string `json:"errors"`
	Summary  string            `json:"summary"`
	Estimate string            `json:"estimate"`
	RunsOn   string            `json:"runs_on"`
	Data     StepperData       `json:"data"`
}

// Stepper reads a stepper URL: the form filled from it, each field's
// problem, and for a valid configuration what the page needs to start the
// run at the step the URL names. runsOn says where a valid run would come
// from.
func Stepper(q url.Values, runsOn func(kernels.Run) (string, error)) (StepperState, error) {
	st := StepperState{Values: FormValues(q), Errors: map[string]string{}}
	run, err := kernels.ParseRun(q)
	var fe kernels.FieldErrors
	switch {
	case errors.As(err, &fe):
		st.Errors = fe.ByField()
		st.Summary = "not run yet: fix the highlighted fields"
	case err != nil:
		return StepperState{}, err
	default:
		c := run.Config()
		st.Data.Valid = true
		st.Data.Query = c.Values().Encode()
		st.Summary = Summary(&c)
		st.Estimate = Estimate(&c)
		if st.RunsOn, err = runsOn(run); err != nil {
			st.RunsOn = err.Error()
		}
	}
	st.Data.Step, st.Data.StepError = stepParam(q)
	st.Data.Embed = q.Get("embed") == "1"
	st.Data.Panels = panelsParam(q)
	st.Data.MaxFileBytes = kernels.MaxTraceBytes + 64<<10
	return st, nil
}

// FormValues is what the form shows: the defaults, overridden by whatever the
// URL holds, as typed, so a mistyped value stays in its field beside its error.
func FormValues(q url.Values) map[string]string {
	def := kernels.DefaultConfig()
	vals := map[string]string{}
	for k, v := range def.Values() {
		vals[k] = v[0]
	}
	for _, k := range []string{kernels.FieldVariant, kernels.FieldN, kernels.FieldD, kernels.FieldBr, kernels.FieldBc,
		kernels.FieldBatch, kernels.FieldHeads, kernels.FieldNq, kernels.FieldKVHeads, kernels.FieldCausal, kernels.FieldPattern, kernels.FieldSeed,
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

// stepParam reads the step a URL opens at. Steps count from 1, in the URL as
// on the page; the page clamps a step past the end and says so.
func stepParam(q url.Values) (step int, problem string) {
	s := q.Get("step")
	if s == "" {
		return 0, ""
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Sprintf("step must be a whole number from 1 (got %q): showing step 1", truncateRunes(s, 20))
	}
	return n, ""
}

// panelsParam reads panels=grid,rows: the stepper views a lesson's widget
// shows. Unknown names are dropped; none left means every view.
func panelsParam(q url.Values) []string {
	var out []string
	for _, name := range strings.Split(q.Get("panels"), ",") {
		if slices.Contains(StepperPanels, strings.TrimSpace(name)) {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out
}
