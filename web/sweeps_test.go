package web

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flashstep/runner"
	"flashstep/sweep"
)

func post(t *testing.T, u string, form url.Values) (*http.Response, map[string]any) {
	t.Helper()
	res, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	json.NewDecoder(res.Body).Decode(&body)
	return res, body
}

func TestSweepAPI(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	// Bad input names the field; the GPU is not there.
	res, body := post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "n": {"64,99999"}})
	if res.StatusCode != 400 || !strings.Contains(body["error"].(string), "from 16 to 1024") {
		t.Fatalf("bad N: %d %v", res.StatusCode, body)
	}
	res, body = post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"gpu"}, "n": {"1024"}})
	if res.StatusCode != 400 || !strings.Contains(body["error"].(string), "no GPU") {
		t.Fatalf("GPU sweep without a GPU: %d %v", res.StatusCode, body)
	}
	// A small CPU sweep runs to the end.
	res, body = post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "n": {"64,128"}, "d": {"16"}, "causal": {"0"}, "repeats": {"1"}})
	if res.StatusCode != http.StatusAccepted || res.Header.Get("Location") == "" {
		t.Fatalf("start: %d %v", res.StatusCode, body)
	}
	id := body["id"].(string)
	// The page follows a sweep by asking after it: so does the test.
	var job sweep.Job
	waitUntil(t, "the sweep to end", func() bool {
		r, b := get(t, ts.URL+"/api/sweeps/"+id)
		if r.StatusCode != 200 || json.Unmarshal(b, &job) != nil {
			t.Fatalf("poll: %d %s", r.StatusCode, b)
		}
		return job.State != sweep.StateQueued && job.State != sweep.StateRunning
	})
	if job.State != sweep.StateDone || len(job.Results) != 4 {
		t.Fatalf("sweep ended %s with %d results", job.State, len(job.Results))
	}
	r, b := get(t, ts.URL+"/api/sweeps/"+id+".csv")
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if r.StatusCode != 200 || err != nil || len(rows) != 5 || !strings.Contains(r.Header.Get("Content-Disposition"), ".csv") {
		t.Fatalf("CSV: %d %v %d rows", r.StatusCode, err, len(rows))
	}
	r, b = get(t, ts.URL+"/api/sweeps/"+id+".json")
	var rec sweep.Record
	if r.StatusCode != 200 || json.Unmarshal(b, &rec) != nil || len(rec.Results) != 4 {
		t.Fatalf("JSON: %d", r.StatusCode)
	}
	if r, _ := get(t, ts.URL+"/api/sweeps/404"); r.StatusCode != 404 {
		t.Fatalf("unknown sweep: %d", r.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/sweeps/404", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 404 {
		t.Fatalf("cancel of an unknown sweep: %v", err)
	}
}

func TestMemoryAPI(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := get(t, ts.URL+"/api/memory?b=4&h=32&n=4096&d=64")
	var out struct {
		GPU  string
		Plan struct {
			NaiveSPBytes int64 `json:"naive_sp_bytes"`
			NaiveMaxN    int   `json:"naive_max_n"`
		}
	}
	if res.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Plan.NaiveSPBytes != 2*128*4096*4096*4 || !strings.Contains(out.GPU, "H100") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	res, body = get(t, ts.URL+"/api/memory?b=4&h=32&n=4096&d=64&dtype=bf16")
	if res.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Plan.NaiveSPBytes != 128*4096*4096*(4+2) {
		t.Fatalf("bf16: %d %s", res.StatusCode, body)
	}
	res, body = get(t, ts.URL+"/api/memory?b=4&h=x&n=0&d=64")
	if res.StatusCode != 400 || !strings.Contains(string(body), `"field":"h"`) {
		t.Fatalf("bad input: %d %s", res.StatusCode, body)
	}
	res, body = get(t, ts.URL+"/api/memory?b=4&h=32&n=4096&d=64&dtype=fp8")
	if res.StatusCode != 400 || !strings.Contains(string(body), `"field":"dtype"`) || !strings.Contains(string(body), "f32 or bf16") {
		t.Fatalf("bad dtype: %d %s", res.StatusCode, body)
	}
}

func TestTrafficAPI(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := get(t, ts.URL+"/api/traffic?variant=naive&n=16&d=8&br=4&bc=4")
	var out struct {
		Steps [][4]uint64
		Run   []struct {
			Kernel string `json:"kernel"`
		}
	}
	// 4×4 tiles: 16 scores, 4 softmax, 16 pv and 4 epilogues.
	if res.StatusCode != 200 || json.Unmarshal(body, &out) != nil || len(out.Steps) != 40 || len(out.Run) != 3 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if s := out.Steps[0]; s[0] != (4+4)*8*4 || s[1] != 4*4*4 {
		t.Fatalf("first scores step traffic %v", s)
	}
}

func TestSweepsRefuseOtherSitesAndUnknownFields(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	form := url.Values{"engine": {"cpu"}, "n": {"64"}, "d": {"16"}, "causal": {"0"}, "repeats": {"1"}}
	// A form on another site posts here: the browser says so.
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/sweeps", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("%v: %v %v", h, err, res.StatusCode)
		}
		res.Body.Close()
	}
	res, body := post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "ns": {"64,128"}})
	if res.StatusCode != 400 || !strings.Contains(body["error"].(string), `"ns" is not a field`) {
		t.Fatalf("unknown field: %d %v", res.StatusCode, body)
	}
	// Past the address's sweeps: 503 with Retry-After, never a silent queue.
	codes := map[int]int{}
	for range 10 {
		res, _ := post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "n": {"1024"}, "d": {"256"}, "causal": {"0,1"}, "repeats": {"20"}})
		codes[res.StatusCode]++
		if res.StatusCode == 503 && res.Header.Get("Retry-After") == "" {
			t.Fatal("busy without Retry-After")
		}
	}
	if codes[202]+codes[400] > sweep.MaxPerOwner || codes[503] < 10-sweep.MaxPerOwner {
		t.Fatalf("ten sweeps from one address: %v", codes)
	}
	// A cross-site cancel is refused too.
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/sweeps/x", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site cancel: %v %d", err, r.StatusCode)
	}
}
