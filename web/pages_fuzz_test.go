package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"flashstep/runner"
)

// FuzzPageQuery: no query string makes a page, or an API that answers at
// once, fail with a 5xx or take more than 2 s. `make fuzz` runs it for a
// minute; `go test` runs its seeds.
func FuzzPageQuery(f *testing.F) {
	app := NewServer(Deps{Engines: testEngines{Runner: runner.Mirror{}}, Static: testStatic, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, seed := range []string{
		"n=1000000000", "n=4096&br=1&bc=1&variant=naive&trace_q=0-0", "pair=bf16&n=2048&d=64", "code=K7QM-4TXZ",
		"b=9223372036854775807&h=2&n=3&d=4", "variant=flash1&n=4096&d=1&br=1&bc=1&trace_q=0-100", "q=99999&bh=-1&slip=x",
		"n=%ff&trace_q=1-&causal=yes", "step=-9999999999999999999999&seed=18446744073709551616", "variant=" + strings.Repeat("x", 5000),
	} {
		f.Add(seed)
	}
	paths := []string{"/step", "/compare", "/join", "/lessons/attention", "/sweep", "/kernels", "/ladder", "/playground",
		"/api/config", "/api/traffic", "/api/loop", "/api/memory", "/api/source", "/api/kernels"}
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range paths {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = path, query
			req.RemoteAddr = "192.0.2.1:1234"
			rec := httptest.NewRecorder()
			start := time.Now()
			app.ServeHTTP(rec, req)
			if took := time.Since(start); rec.Code >= 500 || took > answerWithin {
				t.Fatalf("%s?%.200s: status %d after %v", path, query, rec.Code, took)
			}
			if rec.Code >= 400 && rec.Code != http.StatusNotFound && rec.Code != http.StatusTooManyRequests && rec.Body.Len() == 0 {
				t.Fatalf("%s?%.200s: %d with no word of why", path, query, rec.Code)
			}
		}
	})
}
