package sweep

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/problem"
)

// rungNames is every kernel a sweep times, in the registry's order, as an
// error lists them: the forward kernels, then the backward ones (decoding's
// are no sweep's).
func rungNames() string {
	var fwd, bwd []string
	for _, v := range kernels.Variants() {
		if v.Decode {
			continue
		}
		if v.Backward {
			bwd = append(bwd, v.Name())
		} else {
			fwd = append(fwd, v.Name())
		}
	}
	return "forward kernels " + strings.Join(fwd, ", ") + " and the backward kernels " + strings.Join(bwd, ", ")
}

func TestParseSpecErrorsNameFieldAndLimit(t *testing.T) {
	t.Parallel()
	cases := []struct{ query, field, mentions string }{
		{"engine=tpu", FieldEngine, "gpu or cpu"},
		{"n=512,abc", FieldNs, "comma-separated"},
		{"n=65536", FieldNs, "from 16 to 32768"},
		{"engine=cpu&n=2048", FieldNs, "from 16 to 1024"},
		{"d=96", FieldDs, "64 or 128"},
		{"causal=2", FieldCausal, "0, 1"},
		{"variants=flash3", FieldVariants, rungNames()}, // every kernel, from the registry
		{"variants=flash2,flash2_bwdx", FieldVariants, "flash2_bwd, naive_bwd, flash2_bwd_mma"},
		// A backward point's inputs are an exact forward on the host: on 16
		// cores, 46 s at N=8192, d=64 (64 batch-heads of 17 GFLOP).
		{"variants=flash2,flash2_bwd&n=4096,8192", FieldNs, "flash2_bwd at N=8192, d=64 (B=2, H=32): a backward point's inputs"},
		{"variants=flash2,flash2_bwd&n=4096,8192", FieldNs, "runs up to N=4096"},
		{"variants=naive_bwd&n=4096&d=128&causal=0", FieldNs, ""}, // 34 s: allowed, so this case must fail below
		{"variants=naive_row,flash1&n=8192", FieldNs, "timed up to N=4096"},
		{"repeats=50", FieldRepeats, "from 1 to 20"},
		{"engine=cpu&n=1024&d=256&heads=8&repeats=20", FieldNs, "would take about"},
		{"engine=cpu&n=32", FieldNs, "at least 64"},
	}
	for _, tc := range cases {
		v, _ := url.ParseQuery(tc.query)
		_, err := parseSpec(v, 16)
		var fe kernels.FieldErrors
		if tc.mentions == "" {
			if err != nil {
				t.Errorf("%s: %v, want no error", tc.query, err)
			}
			continue
		}
		if !errors.As(err, &fe) || !strings.Contains(fe.ByField()[tc.field], tc.mentions) {
			t.Errorf("%s: %v, want %s mentioning %q", tc.query, err, tc.field, tc.mentions)
		}
	}
	s, err := ParseSpec(url.Values{})
	// Ns × head dims × masks × every fast kernel, and the slow rungs up to
	// N = 4096 (four of the seven Ns): counted from the registry.
	fast, slow := 0, 0
	for _, v := range sweptVariants(instrument.SourceGPU) {
		switch n := kernels.Info(v).MaxSweptN; {
		case n == 0:
			fast++
		case n == 4096:
			slow++
		default:
			t.Fatalf("%v: swept up to N = %d, which this count does not know", v, n)
		}
	}
	if fast < 10 || slow != 2 {
		t.Fatalf("%d fast and %d slow kernels in the default sweep, want at least the ten fast and the two slow rungs", fast, slow)
	}
	if err != nil || len(s.Points()) != 7*2*2*fast+4*2*2*slow || MaxPoints != len(s.Points()) {
		t.Fatalf("the default GPU sweep: %v, %d points", err, len(s.Points()))
	}
	t.Logf("the default GPU sweep: %d points, estimated %v", len(s.Points()), s.Estimate())
	for _, p := range s.Points() {
		if p.B*p.N != 16384 && !(p.N > 16384 && p.B == 1) || p.H*p.D != 2048 {
			t.Fatalf("point %+v is not a benchmark shape", p)
		}
		// The default sweeps, and the recorded one, are the forward pass's.
		if p.Backward() {
			t.Fatalf("the default GPU sweep times %s", p.Variant)
		}
	}
	if cpu := DefaultSpec(instrument.SourceCPUMirror); len(cpu.Variants) != 2 || cpu.Variants[0] != instrument.VariantNaive && cpu.Variants[0] != instrument.VariantFlash2 {
		t.Fatalf("the default CPU sweep times %v", cpu.Variants)
	}
	back, err := ParseSpec(s.Values())
	if err != nil || back.Values().Encode() != s.Values().Encode() {
		t.Fatalf("round trip: %v", err)
	}
}

// fakeExec times points at once; it can hold each point until released.
type fakeExec struct {
	hold    chan struct{}
	mu      sync.Mutex
	started []Point
	free    int64
}

func (f *fakeExec) Source() string { return "fake engine" }
func (f *fakeExec) Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error) {
	f.mu.Lock()
	f.started = append(f.started, p)
	f.mu.Unlock()
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if p.N > 2048 && p.Variant == instrument.VariantNaive {
		return GPUResult(p, GPUTiming{OutOfMem: true, Error: "out of device memory", FreeBefore: f.free, FreeAfter: f.free}), nil
	}
	return GPUResult(p, GPUTiming{Ms: []float64{3, 1, 2}, FreeBefore: f.free, FreeInUse: f.free - 1000, FreeAfter: f.free}), nil
}

// state is job id as it stands once the manager can go no further: run
// inside a synctest bubble, every goroutine of which is then blocked (a
// point held, the queue empty).
func state(t *testing.T, m *Manager, id string) Job {
	t.Helper()
	synctest.Wait()
	j, ok := m.Get(id)
	if !ok {
		t.Fatalf("no job %s", id)
	}
	return j
}

func TestSweepsRunInTurnAndCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := &fakeExec{hold: make(chan struct{}), free: 80 << 30}
		m := NewManager(map[instrument.Source]Executor{instrument.SourceGPU: fx})
		defer m.Close()
		spec := Spec{Engine: instrument.SourceGPU, Ns: []int{1024, 4096}, Ds: []int{64}, Causal: []bool{false}, Variants: []instrument.Variant{instrument.VariantFlash2, instrument.VariantNaive}, Repeats: 3} // the float32 pair: the sweep times those
		first, err := m.Submit(spec, "test")
		if err != nil {
			t.Fatal(err)
		}
		second, _ := m.Submit(spec, "test")
		if j := state(t, m, first.ID); j.State != StateRunning || j.Done != 0 {
			t.Fatalf("the first sweep, its first point held: %s with %d done", j.State, j.Done)
		}
		if j := state(t, m, second.ID); j.State != StateQueued || j.Ahead != 1 {
			t.Fatalf("the second sweep: %s with %d ahead", j.State, j.Ahead)
		}
		// Two points through, then cancel the first sweep mid-run.
		fx.hold <- struct{}{}
		fx.hold <- struct{}{}
		if j := state(t, m, first.ID); j.State != StateRunning || j.Done != 2 {
			t.Fatalf("two points let through: %s with %d done", j.State, j.Done)
		}
		if _, err := m.Cancel(first.ID); err != nil {
			t.Fatal(err)
		}
		j := state(t, m, first.ID)
		if j.State != StateCancelled || j.Done != 2 || len(j.Results) != 2 || j.Memory == nil || j.Memory.FreeAfter != j.Memory.FreeBefore {
			t.Fatalf("cancelled sweep: %+v", j)
		}
		// The second starts only now, and finishes.
		if j := state(t, m, second.ID); j.State != StateRunning || j.Done != 0 {
			t.Fatalf("the second sweep after the first was cancelled: %s with %d done", j.State, j.Done)
		}
		close(fx.hold)
		j = state(t, m, second.ID)
		if j.State != StateDone || j.Done != 4 || j.Results[0].Ms != 2 || j.Results[0].TFLOPs <= 0 {
			t.Fatalf("second sweep: %s, %+v", j.State, j.Results)
		}
		if !j.Results[3].OutOfMem || !strings.Contains(j.Results[3].Error, "out of memory at N=4096") {
			t.Fatalf("naive at N=4096 should say out of memory: %+v", j.Results[3])
		}
		if _, err := m.Cancel("nope"); !errors.Is(err, ErrNoJob) {
			t.Fatal(err)
		}
		if _, err := m.Submit(Spec{Engine: instrument.SourceCPUMirror}, "test"); err == nil {
			t.Fatal("a sweep on an engine the server lacks was queued")
		}
	})
}

// marker is an engine whose points say when they start. The manager runs
// sweeps one at a time, in order: a marker's sweep submitted behind
// another starting says that one is over.
type marker chan struct{}

func (marker) Source() string { return "marker" }
func (m marker) Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error) {
	select {
	case m <- struct{}{}:
	default:
	}
	return GPUResult(p, GPUTiming{Ms: []float64{1}}), nil
}

func TestCPUSweepAndExports(t *testing.T) {
	t.Parallel()
	over := make(marker, 1)
	m := NewManager(map[instrument.Source]Executor{instrument.SourceCPUMirror: CPU{}, instrument.SourceGPU: over})
	defer m.Close()
	v, _ := url.ParseQuery("engine=cpu&n=64,128&d=16&causal=0,1&repeats=2")
	spec, err := ParseSpec(v)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := m.Submit(spec, "test")
	if _, err := m.Submit(Spec{Engine: instrument.SourceGPU, Ns: []int{64}, Ds: []int{16}, Causal: []bool{false}, Variants: sweptVariants(instrument.SourceCPUMirror)[:1], Repeats: 1}, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-over: // the CPU sweep is over
	case <-time.After(time.Minute):
		t.Fatal("the CPU sweep did not end in a minute")
	}
	j, _ = m.Get(j.ID)
	if j.State != StateDone || len(j.Results) != 8 {
		t.Fatalf("CPU sweep: %s %s, %d results", j.State, j.Error, len(j.Results))
	}
	for _, r := range j.Results {
		if r.Ms <= 0 || r.TFLOPs <= 0 || len(r.Repeats) != 2 || r.PeakHow != ModelledMemoryHow {
			t.Fatalf("CPU result %+v", r)
		}
		// The CPU has no device memory: the figure is the model's, and
		// naive's holds its N×N S and P on top of flash's inputs.
		inputs := int64(r.B*r.H) * (4*int64(r.N)*int64(r.D)*4 + int64(r.N)*4)
		want := inputs
		if r.VariantName == "naive" {
			want += int64(r.B*r.H) * 2 * int64(r.N) * int64(r.N) * 4
		}
		if r.PeakBytes != want {
			t.Errorf("%s N=%d d=%d: memory %d, the model says %d", r.VariantName, r.N, r.D, r.PeakBytes, want)
		}
	}
	rec := RecordOf(j)
	var buf bytes.Buffer
	if err := rec.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 9 || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("CSV: %v, %d rows", err, len(rows))
	}
	buf.Reset()
	rec.WriteJSON(&buf)
	var back Record
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Results) != 8 || back.Results[0].Ms != rec.Results[0].Ms {
		t.Fatalf("JSON round trip: %v", err)
	}
}

func TestSubmitIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testSubmitIsBounded)
}

func testSubmitIsBounded(t *testing.T) {
	fx := &fakeExec{hold: make(chan struct{}), free: 80 << 30}
	m := NewManager(map[instrument.Source]Executor{instrument.SourceGPU: fx})
	defer m.Close()
	spec := Spec{Engine: instrument.SourceGPU, Ns: []int{1024}, Ds: []int{64}, Causal: []bool{false}, Variants: sweptVariants(instrument.SourceCPUMirror), Repeats: 1}
	// One address: two sweeps, then busy, however many it sends.
	ids := map[string]bool{}
	first := ""
	for k := range 300 {
		j, err := m.Submit(spec, "10.0.0.1")
		switch {
		case k < MaxPerOwner && err != nil:
			t.Fatalf("sweep %d: %v", k, err)
		case k >= MaxPerOwner && problem.CodeOf(err) != problem.Busy:
			t.Fatalf("sweep %d from one address: %v", k, err)
		}
		if err == nil {
			ids[j.ID] = true
			if first == "" {
				first = j.ID
			}
		}
	}
	if j := state(t, m, first); j.State != StateRunning {
		t.Fatalf("the first sweep: %s", j.State)
	}
	// Many addresses: the queue holds MaxQueued waiting, then busy.
	queued := 0
	for k := range 50 {
		_, err := m.Submit(spec, fmt.Sprintf("10.0.1.%d", k))
		if err == nil {
			queued++
		} else if problem.CodeOf(err) != problem.Busy || !strings.Contains(err.Error(), "waiting already") {
			t.Fatalf("address %d: %v", k, err)
		}
	}
	// One of the first address's two runs, one waits: MaxQueued-1 more fit.
	if queued != MaxQueued-1 {
		t.Fatalf("%d more queued, want %d", queued, MaxQueued-1)
	}
	for id := range ids {
		if _, err := strconv.Atoi(id); err == nil || len(id) < 12 {
			t.Fatalf("sweep ID %q can be guessed", id)
		}
	}
	close(fx.hold)
}

func TestParseSpecRejectsUnknownFields(t *testing.T) {
	t.Parallel()
	v, _ := url.ParseQuery("engine=cpu&ns=64,128&d=16")
	_, err := ParseSpec(v)
	var fe kernels.FieldErrors
	if !errors.As(err, &fe) || fe[0].Field != "ns" || !strings.Contains(fe[0].Message, "not a field") {
		t.Fatalf("ns=: %v", err)
	}
}
