package web

import (
	"net/http"

	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/templates"
)

// ladderRuns are the runs the ladder page offers to step through, one per
// built rung: recorded on an H100 where the recordings hold them.
var ladderRuns = map[string]string{
	"naive_row":   "/step?variant=naive_row&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5",
	"naive":       "/step?variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1",
	"flash1":      "/step?variant=flash1&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5",
	"flash2":      "/step?variant=flash2&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	"flash2_mma":  "/step?variant=flash2_mma&n=256&d=64&br=64&bc=64&pattern=normal&seed=1",
	"flash2_fast": "/step?variant=flash2_fast&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
	"naive_mma":   "/step?variant=naive_mma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1",
}

// ladderPage renders the kernel ladder from the recordings.
func (s *Server) ladderPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.LadderView{Step: ladderRuns}
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		v.Error = "The recorded figures could not be read: " + err.Error()
	}
	v.Table = tab
	return render(w, r, http.StatusOK, templates.LadderPage(s.page("The kernel ladder", "ladder"), v))
}
