package web

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"net/http"
	"sync"

	"flashstep/client"
	"flashstep/kernels"
	"flashstep/problem"
)

// GET /api/trace/bytes?<run>: what a student downloads to follow a run,
// compressed and not, which the presenter's room bar shows. Measuring
// compresses the whole trace, so each run is measured once however many
// ask at once (a room's presenters, its reconnects), the last runs'
// figures are kept, and a bounded number of measurements run at once.

// traceBytes is what one student downloads to follow a run: the encoded
// trace, and the same gzip-compressed (the HTTP fallback) and deflated
// (a websocket with permessage-deflate). Float arrays compress poorly,
// which is the point of showing it.
type traceBytes struct {
	Query   string  `json:"query"`
	Raw     int     `json:"raw"`
	Gzip    int     `json:"gzip"`
	Deflate int     `json:"deflate"`
	Ratio   float64 `json:"ratio"` // gzip / raw
}

// traceSizes remembers the last runs' sizes and the measurements under way.
type traceSizes struct {
	mu       sync.Mutex
	byQ      map[string]traceBytes
	keys     []string
	inFlight map[string]*sizeFlight
	slots    chan struct{} // measurements at once
}

// sizeFlight is one measurement under way; it stops when every client
// waiting for it has gone.
type sizeFlight struct {
	done    chan struct{}
	tb      traceBytes
	err     error
	waiters int
	cancel  context.CancelFunc
}

const (
	keptSizes       = 32
	sizeMeasurement = 2 // at once: each compresses up to a 32 MiB trace
)

func newTraceSizes() traceSizes {
	return traceSizes{byQ: map[string]traceBytes{}, inFlight: map[string]*sizeFlight{}, slots: make(chan struct{}, sizeMeasurement)}
}

func (s *Server) traceBytesAPI(w http.ResponseWriter, r *http.Request) error {
	run, err := parseRun(r.URL.Query())
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK) // what a GET would answer, without measuring
		return nil
	}
	tb, err := s.traceSize(r.Context(), run, client.Addr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tb)
	return nil
}

// traceSize is r's figures: kept, being measured for another client, or
// measured now if a measurement's slot is free.
func (s *Server) traceSize(ctx context.Context, r kernels.Run, addr string) (traceBytes, error) {
	c := r.Config()
	q := c.Values().Encode()
	sz := &s.sizes
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
			return traceBytes{}, problem.New(problem.Busy, "the server is measuring other traces' sizes: try again in a few seconds")
		}
		mctx, cancel := context.WithCancel(context.Background())
		f = &sizeFlight{done: make(chan struct{}), cancel: cancel}
		sz.inFlight[q] = f
		go func() {
			defer cancel()
			f.tb, f.err = s.measureTrace(mctx, r, addr)
			sz.mu.Lock()
			delete(sz.inFlight, q)
			if f.err == nil {
				if len(sz.keys) >= keptSizes {
					delete(sz.byQ, sz.keys[0])
					sz.keys = sz.keys[1:]
				}
				sz.byQ[q] = f.tb
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
		return f.tb, f.err
	case <-ctx.Done():
		sz.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			f.cancel()
		}
		sz.mu.Unlock()
		return traceBytes{}, ctx.Err()
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(b []byte) (int, error) { c.n += len(b); return len(b), nil }

// measureTrace compresses the trace as the server would send it: gzip at
// the level of /api/trace, deflate per websocket frame as gorilla does
// (level 1, no context kept between frames).
func (s *Server) measureTrace(ctx context.Context, r kernels.Run, addr string) (traceBytes, error) {
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
	err := s.readRun(ctx, r, addr, nil, func(chunk []byte) error {
		raw.Write(chunk)
		zw.Write(chunk)
		if len(frame)+len(chunk) > maxFrameBytes {
			flushFrame()
		}
		frame = append(frame, chunk...)
		return nil
	})
	if err != nil {
		return traceBytes{}, err
	}
	flushFrame()
	zw.Close()
	c := r.Config()
	tb := traceBytes{Query: c.Values().Encode(), Raw: raw.n, Gzip: gz.n, Deflate: defl.n}
	if raw.n > 0 {
		tb.Ratio = float64(gz.n) / float64(raw.n)
	}
	return tb, nil
}
