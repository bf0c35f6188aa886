package web

import (
	"fmt"
	"net/http"
	"net/url"

	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/traffic"
)

// stepTraffic is one step's bytes in both figures: requests to L2, and
// bytes to DRAM under the cache model.
type stepTraffic [4]uint64 // L2 read, L2 write, DRAM read, DRAM write

// trafficAPI gives, for a run, every step's traffic in trace order (the
// trace's own records carry the L2 figure; the DRAM figure is the model's)
// and the whole run's traffic per kernel launch, with the hardware counters
// where they were measured for this very run.
func (s *Server) trafficAPI(w http.ResponseWriter, r *http.Request) error {
	run, err := parseRun(r.URL.Query())
	if err != nil {
		return err
	}
	c := run.Config()
	model := traffic.H100
	info := kernels.Info(c.Variant)
	sched := kernels.Schedule(&c)
	steps := make([]stepTraffic, len(sched))
	for k, st := range sched {
		lr, lw := info.Traffic(&c, st.Record())
		dr, dw := model.DRAM(&c, st)
		steps[k] = stepTraffic{lr, lw, dr, dw}
	}
	out := map[string]any{
		"model":    model,
		"steps":    steps,
		"measured": s.measuredTraffic(&c),
	}
	// The whole run's traffic walks every step of a batch-head, traced or
	// not: bounded, and said so where a run has too many.
	if traffic.RunSteps(c) <= traffic.MaxRunSteps {
		out["run"] = model.RunTraffic(c)
	} else {
		out["run_note"] = fmt.Sprintf("the whole-run traffic is modelled tile by tile, at most %d steps of one batch-head; this run has more: raise Br and Bc to see it", traffic.MaxRunSteps)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// measuredTraffic is the recorded counters of run c, if it was profiled.
func (s *Server) measuredTraffic(c *kernels.Config) *measuredRun {
	for _, row := range s.trafficRows() {
		if row.Key == c.Key() {
			return &row
		}
	}
	return nil
}

// measuredRun sets a profiled run's counters beside the model's figures.
type measuredRun struct {
	Key      string            `json:"key"`
	Query    string            `json:"query"`
	GPU      string            `json:"gpu"`
	Recorded string            `json:"recorded"`
	Model    []traffic.Traffic `json:"model"`
	Measured []traffic.Traffic `json:"measured"`
}

func (s *Server) trafficRows() []measuredRun {
	if s.traffic == nil {
		return nil
	}
	var out []measuredRun
	for _, r := range s.traffic.Runs {
		v, _ := url.ParseQuery(r.Query)
		c, err := launch.ParseBenchConfig(v)
		if err != nil {
			continue // LoadTraffic already refused such files
		}
		out = append(out, measuredRun{Key: c.Key(), Query: r.Query, GPU: s.traffic.GPU + ", driver " + s.traffic.Driver,
			Recorded: s.traffic.Recorded, Model: traffic.H100.RunTraffic(c), Measured: r.Kernels})
	}
	return out
}

// trafficTable lists every profiled run, model against counters.
func (s *Server) trafficTable(w http.ResponseWriter, r *http.Request) error {
	rows := s.trafficRows()
	if rows == nil {
		rows = []measuredRun{}
	}
	writeJSON(w, http.StatusOK, rows)
	return nil
}
