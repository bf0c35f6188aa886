package sweep

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/recordings"
)

var backwardKernels = []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantNaiveBwd, instrument.VariantFlash2BwdMMA}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestParseSpecTakesBackwardKernels: a sweep may name the backward kernels,
// alone or beside forward ones, and each point says which pass it times.
func TestParseSpecTakesBackwardKernels(t *testing.T) {
	t.Parallel()
	v, _ := url.ParseQuery("variants=flash2,flash2_bwd,naive_bwd,flash2_bwd_mma,flash2_bwd&n=512,4096&d=64,128&causal=0,1&repeats=2")
	s, err := parseSpec(v, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Variants) != 4 { // the repeated flash2_bwd once
		t.Fatalf("variants %v", s.Variants)
	}
	passes := map[string]int{}
	for _, p := range s.Points() {
		passes[p.Pass()]++
		if p.Backward() != kernels.Info(p.Variant).Backward {
			t.Fatalf("%v: Backward %v", p.Variant, p.Backward())
		}
	}
	if passes[PassForward] != 2*2*2 || passes[PassBackward] != 3*2*2*2 {
		t.Fatalf("passes %v", passes)
	}
	back, err := parseSpec(s.Values(), 16)
	if err != nil || back.Values().Encode() != s.Values().Encode() {
		t.Fatalf("round trip: %v", err)
	}
	v, _ = url.ParseQuery("engine=cpu&variants=naive_bwd&n=64,128&d=16")
	if s, err := ParseSpec(v); err != nil || len(s.Points()) != 4 || s.Points()[0].Pass() != PassBackward {
		t.Fatalf("a CPU sweep of naive_bwd: %v, %+v", err, s.Points())
	}
}

// TestBackwardFLOPs: a backward point counts 2.5 times the forward's
// 4·B·H·N²·d, halved under a causal mask, as FlashAttention's benchmarks do,
// and its TFLOP/s come from that count.
func TestBackwardFLOPs(t *testing.T) {
	t.Parallel()
	for _, v := range append([]instrument.Variant{instrument.VariantFlash2}, backwardKernels...) {
		for _, causal := range []bool{false, true} {
			p := Point{Variant: v, N: 1024, D: 64, B: 2, H: 3, Causal: causal}
			want := 4.0 * 2 * 3 * 1024 * 1024 * 64 // 1 610 612 736
			if causal {
				want /= 2
			}
			if v != instrument.VariantFlash2 {
				want *= 2.5
			}
			if !near(p.FLOPs(), want) {
				t.Errorf("%v causal=%v: %g FLOPs, want %g", v, causal, p.FLOPs(), want)
			}
			r := GPUResult(p, GPUTiming{Ms: []float64{3, 2, 1}})
			if !near(r.TFLOPs, want/2e-3/1e12) || r.Ms != 2 {
				t.Errorf("%v causal=%v: %g TFLOP/s at %g ms, want %g", v, causal, r.TFLOPs, r.Ms, want/2e-3/1e12)
			}
			if wantPass := map[bool]string{false: PassForward, true: PassBackward}[v != instrument.VariantFlash2]; r.Pass != wantPass {
				t.Errorf("%v: pass %q", v, r.Pass)
			}
		}
	}
	// By hand: 2.5 × 1 610 612 736 = 4 026 531 840 FLOP in 2 ms.
	if p := (Point{Variant: instrument.VariantFlash2Bwd, N: 1024, D: 64, B: 2, H: 3}); !near(GPUResult(p, GPUTiming{Ms: []float64{2}}).TFLOPs, 2.01326592) {
		t.Errorf("flash2_bwd at 2 ms: %g TFLOP/s, want 2.01326592", GPUResult(p, GPUTiming{Ms: []float64{2}}).TFLOPs)
	}
}

// TestEstimateBackward: a backward point's estimate is its kernels' time at
// its entry's rate, in backward FLOPs, and on the GPU the host's time to
// prepare its inputs (the exact forward, a batch-head per core), which at
// the benchmark shapes is most of it.
func TestEstimateBackward(t *testing.T) {
	t.Parallel()
	const repeats = 5
	one := func(engine instrument.Source, v instrument.Variant, n, d int, causal bool) Spec {
		return Spec{Engine: engine, Ns: []int{n}, Ds: []int{d}, Causal: []bool{causal}, Variants: []instrument.Variant{v}, Repeats: repeats}
	}
	secs := func(s Spec, cores int) float64 { return s.estimate(cores).Seconds() }
	gpu := func(v instrument.Variant) float64 { return kernels.Info(v).GPURate }
	cpu := func(v instrument.Variant) float64 { return kernels.Info(v).CPURate }
	// N=4096, d=64: B=4, H=32, 128 batch-heads. The forward's FLOPs are
	// 4·128·4096²·64 = 5.497558e11, the backward's 1.3743895e12; a
	// batch-head's exact forward 4·4096²·64 = 4.294967e9 at 1.5e9 a core
	// is 2.863 s, and 16 cores take 8 turns: 22.906 s.
	const fwd, bwd, head = 5.49755813888e11, 1.37438953472e12, 4.294967296e9
	cases := []struct {
		name string
		s    Spec
		want float64
	}{
		{"flash2, GPU", one(instrument.SourceGPU, instrument.VariantFlash2, 4096, 64, false), fwd/gpu(instrument.VariantFlash2)*6 + 1.5},
		{"flash2_bwd, GPU", one(instrument.SourceGPU, instrument.VariantFlash2Bwd, 4096, 64, false), bwd/gpu(instrument.VariantFlash2Bwd)*6 + 1.5 + 8*head/1.5e9},
		{"flash2_bwd causal, GPU", one(instrument.SourceGPU, instrument.VariantFlash2Bwd, 4096, 64, true), bwd/2/gpu(instrument.VariantFlash2Bwd)*6 + 1.5 + 8*head/2/1.5e9},
		{"flash2_bwd_mma, GPU", one(instrument.SourceGPU, instrument.VariantFlash2BwdMMA, 4096, 64, false), bwd/gpu(instrument.VariantFlash2BwdMMA)*6 + 1.5 + 8*head/1.5e9},
		// naive_bwd computes every tile under the mask, and its P costs
		// half as much again on the host.
		{"naive_bwd causal, GPU", one(instrument.SourceGPU, instrument.VariantNaiveBwd, 4096, 64, true), bwd/gpu(instrument.VariantNaiveBwd)*6 + 1.5 + 8*head/2*1.5/1.5e9},
		// On the CPU the mirror's rate includes its inputs: B=H=1 here.
		{"flash2_bwd, CPU", Spec{Engine: instrument.SourceCPUMirror, Ns: []int{256}, Ds: []int{64}, Causal: []bool{false}, Variants: []instrument.Variant{instrument.VariantFlash2Bwd}, Batch: 1, Heads: 1, Repeats: repeats},
			2.5 * 4 * 256 * 256 * 64 / cpu(instrument.VariantFlash2Bwd) * 6},
	}
	for _, tc := range cases {
		if got := secs(tc.s, 16); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: estimated %.6f s, want %.6f", tc.name, got, tc.want)
		}
	}
	// Fewer cores, more turns: 128 batch-heads on 2 cores are 64.
	s := one(instrument.SourceGPU, instrument.VariantFlash2Bwd, 4096, 64, false)
	if d := secs(s, 2) - secs(s, 16); math.Abs(d-(64-8)*head/1.5e9) > 1e-6 {
		t.Errorf("2 cores against 16: %.3f s more", d)
	}
	if hostInputs(Point{Variant: instrument.VariantFlash2, N: 32768, D: 64, B: 1, H: 32}, 1) != 0 {
		t.Error("a forward point's inputs are counted as an exact forward")
	}
}

// TestDeviceBytes: the memory a point holds is its launch plan's, and the
// same sum where no compiled kernel runs it (a CPU sweep's head dims).
// naive_bwd holds the forward's P and its own dP and dS, N×N float32 each
// per batch-head, beside Q, K, V, O, L, dO, dQ, dK and dV (D stays in a
// register); the flash backwards hold no N×N buffer, and D.
func TestDeviceBytes(t *testing.T) {
	t.Parallel()
	for _, info := range kernels.Variants() {
		for _, d := range []int{64, 128} {
			p := Point{Variant: info.Variant, N: 1024, D: d, B: 16, H: 2048 / d}
			c := p.Config(0)
			plan, err := launch.For(&c)
			if err != nil {
				t.Fatalf("%v d=%d: %v", info.Variant, d, err)
			}
			if got := planBytes(p); got != plan.DeviceBytes() || DeviceBytes(p) != got {
				t.Errorf("%v d=%d: %d bytes by the sum, %d by launch.For", info.Variant, d, got, plan.DeviceBytes())
			}
		}
		// No compiled tile at d=16: the sum alone, without a panic.
		if b := DeviceBytes(Point{Variant: info.Variant, N: 128, D: 16, B: 1, H: 1}); b < 4*128*16*2 {
			t.Errorf("%v at d=16: %d bytes", info.Variant, b)
		}
	}
	const bh, n = 3 * 5, 256
	for _, d := range []int{64, 16} { // compiled, and a CPU sweep's
		nd, nn := int64(bh*n*d), int64(bh*n*n)
		for v, want := range map[instrument.Variant]int64{
			// Q, K, V, O, dO, dQ, dK, dV float32; L; P, dP, dS.
			instrument.VariantNaiveBwd: 8*nd*4 + bh*n*4 + 3*nn*4,
			// Q, K, V, O, dO, dQ, dK, dV float32; L and D.
			instrument.VariantFlash2Bwd: 8*nd*4 + 2*bh*n*4,
			// Q, K, V, O and dO in bf16, the gradients float32; L and D.
			instrument.VariantFlash2BwdMMA: 5*nd*2 + 3*nd*4 + 2*bh*n*4,
			// Q, K, V, O float32 and L; S and P.
			instrument.VariantNaive: 4*nd*4 + bh*n*4 + 2*nn*4,
		} {
			if got := DeviceBytes(Point{Variant: v, N: n, D: d, B: 3, H: 5}); got != want {
				t.Errorf("%v N=%d d=%d, B·H=%d: %d bytes, want %d", v, n, d, bh, got, want)
			}
		}
	}
}

// TestCPUBackwardSweep runs the backward mirrors, beside flash2's, in a
// CPU sweep at small N: each point is really timed (it takes time, more at
// the larger N for the same kernel is not asked of a busy machine), its
// TFLOP/s come from the backward's count, its memory is the plan's, and the
// CSV and JSON say which pass each row is.
func TestCPUBackwardSweep(t *testing.T) {
	t.Parallel()
	over := make(marker, 1)
	m := NewManager(map[instrument.Source]Executor{instrument.SourceCPUMirror: CPU{}, instrument.SourceGPU: over})
	defer m.Close()
	v, _ := url.ParseQuery("engine=cpu&variants=flash2,flash2_bwd,naive_bwd&n=64,128&d=16&causal=0,1&repeats=2")
	spec, err := ParseSpec(v)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	j, _ := m.Submit(spec, "test")
	if _, err := m.Submit(Spec{Engine: instrument.SourceGPU, Ns: []int{64}, Ds: []int{16}, Causal: []bool{false}, Variants: sweptVariants(instrument.SourceCPUMirror)[:1], Repeats: 1}, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-over:
	case <-time.After(time.Minute):
		t.Fatal("the CPU sweep did not end in a minute")
	}
	t.Logf("12 points in %v", time.Since(start))
	j, _ = m.Get(j.ID)
	if j.State != StateDone || len(j.Results) != 12 {
		t.Fatalf("CPU sweep: %s %s, %d results", j.State, j.Error, len(j.Results))
	}
	backward := 0
	for _, r := range j.Results {
		bwd := r.VariantName != "flash2"
		if r.Error != "" || r.Ms <= 0 || r.Ms > 10e3 || len(r.Repeats) != 2 || r.Pass != map[bool]string{false: PassForward, true: PassBackward}[bwd] {
			t.Fatalf("CPU result %+v", r)
		}
		// A repeat of the mirror is a whole backward pass: above a
		// microsecond's resolution, and its rate from 2.5× the FLOPs.
		for _, ms := range r.Repeats {
			if ms <= 0 {
				t.Fatalf("%s N=%d: a repeat of %g ms", r.VariantName, r.N, ms)
			}
		}
		want := 4 * float64(r.N*r.N*r.D)
		if r.Causal {
			want /= 2
		}
		if bwd {
			backward++
			want *= 2.5
			if !strings.Contains(r.Kernel, r.VariantName) || !strings.Contains(r.Kernel, "Go mirror") {
				t.Errorf("kernel label %q", r.Kernel)
			}
		}
		if !near(r.TFLOPs, want/(r.Ms/1e3)/1e12) {
			t.Errorf("%s N=%d: %g TFLOP/s at %g ms, want %g", r.VariantName, r.N, r.TFLOPs, r.Ms, want/(r.Ms/1e3)/1e12)
		}
		nd, n := int64(r.N*r.D), int64(r.N)
		mem := map[string]int64{"flash2": 4*nd*4 + n*4, "flash2_bwd": 8*nd*4 + 2*n*4, "naive_bwd": 8*nd*4 + n*4 + 3*n*n*4}[r.VariantName]
		if r.PeakBytes != mem || r.PeakHow != ModelledMemoryHow {
			t.Errorf("%s N=%d: memory %d (%s), want %d", r.VariantName, r.N, r.PeakBytes, r.PeakHow, mem)
		}
	}
	if backward != 8 {
		t.Fatalf("%d backward points", backward)
	}
	var buf bytes.Buffer
	if err := RecordOf(j).WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 13 || rows[0][2] != "pass" {
		t.Fatalf("CSV: %v, %d rows, header %v", err, len(rows), rows[0])
	}
	for _, row := range rows[1:] {
		if want := map[bool]string{false: PassForward, true: PassBackward}[row[1] != "flash2"]; row[2] != want {
			t.Errorf("CSV row %v: pass %q, want %q", row[:3], row[2], want)
		}
	}
	buf.Reset()
	RecordOf(j).WriteJSON(&buf)
	if !strings.Contains(buf.String(), `"pass": "backward"`) || !strings.Contains(buf.String(), `"pass": "forward"`) {
		t.Error("the JSON does not say each point's pass")
	}
}

// TestGPUBackwardResults: on the GPU path a backward point is labelled with
// its plan's kernels, every one the worker times between its two events.
func TestGPUBackwardResults(t *testing.T) {
	t.Parallel()
	for v, want := range map[instrument.Variant]string{
		instrument.VariantFlash2Bwd:    "flash2_bwd_pre_br64_bc64_d64 + flash2_bwd_main_br64_bc64_d64 + flash2_bwd_dq_br64_bc64_d64",
		instrument.VariantFlash2BwdMMA: "flash2_bwd_mma_pre_br64_bc64_d64 + flash2_bwd_mma_main_br64_bc64_d64 + flash2_bwd_mma_dq_br64_bc64_d64",
		instrument.VariantNaiveBwd:     "naive_bwd_dp + naive_bwd_ds + naive_bwd_dq + naive_bwd_dkv",
	} {
		p := Point{Variant: v, N: 4096, D: 64, B: 4, H: 32}
		r := GPUResult(p, GPUTiming{Ms: []float64{5}, FreeBefore: 80 << 30, FreeInUse: 80<<30 - DeviceBytes(p), FreeAfter: 80 << 30})
		if r.Kernel != want || r.Pass != PassBackward || r.PeakBytes != DeviceBytes(p) {
			t.Errorf("%v: %q, %s, %d bytes", v, r.Kernel, r.Pass, r.PeakBytes)
		}
	}
}

// TestLoadRecordedSaysForward: the recorded H100 sweep predates backward
// points; loaded, every point is the forward pass's, with its variant; a
// recorded backward point would say backward.
func TestLoadRecordedSaysForward(t *testing.T) {
	t.Parallel()
	rec, _, err := LoadRecorded(recordings.Files)
	if err != nil || rec == nil || len(rec.Results) == 0 {
		t.Fatalf("recorded sweep: %v", err)
	}
	for _, r := range rec.Results {
		if r.Pass != PassForward || r.Variant.String() != r.VariantName {
			t.Fatalf("recorded %s: pass %q, variant %v", r.VariantName, r.Pass, r.Variant)
		}
	}
	b, _ := json.Marshal(Record{Source: "x", Results: []Result{{VariantName: "naive_bwd"}, {VariantName: "flash2"}}})
	rec, _, err = LoadRecorded(fstest.MapFS{"sweep-x.json": {Data: bytes.ReplaceAll(b, []byte(`"pass":"",`), nil)}})
	if err != nil || rec.Results[0].Pass != PassBackward || rec.Results[1].Pass != PassForward {
		t.Fatalf("a record without passes: %v %+v", err, rec)
	}
	b, _ = json.Marshal(Record{Source: "x", Results: []Result{{VariantName: "flash9"}}})
	if _, _, err := LoadRecorded(fstest.MapFS{"sweep-x.json": {Data: b}}); err == nil || !strings.Contains(err.Error(), "flash9") {
		t.Fatalf("a record of an unknown kernel: %v", err)
	}
}

// TestSweepRefusesDecodeRungs: a sweep times square runs; decoding's rungs
// take a few queries against a cache and have their own bench, so naming
// one is refused with the list of those a sweep times.
func TestSweepRefusesDecodeRungs(t *testing.T) {
	for _, name := range []string{"decode_group", "decode_split"} {
		v, _ := url.ParseQuery("variants=flash2," + name + "&n=512&d=64")
		_, err := ParseSpec(v)
		if err == nil || !strings.Contains(err.Error(), "variants must be") || strings.Contains(err.Error(), "decode_group,") {
			t.Fatalf("variants=flash2,%s: %v", name, err)
		}
	}
}
