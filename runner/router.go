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

func (r *Router) Run(ctx context.Context, c kernels.Config, emit func([]byte) error) error {
	switch c.Engine {
	case kernels.EngineCPU:
		return r.Mirror.Run(ctx, c, emit)
	case kernels.EngineGPU:
		if r.GPU == nil {
			return kernels.FieldErrors{{Field: kernels.FieldEngine, Message: "this server has no GPU (" + r.NoGPU + "): run with engine auto or cpu"}}
		}
		return r.GPU.Run(ctx, c, emit)
	}
	if r.GPU != nil && launch.Validate(&c) == nil {
		return r.GPU.Run(ctx, c, emit)
	}
	if rec, ok := r.Recordings.Find(&c); ok {
		return rec.replay(ctx, emit)
	}
	if c.Timing {
		var timelines []string
		for _, rec := range r.Recordings.All() {
			if rec.Config.Timing {
				timelines = append(timelines, rec.Config.Key())
			}
		}
		msg := "timing mode needs the GPU, and this server has none"
		if len(timelines) > 0 {
			msg += "; recorded timelines: " + strings.Join(timelines, " ; ")
		}
		return kernels.FieldErrors{{Field: kernels.FieldMode, Message: msg}}
	}
	return r.Mirror.Run(ctx, c, emit)
}

// Engine describes the server: its GPU, or CPU mode.
func (r *Router) Engine() Engine {
	if r.GPU != nil {
		return r.GPU.Engine()
	}
	detail := "No GPU on this server"
	if r.NoGPU != "" {
		detail += " (" + r.NoGPU + ")"
	}
	short := "no GPU here: every run comes from the CPU mirror of its kernel."
	recs := r.Recordings.All()
	if len(recs) > 0 {
		short = "no GPU here: runs recorded on an H100 replay as recorded, others come from the CPU mirror."
		h := recs[0].Header
		detail += fmt.Sprintf(": runs recorded on %s on %s are replayed as recorded; any other run is computed by each kernel's Go mirror, with the kernel's own tile order and float32 arithmetic.",
			h.Label, recs[0].When().Format("2006-01-02"))
	} else {
		detail += ": each kernel's Go mirror computes the trace with the kernel's own tile order and float32 arithmetic."
	}
	return Engine{Source: instrument.SourceCPUMirror, Name: "CPU mirror", Detail: detail, Short: short}
}

// For says which engine would compute c, for the form to show before a run.
func (r *Router) For(c *kernels.Config) string {
	switch {
	case c.Engine == kernels.EngineCPU:
		return "the CPU mirror (asked for)"
	case c.Engine == kernels.EngineGPU && r.GPU == nil:
		return "nothing: this server has no GPU"
	case r.GPU != nil && (c.Engine == kernels.EngineGPU || launch.Validate(c) == nil):
		return "the GPU: " + r.GPU.Hello().GPU
	}
	if rec, ok := r.Recordings.Find(c); ok {
		return fmt.Sprintf("a recording made on %s on %s", rec.Header.Label, rec.When().Format("2006-01-02"))
	}
	if c.Timing {
		return "nothing: timing mode needs the GPU"
	}
	if r.GPU != nil {
		return "the CPU mirror (the GPU's compiled tiles do not include this shape)"
	}
	return "the CPU mirror"
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
