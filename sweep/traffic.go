package sweep

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"

	"flashstep/launch"
	"flashstep/traffic"
)

// MeasuredTraffic is a file of hardware counters read by Nsight Compute for
// a few runs, to hold the traffic model to (traffic-*.json in recordings).
type MeasuredTraffic struct {
	GPU      string        `json:"gpu"`
	Driver   string        `json:"driver"`
	Recorded string        `json:"recorded"`
	Command  string        `json:"command"`
	Runs     []MeasuredRun `json:"runs"`
}

// MeasuredRun is one profiled run: its kernels' counters, in bytes.
type MeasuredRun struct {
	Query   string            `json:"query"`
	Kernels []traffic.Traffic `json:"kernels"`
}

// LoadTraffic reads the measured counters, if the file is there; every run
// in it must be one the GPU runs.
func LoadTraffic(files fs.FS) (*MeasuredTraffic, error) {
	names, _ := fs.Glob(files, "traffic-*.json")
	if len(names) == 0 {
		return nil, nil
	}
	b, err := fs.ReadFile(files, names[0])
	if err != nil {
		return nil, err
	}
	var m MeasuredTraffic
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", names[0], err)
	}
	for _, r := range m.Runs {
		v, err := url.ParseQuery(r.Query)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[0], err)
		}
		if _, err := launch.ParseBenchConfig(v); err != nil {
			return nil, fmt.Errorf("%s: run %s: %w", names[0], r.Query, err)
		}
	}
	return &m, nil
}
