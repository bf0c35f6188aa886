package web

import (
	"net/http"

	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/templates"
)

// ladderRuns are the runs the ladder page offers to step through, one per
// built rung (its registry entry's StepRun): recorded on an H100 where the
// recordings hold them.
func ladderRuns() map[string]string {
	out := map[string]string{}
	for _, info := range kernels.Variants() {
		out[info.Name()] = info.StepRun
	}
	return out
}

// ladderPage renders the kernel ladder from the recordings.
func (s *Server) ladderPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.LadderView{Step: ladderRuns()}
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		v.Error = "The recorded figures could not be read: " + err.Error()
	}
	v.Table = tab
	return render(w, r, http.StatusOK, templates.LadderPage(s.page("The kernel ladder", "ladder"), v))
}
