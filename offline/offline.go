// Package offline is what the static site computes in the browser, in a
// Web Worker's WebAssembly (cmd/sitewasm): which shipped recording holds a
// run, a run's trace from its kernel's CPU mirror, and a checkpoint's
// grade. Each is the server's own code (kernels.MirrorTrace,
// lessons.Checkpoint.Judge), so that a configuration's trace is the same
// bytes and an answer gets the same verdict on the site as on a server.
package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lessons"
	"flashstep/problem"
	"flashstep/recordings"
)

// Run parses a run's URL form as the server's API does: an unknown field,
// or a value out of its limits, is an error naming the field.
func Run(query string) (kernels.Run, error) {
	v, err := url.ParseQuery(query)
	if err != nil {
		return kernels.Run{}, fmt.Errorf("the run's query: %w", err)
	}
	if errs := kernels.UnknownFields(v); len(errs) > 0 {
		return kernels.Run{}, errs
	}
	return kernels.ParseRun(v)
}

// recorded maps a run's key to the recording that holds it, from
// recordings/list.txt: the runs a server without a GPU replays rather than
// mirrors.
var recorded = sync.OnceValues(func() (map[string]string, error) {
	list, err := recordings.Files.ReadFile("list.txt")
	if err != nil {
		return nil, err
	}
	entries, err := recordings.ParseList(bytes.NewReader(list))
	if err != nil {
		return nil, err
	}
	byKey := map[string]string{}
	for _, e := range entries {
		r, err := Run(e.Query)
		if err != nil {
			return nil, fmt.Errorf("recording %s: %w", e.Name, err)
		}
		byKey[r.Key()] = e.Name
	}
	return byKey, nil
})

// Recording names the recording (recordings/NAME.fstrace) that holds run's
// trace, or "" when none does and the mirror computes it. As the server's
// router: a run that asks for the CPU mirror (engine=cpu) is mirrored even
// where a recording holds it, and one that asks for the GPU
// (engine=gpu) is refused, naming the field.
func Recording(run kernels.Run) (string, error) {
	byKey, err := recorded()
	if err != nil {
		return "", err
	}
	switch run.Config().Engine {
	case instrument.SourceCPUMirror:
		return "", nil
	case instrument.SourceGPU:
		return "", errNoGPU
	}
	return byKey[run.Key()], nil
}

// errNoGPU refuses engine=gpu, as a server without a GPU does.
var errNoGPU = kernels.FieldErrors{{Field: kernels.FieldEngine, Message: "engine=gpu needs a server with a GPU; this static site has none (run with engine auto or cpu)"}}

// ErrNeedsServer is the refusal of a run that only a server can make: one
// on the GPU, or in timing or roles mode that no recording holds.
var ErrNeedsServer = errors.New("needs a server")

// Trace computes run's trace with its kernel's CPU mirror, emitting the
// header and then each record as the server's CPU engine does. It refuses
// what the mirror cannot make (a GPU run, timing or roles mode) with an
// error that wraps ErrNeedsServer and names the field.
func Trace(ctx context.Context, run kernels.Run, emit func(chunk []byte) error) error {
	c := run.Config()
	switch {
	case c.Engine == instrument.SourceGPU:
		return fmt.Errorf("%w: %w", ErrNeedsServer, errNoGPU)
	case c.Roles:
		return fmt.Errorf("%w: mode=roles records the warps' roles on a GPU; only the recorded runs replay here", ErrNeedsServer)
	case c.Timing:
		return fmt.Errorf("%w: mode=timing records the SMs' clocks on a GPU; only the recorded runs replay here", ErrNeedsServer)
	}
	return kernels.MirrorTrace(ctx, run, emit)
}

// Grade grades answer to checkpoint id of lesson slug, as the server's
// POST /api/checkpoints/{lesson}/{id} does. traceOf gives the encoded
// trace of the checkpoint's run (its recording, or what Trace makes); it
// is called only for a checkpoint graded against one (NeedsTrace).
func Grade(slug, id, answer string, reveal bool, traceOf func(kernels.Run) ([]byte, error)) (lessons.Judged, error) {
	l, err := lesson(slug)
	if err != nil {
		return lessons.Judged{}, err
	}
	cp, ok := l.Checkpoint(id)
	if !ok {
		return lessons.Judged{}, fmt.Errorf("lesson %s has no checkpoint %q", slug, id)
	}
	var t *lessons.Trace
	if cp.NeedsTrace() {
		run, err := cp.Run.Check()
		if err != nil {
			return lessons.Judged{}, err
		}
		trace, err := traceOf(run)
		if err != nil {
			return lessons.Judged{}, fmt.Errorf("checkpoint %s's run: %w", id, err)
		}
		h, recs, err := instrument.ReadAll(bytes.NewReader(trace))
		if err != nil {
			return lessons.Judged{}, fmt.Errorf("checkpoint %s's trace: %w", id, err)
		}
		if len(recs) != h.Records {
			return lessons.Judged{}, errors.New("the run's trace is incomplete")
		}
		t = lessons.NewTrace(h, recs)
	}
	return cp.Judge(t, answer, reveal)
}

// SiteTrace is a run's trace as the static site has it: its recording,
// read by fetch (recordings/NAME.fstrace, NAME from Recording), or the
// mirror's, computed here.
func SiteTrace(ctx context.Context, run kernels.Run, fetch func(name string) ([]byte, error)) ([]byte, error) {
	name, err := Recording(run)
	if err != nil {
		return nil, err
	}
	if name != "" {
		return fetch(name)
	}
	var buf bytes.Buffer
	err = Trace(ctx, run, func(b []byte) error { buf.Write(b); return nil })
	return buf.Bytes(), err
}

// lessonsRead holds each lesson parsed once: a page grades many answers.
var lessonsRead sync.Map // slug → func() (*lessons.Lesson, error)

func lesson(slug string) (*lessons.Lesson, error) {
	f, _ := lessonsRead.LoadOrStore(slug, sync.OnceValues(func() (*lessons.Lesson, error) { return lessons.LoadLesson(lessons.CourseFiles, slug) }))
	return f.(func() (*lessons.Lesson, error))()
}

// ErrorJSON is err as the server's API answers it: {"error": "..."} and,
// for a configuration's invalid fields, "fields" naming each with its limit.
func ErrorJSON(err error) string {
	body := problem.Body{Error: err.Error()}
	if p, ok := problem.As(err); ok {
		body = p.Body()
	}
	b, _ := json.Marshal(body)
	return string(b)
}
