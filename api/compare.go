package api

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// CompareData is the side-by-side page's JSON for the browser.
type CompareData struct {
	Valid      bool   `json:"valid"`
	FlashQuery string `json:"flash_query"`
	NaiveQuery string `json:"naive_query"`
	Step       int    `json:"step"` // 1-based, like the stepper's
	Embed      bool   `json:"embed"`
	// Pair is the kernels: "f32" (naive and flash2), "bf16" (naive_mma and
	// flash2_fast) or "bwd" (the backward pair, naive_bwd and flash2_bwd).
	Pair string `json:"pair"`
}

// CompareFields are the fields the side-by-side form has; an error of any
// other field is said above the form.
var CompareFields = []string{"n", "d", "br", "bc", "seed", "pattern", "causal", "trace_q", "pair"}

// CompareState is the side-by-side page as a URL opens it.
type CompareState struct {
	Values    map[string]string `json:"values"`
	Errors    map[string]string `json:"errors"`
	Summary   string            `json:"summary"`
	Offer     string            `json:"offer"` // a link to the part of an oversized run that fits
	OfferText string            `json:"offer_text"`
	Data      CompareData       `json:"data"`
}

// Compare reads a side-by-side URL: the same configuration with variant
// flash2 and naive (or the bf16 or backward pair). A run whose trace would
// pass the size limit gets an offer of the part that fits, as the
// stepper's form does.
func Compare(q url.Values) (CompareState, error) {
	q = cloneValues(q) // the pair's variant is set on it
	v := CompareState{Values: FormValues(q), Errors: map[string]string{}}
	// The pair: float32 on CUDA cores, or bf16 on tensor cores.
	flashV, naiveV := instrument.VariantFlash2, instrument.VariantNaive
	switch q.Get("pair") {
	case "", "f32":
	case "bf16":
		flashV, naiveV = instrument.VariantFlash2Fast, instrument.VariantNaiveMMA
	case "bwd": // the backward pass: recomputing P against reading it back
		flashV, naiveV = instrument.VariantFlash2Bwd, instrument.VariantNaiveBwd
	default:
		v.Errors["pair"] = fmt.Sprintf("pair must be f32, bf16 or bwd (got %q)", truncateRunes(q.Get("pair"), 20))
	}
	v.Values["pair"] = q.Get("pair")
	q.Set(kernels.FieldVariant, flashV.String())
	flash, err := kernels.ParseConfig(q)
	naive := flash
	naive.Variant = naiveV
	if err == nil && v.Errors["pair"] != "" {
		err = kernels.FieldErrors{{Field: "pair", Message: v.Errors["pair"]}}
	}
	if err == nil {
		err = naive.Validate()
	}
	var fe kernels.FieldErrors
	if errors.As(err, &fe) {
		v.Errors = fe.ByField()
		// Errors of fields this form lacks (the trace size names the traced
		// batch-heads) are said above the form, not lost.
		var others []string
		for _, e := range fe {
			if !slices.Contains(CompareFields, e.Field) {
				others = append(others, e.Message)
			}
		}
		if len(others) > 0 {
			v.Errors["form"] = strings.Join(others, "; ")
		}
		if part, ok := fittingBoth(flash, naive); ok && len(others) > 0 {
			pq := part.Values()
			pq.Del(kernels.FieldVariant)
			v.Offer = "/compare?" + pq.Encode()
			v.OfferText = fmt.Sprintf("Trace q-tiles %d–%d of %d (rows %d–%d) instead", part.TraceQ.Lo, part.TraceQ.Hi-1, part.Tr(), part.TraceQ.Lo*part.Br, min(part.N, part.TraceQ.Hi*part.Br)-1)
		}
	} else if err != nil {
		return CompareState{}, err
	}
	if err == nil {
		v.Summary = strings.TrimPrefix(Summary(&flash), flash.Variant.String()+" · ")
		switch flash.Variant {
		case instrument.VariantFlash2Fast:
			v.Summary = "bf16 on tensor cores · " + v.Summary
		case instrument.VariantFlash2Bwd:
			v.Summary = "the backward pass · " + v.Summary
		}
		if flash.TraceQ != (instrument.Range{}) {
			v.Summary += fmt.Sprintf(" · q-tiles %d–%d traced", flash.TracedQ().Lo, flash.TracedQ().Hi-1)
		}
		step, _ := strconv.Atoi(q.Get("step"))
		pair := map[instrument.Variant]string{instrument.VariantFlash2: "f32", instrument.VariantFlash2Fast: "bf16", instrument.VariantFlash2Bwd: "bwd"}[flash.Variant]
		v.Data = CompareData{Valid: true, FlashQuery: flash.Values().Encode(), NaiveQuery: naive.Values().Encode(), Step: max(step, 1), Pair: pair}
	}
	v.Data.Embed = q.Get("embed") == "1"
	return v, nil
}

// fittingBoth is the run traced over the longest run of q-tiles whose trace
// fits for both kernels.
func fittingBoth(flash, naive kernels.Config) (kernels.Config, bool) {
	if flash.N < 1 || flash.Br < 1 || flash.Bc < 1 || flash.D < 1 {
		return flash, false
	}
	f, okF := flash.FittingPart()
	n, okN := naive.FittingPart()
	if !okF || !okN {
		return flash, false
	}
	if n.TraceQ.Hi < f.TraceQ.Hi {
		f.TraceQ = n.TraceQ
	}
	f.TraceBH = instrument.Range{} // one batch-head is all a compare run has
	return f, f.Validate() == nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}
