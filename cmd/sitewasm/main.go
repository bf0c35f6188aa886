//go:build js && wasm

// Command sitewasm is the static site's WebAssembly: package offline's
// functions, given to the page's Web Worker as globalThis.flashstep. It
// runs in a worker so that a long mirror run never blocks the page.
//
//	flashstep.provide(name, bytes)             hand over recordings/NAME.fstrace
//	flashstep.recording(query) → Promise       the recording that holds a run, or ""
//	flashstep.trace(id, query, onChunk) → Promise  the mirror's trace, chunk by chunk
//	flashstep.cancel(id)                       stop trace id's run
//	flashstep.grade(slug, id, answer, reveal) → Promise of JSON
//	flashstep.get(path, query) → Promise of JSON  a read-only GET API's answer
//
// Errors reject with the server's API error JSON, {"error":
// "...", "fields": [...]}, so that the page shows them as it shows a
// server's.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall/js"
	"time"

	"flashstep/kernels"
	"flashstep/offline"
	"flashstep/recordings"
)

func main() {
	api := js.Global().Get("Object").New()
	api.Set("provide", js.FuncOf(provide))
	api.Set("recording", js.FuncOf(recording))
	api.Set("trace", js.FuncOf(trace))
	api.Set("cancel", js.FuncOf(cancel))
	api.Set("grade", js.FuncOf(grade))
	api.Set("get", js.FuncOf(get))
	js.Global().Set("flashstep", api)
	recordings.Fetch = fetchRecording
	select {} // the functions stay callable for the worker's life
}

func bytesOf(v js.Value) []byte {
	if v.IsNull() || v.IsUndefined() {
		return nil
	}
	b := make([]byte, v.Get("length").Int())
	js.CopyBytesToGo(b, v)
	return b
}

func jsError(err error) js.Value {
	return js.Global().Get("Error").New(offline.ErrorJSON(err))
}

func provide(_ js.Value, args []js.Value) any {
	recordings.Provide(args[0].String(), bytesOf(args[1]))
	return nil
}

func recording(_ js.Value, args []js.Value) any {
	query := args[0].String()
	return promise(func() (any, error) {
		run, err := offline.Run(query)
		if err != nil {
			return nil, err
		}
		return offline.Recording(run)
	})
}

// promise runs work in a goroutine (the mirror's blocks are goroutines,
// and a call from JavaScript must not block on them) and settles a Promise
// with what it returns.
func promise(work func() (any, error)) any {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, settle []js.Value) any {
		resolve, reject := settle[0], settle[1]
		go func() {
			defer executor.Release() // the Promise has called it, once
			v, err := work()
			if err != nil {
				reject.Invoke(jsError(err))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}

// chunkBytes is about how much of a trace one message to the page holds.
const chunkBytes = 256 << 10

// running holds the cancel of each trace under way, by the page's id.
var running sync.Map // id (float64) → context.CancelFunc

func trace(_ js.Value, args []js.Value) any {
	id, query, onChunk := args[0].Float(), args[1].String(), args[2]
	ctx, stop := context.WithCancel(context.Background())
	running.Store(id, stop)
	return promise(func() (any, error) {
		defer running.Delete(id)
		defer stop()
		run, err := offline.Run(query)
		if err != nil {
			return nil, err
		}
		// Records go out in chunks of about chunkBytes, each followed by
		// a pause that hands the thread back to JavaScript: Go's js/wasm
		// runs every ready goroutine before it returns, so without one the
		// worker would read no cancel, and send no chunk, until the run
		// was done.
		var buf []byte
		flush := func() {
			if len(buf) == 0 {
				return
			}
			u8 := js.Global().Get("Uint8Array").New(len(buf))
			js.CopyBytesToJS(u8, buf)
			onChunk.Invoke(u8)
			buf = buf[:0]
			time.Sleep(time.Millisecond)
		}
		err = offline.Trace(ctx, run, func(chunk []byte) error {
			buf = append(buf, chunk...)
			if len(buf) >= chunkBytes {
				flush()
			}
			return ctx.Err()
		})
		if err == nil {
			flush()
		}
		return nil, err
	})
}

func cancel(_ js.Value, args []js.Value) any {
	if stop, ok := running.Load(args[0].Float()); ok {
		stop.(context.CancelFunc)()
	}
	return nil
}

func grade(_ js.Value, args []js.Value) any {
	slug, id, answer, reveal := args[0].String(), args[1].String(), args[2].String(), args[3].Bool()
	return promise(func() (any, error) {
		j, err := offline.Grade(slug, id, answer, reveal, func(run kernels.Run) ([]byte, error) {
			return offline.SiteTrace(context.Background(), run, fetchRecording)
		})
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(j)
		return string(b), err
	})
}

// fetchRecording fetches recordings/NAME.fstrace from the site, relative
// to the worker's script (static/js/): it blocks its goroutine until the
// page's fetch settles.
func fetchRecording(name string) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	var onBody, onFail js.Func
	onFail = js.FuncOf(func(_ js.Value, args []js.Value) any {
		done <- result{err: fmt.Errorf("recording %s: %s", name, args[0].Call("toString").String())}
		return nil
	})
	onBody = js.FuncOf(func(_ js.Value, args []js.Value) any {
		u8 := js.Global().Get("Uint8Array").New(args[0])
		b := make([]byte, u8.Get("length").Int())
		js.CopyBytesToGo(b, u8)
		done <- result{b: b}
		return nil
	})
	defer onBody.Release()
	defer onFail.Release()
	onResponse := js.FuncOf(func(_ js.Value, args []js.Value) any {
		res := args[0]
		if !res.Get("ok").Bool() {
			done <- result{err: fmt.Errorf("recording %s: %d", name, res.Get("status").Int())}
			return nil
		}
		res.Call("arrayBuffer").Call("then", onBody, onFail)
		return nil
	})
	defer onResponse.Release()
	js.Global().Call("fetch", "../../recordings/"+name+".fstrace").Call("then", onResponse, onFail)
	r := <-done
	return r.b, r.err
}

func get(_ js.Value, args []js.Value) any {
	path, query := args[0].String(), args[1].String()
	return promise(func() (any, error) {
		v, err := offline.Get(path, query)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		return string(b), err
	})
}
