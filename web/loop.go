package web

import (
	"net/http"

	"flashstep/api"
)

// GET /api/loop?<a run, as /step names it>&q=0&bh=0&slip=stale-max runs
// the debugging lesson's tiled-attention loop over one q-tile twice, correctly and
// with the slips named, and answers both runs' m, l and O after every
// kv-tile and where each row's numbers part. Every bad field is a 400 that
// names the field and its limit.

func (s *Server) loopAPI(w http.ResponseWriter, r *http.Request) error {
	ans, err := api.Loop(r.URL.Query(), "this server's CPU")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}
