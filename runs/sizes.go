package runs

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"sync"

	"flashstep/kernels"
	"flashstep/problem"
)

// What a student downloads to follow a run, compressed and not, which the
// presenter's room bar shows (GET /api/trace/bytes). Measuring compresses
// the whole trace, so each run is measured once however many ask at once
// (a room's presenters, its reconnects), the last runs' figures are kept,
// and a bounded number of measurements run at once. The trace itself is
// read through the hub, as any client's.

// Sizes is what one student downloads to follow a run: the encoded
// trace, and the same gzip-compressed (the HTTP fallback) and deflated
// (a websocket with permessage-deflate). Float arrays compress poorly,
// which is the point of showing it.
type Sizes struct {
	Query   string  `json:"query"`
	Raw     int     `json:"raw"`
	Gzip    int     `json:"gzip"`
	Deflate int     `json:"deflate"`
	Ratio   float64 `json:"ratio"` // gzip / raw
}

// sizeMemo remembers the last runs' sizes and the measurements under way.
type sizeMemo struct {
	mu       sync.Mutex
	byQ      map[string]Sizes
	keys     []string
	inFlight map[string]*sizeFlight
	slots    chan struct{} // measurements at once
}

// sizeFlight is one measurement under way; it stops when every client
// waiting for it has gone.
type sizeFlight struct {
	done    chan struct{}
	sz      Sizes
	err     error
	waiters int
	cancel  context.CancelFunc
}

const (
	keptSizes       = 32
	sizeMeasurement = 2 // at once: each compresses up to a 32 MiB trace
)

func newSizeMemo() sizeMemo {
	return sizeMemo{byQ: map[string]Sizes{}, inFlight: map[string]*sizeFlight{}, slots: make(chan struct{}, sizeMeasurement)}
}

// Sizes is r's figures: kept, being measured for another client, or
// measured now if a measurement's slot is free (problem.Busy if none is).
// frame is the most a websocket frame of the trace holds: the stream
// deflates each frame on its own.
func (h *Hub) Sizes(ctx context.Context, r kernels.Run, addr string, frame int) (Sizes, error) {
	c := r.Config()
	q := c.Values().Encode()
	sz := &h.sizes
	sz.mu.Lock()
	if tb, ok := sz.byQ[q]; ok {
		sz.mu.Unlock()
		return tb, nil
	}
	f := sz.inFlight[q]
	if f == nil {
		select {
		case sz.slots <- struct{}{}:
		default:
			sz.mu.Unlock()
			return Sizes{}, &problem.Error{Code: problem.Busy, Message: "the server is measuring other traces' sizes: try again in a few seconds", RetryAfter: h.opts.RetryAfter}
		}
		mctx, cancel := context.WithCancel(context.Background())
		f = &sizeFlight{done: make(chan struct{}), cancel: cancel}
		sz.inFlight[q] = f
		go func() {
			defer cancel()
			f.sz, f.err = h.measure(mctx, r, addr, frame)
			sz.mu.Lock()
			delete(sz.inFlight, q)
			if f.err == nil {
				if len(sz.keys) >= keptSizes {
					delete(sz.byQ, sz.keys[0])
					sz.keys = sz.keys[1:]
				}
				sz.byQ[q] = f.sz
				sz.keys = append(sz.keys, q)
			}
			sz.mu.Unlock()
			<-sz.slots
			close(f.done)
		}()
	}
	f.waiters++
	sz.mu.Unlock()
	select {
	case <-f.done:
		return f.sz, f.err
	case <-ctx.Done():
		sz.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			f.cancel()
		}
		sz.mu.Unlock()
		return Sizes{}, ctx.Err()
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(b []byte) (int, error) { c.n += len(b); return len(b), nil }

// measure compresses the trace as the server would send it: gzip at the
// level of /api/trace, deflate per websocket frame as gorilla does (level
// 1, no context kept between frames).
func (h *Hub) measure(ctx context.Context, r kernels.Run, addr string, frameBytes int) (Sizes, error) {
	raw, gz, defl := &countWriter{}, &countWriter{}, &countWriter{}
	zw, _ := gzip.NewWriterLevel(gz, gzip.BestSpeed)
	fw, _ := flate.NewWriter(defl, flate.BestSpeed)
	var frame []byte
	flushFrame := func() {
		if len(frame) > 0 {
			fw.Write(frame)
			fw.Flush()
			fw.Reset(defl)
			frame = frame[:0]
		}
	}
	chunks, err := h.Collect(ctx, r, addr)
	if err != nil {
		return Sizes{}, err
	}
	for _, chunk := range chunks {
		raw.Write(chunk)
		zw.Write(chunk)
		if len(frame)+len(chunk) > frameBytes {
			flushFrame()
		}
		frame = append(frame, chunk...)
	}
	flushFrame()
	zw.Close()
	c := r.Config()
	tb := Sizes{Query: c.Values().Encode(), Raw: raw.n, Gzip: gz.n, Deflate: defl.n}
	if raw.n > 0 {
		tb.Ratio = float64(gz.n) / float64(raw.n)
	}
	return tb, nil
}
