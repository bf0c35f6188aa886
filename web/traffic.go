package web

import (
	"net/http"

	"flashstep/api"
)

// trafficAPI gives, for a run, every step's traffic and the whole run's,
// with the hardware counters where they were measured for this very run
// (api.Traffic).
func (s *Server) trafficAPI(w http.ResponseWriter, r *http.Request) error {
	out, err := api.Traffic(r.URL.Query(), api.MeasuredRuns(s.traffic))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// trafficTable lists every profiled run, model against counters.
func (s *Server) trafficTable(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.MeasuredRuns(s.traffic))
	return nil
}
