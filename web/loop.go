package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"flashstep/kernels"
	"flashstep/lessons/loop"
)

// GET /api/loop?<a run, as /step names it>&q=0&bh=0&slip=stale-max runs
// the debugging lesson's tiled-attention loop over one q-tile twice, correctly and
// with the slips named, and answers both runs' m, l and O after every
// kv-tile and where each row's numbers part. Every bad field is a 400 that
// names the field and its limit.

type loopAnswer struct {
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

func (s *Server) loopAPI(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	if errs := kernels.UnknownFields(v, "q", "bh", "slip"); len(errs) > 0 {
		return errs
	}
	run, err := kernels.ParseRun(v)
	var errs kernels.FieldErrors
	if err != nil && !errors.As(err, &errs) {
		return err
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
			return verr
		}
	}
	if len(errs) > 0 {
		return errs
	}
	c := run.Config()
	ans := loopAnswer{Run: c.Values().Encode(), Q: q, BH: bh, Br: c.Br, D: c.D,
		Rows: min(c.Br, c.N-q*c.Br), FirstRow: q * c.Br,
		Correct: loop.Run(&c, bh, q, nil), Slipped: loop.Run(&c, bh, q, slips),
		Source: "the debugging lesson's loop on this server's CPU, float32, on the run's inputs"}
	for row := range ans.Rows {
		ans.Parts = append(ans.Parts, loop.Part(ans.Correct, ans.Slipped, row, c.D))
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}
