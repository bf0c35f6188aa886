package runner

import (
	"context"
	"fmt"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/worker"
)

// Router sends each run to the engine that should compute it. A run that
// asks for no engine goes to the GPU when there is one and it runs that
// shape, else to a recording of that very run, else to the CPU mirror.
type Router struct {
	GPU        *GPU // nil on a machine without a GPU
	NoGPU      string
	Recordings *Recordings
	Mirror     Mirror
}

// Route is where one run goes: the one decision that Run, the pages and the
// server's shared computations all read.
type Route struct {
	// Engine is instrument.SourceGPU, SourceRecording or SourceCPUMirror;
	// SourceAny when Err says why the run can go nowhere.
	Engine instrument.Source
	// Key names the numbers the run produces: the run and, on the GPU, the
	// GPU, driver and PTX that compute them. Two runs with one Key have
	// the same trace, byte for byte.
	Key string
	// Says where the numbers come from, for the form before a run.
	Says string
	// Run computes the trace (see Runner).
	Run func(ctx context.Context, emit func([]byte) error) error
	// Err: the run cannot go anywhere here (a kernels.FieldErrors).
	Err error
}

// Route decides where run goes.
func (r *Router) Route(run kernels.Run) Route {
	c := run.Config()
	noGPU := func(msg string) Route {
		return Route{Err: kernels.FieldErrors{{Field: kernels.FieldEngine, Message: msg}},
			Says: "nothing: this server has no GPU"}
	}
	gpu := func() Route {
		return Route{Engine: instrument.SourceGPU, Key: r.GPU.runKey(&c), Says: "the GPU: " + r.GPU.Hello().GPU,
			Run: func(ctx context.Context, emit func([]byte) error) error { return r.GPU.Run(ctx, run, emit) }}
	}
	cpu := func(says string) Route {
		return Route{Engine: instrument.SourceCPUMirror, Key: instrument.SourceCPUMirror.String() + "|" + run.Key(), Says: says,
			Run: func(ctx context.Context, emit func([]byte) error) error { return r.Mirror.Run(ctx, run, emit) }}
	}
	switch c.Engine {
	case instrument.SourceCPUMirror:
		return cpu("the CPU mirror (asked for)")
	case instrument.SourceGPU:
		if r.GPU == nil {
			return noGPU("this server has no GPU (" + r.NoGPU + "): run with engine auto or cpu")
		}
		return gpu()
	}
	if r.GPU != nil && launch.ValidateTraced(&c) == nil {
		return gpu()
	}
	if rec, ok := r.Recordings.Find(&c); ok {
		return Route{Engine: instrument.SourceRecording, Key: instrument.SourceRecording.String() + "|" + rec.Name,
			Says: fmt.Sprintf("a recording made on %s on %s", rec.Header.Label, rec.When().Format("2006-01-02")),
			Run:  rec.replay}
	}
	if c.Timing {
		var timelines []string
		for _, rec := range r.Recordings.All() {
			if rec.Config.Timing {
				timelines = append(timelines, rec.Config.Key())
			}
		}
		msg := "timing mode needs the GPU, and this server has none"
		if c.Roles {
			msg = "roles mode needs the GPU (the CPU mirror has no warps, copies or clocks to record), and this server has none"
		}
		if len(timelines) > 0 {
			msg += "; recorded timelines: " + strings.Join(timelines, " ; ")
		}
		return Route{Err: kernels.FieldErrors{{Field: kernels.FieldMode, Message: msg}}, Says: "nothing: timing mode needs the GPU"}
	}
	if r.GPU != nil {
		return cpu("the CPU mirror (the GPU's compiled tiles do not include this shape)")
	}
	return cpu("the CPU mirror")
}

// Run computes run wherever Route sends it.
func (r *Router) Run(ctx context.Context, run kernels.Run, emit func([]byte) error) error {
	rt := r.Route(run)
	if rt.Err != nil {
		return rt.Err
	}
	return rt.Run(ctx, emit)
}

// Engine describes the server: its GPU, or CPU mode.
func (r *Router) Engine() Engine {
	if r.GPU != nil {
		return r.GPU.Engine()
	}
	detail := noGPU
	if r.NoGPU != "" {
		detail += " (" + r.NoGPU + ")"
	}
	short := mirrorShort
	recs := r.Recordings.All()
	if len(recs) > 0 {
		short = "no GPU here: runs recorded on a GPU (an H100 or H200) replay as recorded, others come from the CPU mirror."
		h := recs[0].Header
		detail += fmt.Sprintf(": runs recorded on %s on %s are replayed as recorded; any other run: %s",
			h.Label, recs[0].When().Format("2006-01-02"), mirrorHow)
	} else {
		detail += ": " + mirrorHow
	}
	return Engine{Source: instrument.SourceCPUMirror, Name: "CPU mirror", Detail: detail, Short: short}
}

// GPUHello is what the worker said of its GPU and kernels, if there is one.
func (r *Router) GPUHello() (worker.Hello, bool) {
	if r.GPU == nil {
		return worker.Hello{}, false
	}
	return r.GPU.Hello(), true
}

// AllRecordings lists the recorded runs.
func (r *Router) AllRecordings() []*Recording { return r.Recordings.All() }
