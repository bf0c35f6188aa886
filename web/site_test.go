package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/lessons"
	"flashstep/offline"
	"flashstep/recordings"
	"flashstep/runner"
)

// siteTrace is a run's trace as the static site makes it: the recording
// that holds the run, read from its file, or the mirror in offline.Trace.
func siteTrace(t *testing.T, query string) []byte {
	t.Helper()
	run, err := offline.Run(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	b, err := offline.SiteTrace(context.Background(), run, readRecording)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return b
}

func readRecording(name string) ([]byte, error) { return recordings.Files.ReadFile(name + ".fstrace") }

func cpuServer(t *testing.T) string {
	t.Helper()
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, &runner.Router{Recordings: recs, Mirror: runner.Mirror{}})
	return ts.URL
}

// The static site's traces are the server's, byte for byte: random
// configurations across every rung, the backward's included, downloaded
// from a server in CPU mode (GET /api/trace) against what the site's
// WebAssembly computes (offline.Trace, the same Go) or replays; and every
// shipped recording is found by the site for the run it holds, as the
// server's router finds it.
func TestSiteTracesAreTheServers(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	base := cpuServer(t)
	var configs []kernels.Config
	seen := map[instrument.Variant]bool{}
	for len(configs) < 20 || len(seen) < len(instrument.Variants) {
		c := kernelstest.RandomGPUConfig(rng, 200)
		if !seen[c.Variant] || len(configs) < 20 && len(seen) == len(instrument.Variants) {
			seen[c.Variant] = true
			configs = append(configs, c)
		}
	}
	queries := []string{}
	for _, c := range configs {
		queries = append(queries, c.Values().Encode())
	}
	// A recorded run asked of the CPU mirror is mirrored, on the site as
	// on the server, not replayed.
	ragged, err := url.ParseQuery(lessons.Runs["ragged-causal"].Query)
	if err != nil {
		t.Fatal(err)
	}
	ragged.Set("engine", "cpu")
	queries = append(queries, ragged.Encode())
	for _, q := range queries {
		res, err := http.Get(base + "/api/trace?" + q)
		if err != nil {
			t.Fatal(err)
		}
		server, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %.200s %v", q, res.StatusCode, server, err)
		}
		if site := siteTrace(t, q); !bytes.Equal(site, server) {
			t.Errorf("%s: the site's trace (%d bytes) is not the server's (%d bytes)", q, len(site), len(server))
		}
	}
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.All() {
		run, err := offline.Run(r.Config.Values().Encode())
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if name, err := offline.Recording(run); err != nil || name != r.Name {
			t.Errorf("recording %s: the site finds %q for its run (%v)", r.Name, name, err)
		}
	}
}

// Every checkpoint grades the same on the site as on the server: the
// right answer, one just past the tolerance and one far off, each POSTed
// to a server in CPU mode and graded by offline.Grade on the trace the site
// would use; the verdicts (status, hint, explanation, source) are equal.
func TestSiteGradesAsTheServer(t *testing.T) {
	t.Parallel()
	server := cpuServer(t)
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string][]byte{}
	graded := 0
	for _, l := range course.Lessons {
		for _, c := range l.Checkpoints {
			var trace *lessons.Trace
			if c.NeedsTrace() {
				q := c.Run.Values().Encode()
				if traces[q] == nil {
					traces[q] = siteTrace(t, q)
				}
				h, recs, err := instrument.ReadAll(bytes.NewReader(traces[q]))
				if err != nil {
					t.Fatal(err)
				}
				trace = lessons.NewTrace(h, recs)
			}
			sol, err := c.Solve(trace)
			if err != nil {
				t.Fatalf("%s/%s: %v", l.Slug, c.ID, err)
			}
			right, close, far := answers(c, sol)
			for _, a := range []struct {
				answer string
				reveal bool
			}{{right, false}, {close, false}, {far, false}, {"", true}} {
				body, _ := json.Marshal(checkpointRequest{Answer: a.answer, Reveal: a.reveal})
				res, b := postJSON(t, server+"/api/checkpoints/"+l.Slug+"/"+c.ID, string(body))
				var server lessons.Judged
				if res.StatusCode != http.StatusOK || json.Unmarshal(b, &server) != nil {
					t.Fatalf("%s/%s %q: %d %s", l.Slug, c.ID, a.answer, res.StatusCode, b)
				}
				site, err := offline.Grade(l.Slug, c.ID, a.answer, a.reveal, func(run kernels.Run) ([]byte, error) {
					return offline.SiteTrace(context.Background(), run, readRecording)
				})
				if err != nil {
					t.Fatalf("%s/%s %q: the site: %v", l.Slug, c.ID, a.answer, err)
				}
				sj, _ := json.Marshal(site)
				var siteBack lessons.Judged
				json.Unmarshal(sj, &siteBack)
				if !reflect.DeepEqual(siteBack, server) {
					t.Errorf("%s/%s %q: the site says %s, the server %s", l.Slug, c.ID, a.answer, sj, b)
				}
				if a.answer == right && !a.reveal && server.Status != "correct" {
					t.Errorf("%s/%s: the right answer %q graded %s", l.Slug, c.ID, right, server.Status)
				}
				if a.answer == close && server.Status == "correct" {
					t.Errorf("%s/%s: %q, past the tolerance of %q, graded correct", l.Slug, c.ID, close, right)
				}
				graded++
			}
		}
	}
	t.Logf("%d answers graded alike", graded)
}

// answers are a checkpoint's right answer, one just wrong (a number just
// past its tolerance, another option, a tile set one tile off) and one far
// off.
func answers(c *lessons.Checkpoint, sol grading.Solution) (right, close, far string) {
	switch c.Format {
	case grading.FormatNumber:
		right = strings.TrimPrefix(strings.TrimSuffix(sol.Display, " bytes"), "SM ")
		v := sol.Number
		step := 2*c.Allowed(v) + math.Max(math.Abs(v)*1e-3, 1e-6)
		if c.Allowed(v) == 0 && v == math.Trunc(v) {
			step = 1
		}
		return right, strconv.FormatFloat(v+step, 'g', -1, 64), strconv.FormatFloat(v*10+1000, 'g', -1, 64)
	case grading.FormatTiles:
		right = strings.Join(sol.Tiles, ";")
		if right == "" {
			right = "none"
		}
		if len(sol.Tiles) > 1 {
			close = strings.Join(sol.Tiles[1:], ";")
		} else {
			close = "0,0;0,1"
			if right == close {
				close = "0,0"
			}
		}
		return right, close, "99,99"
	default:
		right = sol.Choice
		for _, o := range c.Choices {
			if o.Value != right {
				close = o.Value
				break
			}
		}
		return right, close, "no-such-option"
	}
}

// The site's answers to the read-only GET APIs are the server's: valid
// queries and invalid ones (the same error, naming the same field), for
// the memory calculator, the traffic model, a kernel's source, the
// debugging lesson's loop and the run form's check; only where a run
// comes from (config's runs_on, the loop's source) may differ.
func TestSiteAPIsAsTheServer(t *testing.T) {
	t.Parallel()
	server := cpuServer(t)
	rng := testrand.New(t)
	type ask struct{ path, query string }
	asks := []ask{
		{"/api/memory", "b=2&h=8&n=4096&d=64"}, {"/api/memory", "b=1&h=16&n=32768&d=128&dtype=bf16&pass=backward"},
		{"/api/memory", "b=1&h=1&n=x&d=64"}, {"/api/memory", "b=1&h=1&n=64&d=64&dtype=f64"},
		{"/api/source", "variant=flash2"}, {"/api/source", "variant=flash3_overlap"}, {"/api/source", "variant=nope"},
		{"/api/loop", "variant=flash2&n=16&d=8&br=4&bc=4&pattern=normal&seed=5&q=1&bh=0&slip=stale-max"},
		{"/api/loop", "variant=flash2&n=16&d=8&br=4&bc=4&pattern=normal&seed=5&q=9&bh=0"},
		{"/api/config", "variant=flash2&n=0"}, {"/api/config", "variant=flash2&n=16&d=8&br=4&bc=4&bogus=1"},
		{"/api/traffic", "variant=flash2&n=-1"},
	}
	// engine=gpu where there is none: refused, naming the field, as a
	// server without a GPU refuses it (this test's server routes every
	// engine to its mirror, so it cannot say so itself).
	if _, err := offline.Get("/api/config", lessons.Runs["ragged-causal"].Query+"&engine=gpu"); err == nil || !strings.Contains(offline.ErrorJSON(err), `"field":"engine"`) {
		t.Errorf("engine=gpu on the site: %v", err)
	}
	for range 6 {
		c := kernelstest.RandomGPUConfig(rng, 1000)
		asks = append(asks, ask{"/api/traffic", c.Values().Encode()}, ask{"/api/config", c.Values().Encode()})
		run := url.Values{"variant": {c.Variant.String()}, "n": {strconv.Itoa(c.N)}, "d": {strconv.Itoa(c.D)}, "br": {strconv.Itoa(c.Br)}, "bc": {strconv.Itoa(c.Bc)}}
		asks = append(asks, ask{"/api/kernels", run.Encode()})
	}
	for _, a := range asks {
		res, err := http.Get(server + a.path + "?" + a.query)
		if err != nil {
			t.Fatal(err)
		}
		server, _ := io.ReadAll(res.Body)
		res.Body.Close()
		v, err := offline.Get(a.path, a.query)
		var site []byte
		if err != nil {
			site = []byte(offline.ErrorJSON(err))
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("%s?%s: the site refuses (%s), the server answers %d", a.path, a.query, site, res.StatusCode)
				continue
			}
		} else if site, err = json.Marshal(v); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("%s?%s: the site answers, the server %d %.200s", a.path, a.query, res.StatusCode, server)
			continue
		}
		var s, w map[string]any
		if json.Unmarshal(site, &s) != nil || json.Unmarshal(server, &w) != nil {
			// /api/source and the error bodies are objects; anything else is a bug
			t.Errorf("%s?%s: not JSON objects: %.100s / %.100s", a.path, a.query, site, server)
			continue
		}
		delete(s, "runs_on")
		delete(w, "runs_on")
		if a.path == "/api/kernels" {
			// The site computes the launched kernels; the table is a file.
			if !reflect.DeepEqual(s["launched"], w["Launched"]) {
				t.Errorf("%s?%s: the site launches %v, the server %v", a.path, a.query, s["launched"], w["Launched"])
			}
			continue
		}
		if a.path == "/api/loop" {
			delete(s, "source")
			delete(w, "source")
		}
		if !reflect.DeepEqual(s, w) {
			t.Errorf("%s?%s: the site answers %.300s, the server %.300s", a.path, a.query, site, server)
		}
	}
}
