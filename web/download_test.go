package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"flashstep/runner"
	"flashstep/runs"
)

// A small flash2 run.
const downloadRun = "variant=flash2&n=12&d=4&br=4&bc=3&seed=3"

// The trace downloads gzipped, byte for byte the trace; /api/trace/bytes
// (what the presenter's room bar shows a student downloads) says its size
// and its compressed sizes.
func TestTraceDownloadIsGzipped(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	req, _ := http.NewRequest("GET", ts.URL+"/api/trace?"+downloadRun, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", res.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	_, plain := get(t, ts.URL+"/api/trace?"+downloadRun)
	if !bytes.Equal(got, plain) || len(plain) == 0 {
		t.Fatalf("the gzipped trace (%d bytes) is not the trace (%d bytes)", len(got), len(plain))
	}
	_, body := get(t, ts.URL+"/api/trace/bytes?"+downloadRun)
	var tb runs.Sizes
	json.Unmarshal(body, &tb)
	if tb.Raw != len(plain) || tb.Gzip <= 0 || tb.Gzip >= tb.Raw || tb.Deflate <= 0 {
		t.Fatalf("trace bytes %+v, the trace is %d bytes", tb, len(plain))
	}
}
