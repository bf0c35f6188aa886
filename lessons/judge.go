package lessons

import (
	"errors"
	"strings"

	"flashstep/grading"
)

// Judged is a checkpoint's verdict as the server's API and the static
// site's WebAssembly both send it: the grade, and where the numbers it was
// graded against came from.
type Judged struct {
	grading.Verdict
	Source string `json:"source"` // the trace's label, or the checkpoint's own source
}

// Judge grades answer (or, with reveal, gives up and shows the answer)
// against what trace shows: trace is the checkpoint's run (nil for one
// that NeedsTrace says needs none). The one grading path of the server and
// of the static site, so that the same answer gets the same verdict in both.
func (c *Checkpoint) Judge(trace *Trace, answer string, reveal bool) (Judged, error) {
	source := c.Source()
	if c.NeedsTrace() {
		if trace == nil {
			return Judged{}, errors.New("checkpoint " + c.ID + " is graded against its run's trace, and none was given")
		}
		source = strings.TrimSpace(trace.H.Label)
	}
	sol, err := c.Solve(trace)
	if err != nil {
		return Judged{}, err
	}
	return Judged{Verdict: c.Grade(answer, reveal, sol), Source: source}, nil
}
