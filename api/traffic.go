package api

import (
	"fmt"
	"net/url"

	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/sweep"
	"flashstep/traffic"
)

// StepTraffic is one step's bytes in both figures: requests to L2, and
// bytes to DRAM under the cache model.
type StepTraffic [4]uint64 // L2 read, L2 write, DRAM read, DRAM write

// MeasuredRun sets a profiled run's counters beside the model's figures.
type MeasuredRun struct {
	Key      string            `json:"key"`
	Query    string            `json:"query"`
	GPU      string            `json:"gpu"`
	Recorded string            `json:"recorded"`
	Model    []traffic.Traffic `json:"model"`
	Measured []traffic.Traffic `json:"measured"`
}

// MeasuredRuns is GET /api/traffic/measured: every profiled run of m (nil:
// none shipped), model against counters.
func MeasuredRuns(m *sweep.MeasuredTraffic) []MeasuredRun {
	out := []MeasuredRun{}
	if m == nil {
		return out
	}
	for _, r := range m.Runs {
		v, _ := url.ParseQuery(r.Query)
		c, err := launch.ParseBenchConfig(v)
		if err != nil {
			continue // LoadTraffic already refused such files
		}
		out = append(out, MeasuredRun{Key: c.Key(), Query: r.Query, GPU: m.GPU + ", driver " + m.Driver,
			Recorded: m.Recorded, Model: traffic.H100.RunTraffic(c), Measured: r.Kernels})
	}
	return out
}

// Traffic is GET /api/traffic: for a run, every step's traffic in trace
// order (the trace's own records carry the L2 figure; the DRAM figure is
// the model's), the whole run's traffic per kernel launch, and the
// hardware counters where measured holds this very run.
func Traffic(v url.Values, measured []MeasuredRun) (map[string]any, error) {
	run, err := ParseRun(v)
	if err != nil {
		return nil, err
	}
	c := run.Config()
	model := traffic.H100
	info := kernels.Info(c.Variant)
	sched := kernels.Schedule(&c)
	steps := make([]StepTraffic, len(sched))
	for k, st := range sched {
		lr, lw := info.Traffic(&c, st.Record())
		dr, dw := model.DRAM(&c, st)
		steps[k] = StepTraffic{lr, lw, dr, dw}
	}
	var this *MeasuredRun
	for i := range measured {
		if measured[i].Key == c.Key() {
			this = &measured[i]
		}
	}
	out := map[string]any{"model": model, "steps": steps, "measured": this}
	// The whole run's traffic walks every step of a batch-head, traced or
	// not: bounded, and said so where a run has too many.
	if traffic.RunSteps(c) <= traffic.MaxRunSteps {
		out["run"] = model.RunTraffic(c)
	} else {
		out["run_note"] = fmt.Sprintf("the whole-run traffic is modelled tile by tile, at most %d steps of one batch-head; this run has more: raise Br and Bc to see it", traffic.MaxRunSteps)
	}
	return out, nil
}
