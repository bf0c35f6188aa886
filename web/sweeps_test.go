package web

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/runner"
	"flashstep/sweep"
	"flashstep/templates"
	"flashstep/worker"

	"golang.org/x/net/html"
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

// TestMemoryAPIBackward: pass=backward plans the backward kernels' buffers,
// the answer saying which pass it describes; no pass, or pass=forward, is
// the forward's plan as before; any other pass is a field error that names
// the field and the passes there are.
func TestMemoryAPIBackward(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	type answer struct {
		Pass string
		Plan struct {
			Pass            string
			NaiveKernel     string `json:"naive_kernel"`
			FlashKernel     string `json:"flash_kernel"`
			InputsBytes     int64  `json:"inputs_bytes"`
			NaiveNNBytes    int64  `json:"naive_nn_bytes"`
			NaiveSPBytes    *int64 `json:"naive_sp_bytes"`
			FlashDeltaBytes int64  `json:"flash_delta_bytes"`
			NaiveBytes      int64  `json:"naive_bytes"`
			FlashBytes      int64  `json:"flash_bytes"`
			NaiveFits       bool   `json:"naive_fits"`
			FlashFits       bool   `json:"flash_fits"`
			NaiveMaxN       int    `json:"naive_max_n"`
			FlashMaxN       int    `json:"flash_max_n"`
		}
	}
	ask := func(query string) answer {
		t.Helper()
		res, body := get(t, ts.URL+"/api/memory?"+query)
		var out answer
		if res.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("%s: %d %s", query, res.StatusCode, body)
		}
		return out
	}
	// Lesson 13's batch, 256 batch-heads at N = 8192, d = 64, float32:
	// per batch-head Q, K, V, O, dO 10 MiB, L 32 KiB, dQ, dK, dV 6 MiB;
	// naive's P, dP and dS 768 MiB; flash's D 32 KiB.
	const mib = 1 << 20
	bwd := ask("b=8&h=32&n=8192&d=64&pass=backward")
	p := bwd.Plan
	if bwd.Pass != "backward" || p.Pass != "backward" || p.NaiveKernel != "naive_bwd" || p.FlashKernel != "flash2_bwd" {
		t.Errorf("backward: pass %q/%q, kernels %q and %q", bwd.Pass, p.Pass, p.NaiveKernel, p.FlashKernel)
	}
	if p.InputsBytes != 256*(16*mib+32<<10) || p.NaiveNNBytes != 256*768*mib || p.FlashDeltaBytes != 256*32<<10 || p.NaiveSPBytes != nil {
		t.Errorf("backward: inputs %d, N×N %d, D %d, S and P %v", p.InputsBytes, p.NaiveNNBytes, p.FlashDeltaBytes, p.NaiveSPBytes)
	}
	if p.NaiveBytes != p.InputsBytes+p.NaiveNNBytes || p.FlashBytes != p.InputsBytes+p.FlashDeltaBytes || p.NaiveFits || !p.FlashFits || p.NaiveMaxN != 5175 || p.FlashMaxN != 161527 {
		t.Errorf("backward: %+v", p)
	}
	fwd := ask("b=8&h=32&n=8192&d=64")
	if fwd.Pass != "forward" || fwd.Plan.Pass != "forward" || fwd.Plan.NaiveKernel != "naive" || fwd.Plan.NaiveSPBytes == nil || *fwd.Plan.NaiveSPBytes != 256*512*mib ||
		fwd.Plan.NaiveNNBytes != *fwd.Plan.NaiveSPBytes || fwd.Plan.FlashDeltaBytes != 0 || fwd.Plan.NaiveMaxN <= p.NaiveMaxN {
		t.Errorf("forward: %+v", fwd)
	}
	_, plain := get(t, ts.URL+"/api/memory?b=8&h=32&n=8192&d=64")
	if _, named := get(t, ts.URL+"/api/memory?b=8&h=32&n=8192&d=64&pass=forward"); string(named) != string(plain) {
		t.Errorf("pass=forward %s, the default %s", named, plain)
	}
	// bf16: flash2_bwd_mma; no naive kernel, a model.
	if b := ask("b=8&h=32&n=8192&d=64&pass=backward&dtype=bf16").Plan; b.NaiveKernel != "" || b.FlashKernel != "flash2_bwd_mma" || b.InputsBytes != 256*(11*mib+32<<10) || b.NaiveNNBytes != 256*640*mib {
		t.Errorf("bf16 backward: %+v", b)
	}
	for _, bad := range []string{"pass=sideways", "pass=Backward", "pass=%20backward", "pass=backward,forward"} {
		res, body := get(t, ts.URL+"/api/memory?b=8&h=32&n=8192&d=64&"+bad)
		if res.StatusCode != 400 || !strings.Contains(string(body), `"field":"pass"`) || !strings.Contains(string(body), "forward or backward") {
			t.Errorf("%s: %d %s", bad, res.StatusCode, body)
		}
	}
	// A bad pass is said beside the other fields' errors.
	res, body := get(t, ts.URL+"/api/memory?b=x&h=32&n=8192&d=64&pass=up")
	if res.StatusCode != 400 || !strings.Contains(string(body), `"field":"pass"`) || !strings.Contains(string(body), `"field":"b"`) {
		t.Errorf("b and pass: %d %s", res.StatusCode, body)
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

// TestSweepAPIBackward: the API takes backward kernels, runs them on the
// CPU mirror, and every answer (the job, the CSV, the JSON) says each
// point's pass; a kernel it does not know is refused with every kernel it
// does, backward ones included.
func TestSweepAPIBackward(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "variants": {"flash2_bwdd"}})
	if res.StatusCode != 400 || !strings.Contains(body["error"].(string), "the backward kernels flash2_bwd, naive_bwd, flash2_bwd_mma") {
		t.Fatalf("an unknown kernel: %d %v", res.StatusCode, body)
	}
	res, body = post(t, ts.URL+"/api/sweeps", url.Values{"engine": {"cpu"}, "variants": {"flash2,flash2_bwd,naive_bwd"}, "n": {"64"}, "d": {"16"}, "causal": {"0"}, "repeats": {"1"}})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %v", res.StatusCode, body)
	}
	id := body["id"].(string)
	var job sweep.Job
	waitUntil(t, "the sweep to end", func() bool {
		r, b := get(t, ts.URL+"/api/sweeps/"+id)
		if r.StatusCode != 200 || json.Unmarshal(b, &job) != nil {
			t.Fatalf("poll: %d %s", r.StatusCode, b)
		}
		return job.State != sweep.StateQueued && job.State != sweep.StateRunning
	})
	if job.State != sweep.StateDone || len(job.Results) != 3 {
		t.Fatalf("sweep ended %s with %d results", job.State, len(job.Results))
	}
	for _, r := range job.Results {
		want := map[bool]string{false: sweep.PassForward, true: sweep.PassBackward}[r.VariantName != "flash2"]
		if r.Pass != want || r.Ms <= 0 || r.TFLOPs <= 0 || r.Error != "" {
			t.Errorf("%s: pass %q, %g ms, %g TFLOP/s, %q", r.VariantName, r.Pass, r.Ms, r.TFLOPs, r.Error)
		}
	}
	_, b := get(t, ts.URL+"/api/sweeps/"+id+".csv")
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(rows) != 4 || rows[0][2] != "pass" || rows[1][2] != "forward" || rows[2][1] != "flash2_bwd" || rows[2][2] != "backward" || rows[3][2] != "backward" {
		t.Fatalf("CSV: %v %q", err, rows)
	}
	_, b = get(t, ts.URL+"/api/sweeps/"+id+".json")
	if !strings.Contains(string(b), `"pass": "backward"`) {
		t.Fatalf("JSON: %s", b)
	}
}

// TestSweepPageOffersBackwardKernels: the sweep form offers every kernel,
// the forward pass's and the backward pass's apart, ticks the default
// sweep's (the forward kernels the engine times by default: on the CPU,
// flash2 and naive) and no backward one, and gives its script each
// engine's defaults.
func TestSweepPageOffersBackwardKernels(t *testing.T) {
	t.Parallel()
	for _, gpu := range []bool{false, true} {
		deps := Deps{Engines: testEngines{Runner: runner.Mirror{}}}
		if gpu {
			deps.Engines = testEngines{Runner: runner.Mirror{}, hello: &worker.Hello{GPU: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30}}
		}
		_, ts := serveDeps(t, deps)
		res, body := get(t, ts.URL+"/sweep")
		if res.StatusCode != 200 {
			t.Fatalf("/sweep: %d", res.StatusCode)
		}
		doc := parse(t, body)
		box := findNode(doc, "data-testid", "s-kernels")
		if box == nil || findNode(box, "data-field", "variants") == nil {
			t.Fatal("no kernel choice with its field error")
		}
		engine := map[bool]instrument.Source{false: instrument.SourceCPUMirror, true: instrument.SourceGPU}[gpu]
		defaults := map[string]bool{}
		for _, v := range sweep.DefaultSpec(engine).Variants {
			defaults[v.String()] = true
		}
		seen := map[string]bool{}
		for n := range box.Descendants() {
			name := attr(n, "data-variant")
			if n.Type != html.ElementNode || name == "" {
				continue
			}
			seen[name] = true
			info := kernels.Info(mustVariant(t, name))
			_, backward := attrOK(n, "data-backward")
			_, ticked := attrOK(n, "checked")
			if backward != info.Backward || ticked != defaults[name] || info.Backward && ticked {
				t.Errorf("gpu=%v: %s: backward %v, ticked %v", gpu, name, backward, ticked)
			}
			group := attr(n.Parent.Parent, "aria-label")
			if group != map[bool]string{false: "forward pass", true: "backward pass"}[info.Backward] {
				t.Errorf("%s is in the group %q", name, group)
			}
		}
		// Every kernel a sweep times: all but decoding's, which a sweep's
		// square runs are not for.
		sweepable := 0
		for _, info := range kernels.Variants() {
			if !info.Decode {
				sweepable++
			}
		}
		if len(seen) != sweepable || seen["decode_group"] || !seen["flash2_bwd"] || !seen["naive_bwd"] || !seen["flash2_bwd_mma"] {
			t.Errorf("gpu=%v: the form offers %v", gpu, seen)
		}
		var data templates.SweepData
		if err := json.Unmarshal([]byte(text(findNode(doc, "id", "sweep-data"))), &data); err != nil {
			t.Fatal(err)
		}
		if strings.Join(data.DefaultVariants["cpu"], ",") != "naive,flash2" && strings.Join(data.DefaultVariants["cpu"], ",") != "flash2,naive" ||
			len(data.DefaultVariants["gpu"]) != len(sweep.DefaultSpec(instrument.SourceGPU).Variants) {
			t.Errorf("the script's defaults: %v", data.DefaultVariants)
		}
		if findNode(doc, "data-testid", "f-pass") == nil || findNode(doc, "data-testid", "cap-tflops") == nil {
			t.Error("no pass filter, or no caption the script can tell the FLOPs in")
		}
	}
}

func mustVariant(t *testing.T, name string) instrument.Variant {
	t.Helper()
	v, ok := instrument.ParseVariant(name)
	if !ok {
		t.Fatalf("the form offers %q, no kernel", name)
	}
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}
