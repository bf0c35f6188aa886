package offline

import (
	"fmt"
	"net/url"
	"sync"

	"flashstep/api"
	"flashstep/kernels"
	"flashstep/recordings"
	"flashstep/sweep"
)

// measured is the hardware counters that ship (recordings/traffic-*.json).
var measured = sync.OnceValues(func() ([]api.MeasuredRun, error) {
	m, err := sweep.LoadTraffic(recordings.Files)
	if err != nil {
		return nil, err
	}
	return api.MeasuredRuns(m), nil
})

// Get answers one of the server's read-only GET APIs that depend on their
// query, with package api's functions as the server does: path is the
// server's (/api/config, /api/source, /api/memory, /api/traffic,
// /api/loop, /api/kernels, of which the site computes only the launched
// kernels: the table itself is a file of the site), or /step and
// /compare, what the server renders those pages from. What differs is only
// where a run comes from: this browser, not a server.
func Get(path, query string) (any, error) {
	v, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("the query: %w", err)
	}
	switch path {
	case "/api/config":
		return api.Config(v, runsOn)
	case "/step":
		// The stepper page as its URL opens it: the site's page is one
		// file, filled in the browser.
		return api.Stepper(v, runsOn)
	case "/compare":
		return api.Compare(v)
	case "/api/kernels":
		return map[string]any{"launched": api.Launched(v)}, nil
	case "/api/source":
		return api.Source(v)
	case "/api/memory":
		return api.Memory(v, api.RecordingsGPU)
	case "/api/traffic":
		m, err := measured()
		if err != nil {
			return nil, err
		}
		return api.Traffic(v, m)
	case "/api/loop":
		return api.Loop(v, "this browser's CPU (WebAssembly)")
	}
	return nil, fmt.Errorf("%s needs a server", path)
}

// runsOn is where the site takes a run from: its recording, or the
// mirror in this browser; what only a GPU makes is refused.
func runsOn(run kernels.Run) (string, error) {
	name, err := Recording(run)
	if err != nil {
		return "", err
	}
	if name != "" {
		return "a recording made on an H100 (" + name + ")", nil
	}
	c := run.Config()
	switch {
	case c.Roles, c.Timing:
		return "", kernels.FieldErrors{{Field: kernels.FieldMode, Message: "timing and roles modes are recorded on a GPU; this static site replays only the recorded runs"}}
	}
	return "the CPU mirror, in this browser", nil
}
