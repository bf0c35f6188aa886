//go:build gpu

package main

// Tests and benchmarks of the CUDA kernels on a real GPU. They are built on a
// CPU machine (go test -c -tags gpu ./cmd/gpuworker) and run on the GPU
// machine: docs/GPU.md has the commands and the figures they gave.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/launch"
)

var (
	nConfigs = flag.Int("configs", 200, "random configurations to compare with the mirror")
	maxN     = flag.Int("maxn", 2048, "largest N of the random configurations")
	seedFlag = flag.Uint64("seed", 0, "seed of the random configurations (0: a fresh one)")
	only     = flag.String("variants", "", "comma-separated variants the random configurations are drawn from (empty: all)")
)

// The device lives on one locked OS thread; tests hand it work.
var gpuWork = make(chan func(*device))

func TestMain(m *testing.M) {
	if os.Getenv(labChild) == "1" { // the lab's tests start this binary as gpuworker -lab
		os.Exit(labMain())
	}
	flag.Parse()
	ready := make(chan error)
	go func() {
		runtime.LockOSThread()
		d, err := openDevice()
		ready <- err
		if err != nil {
			return
		}
		for f := range gpuWork {
			f(d)
		}
	}()
	if err := <-ready; err != nil {
		fmt.Fprintln(os.Stderr, "no GPU:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// onGPU runs f on the device's thread.
func onGPU[T any](f func(*device) (T, error)) (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	gpuWork <- func(d *device) { v, err = f(d); close(done) }
	<-done
	return v, err
}

func TestHello(t *testing.T) {
	h, _ := onGPU(func(d *device) (any, error) { return d.hello, nil })
	b, _ := json.MarshalIndent(h, "", "  ")
	t.Logf("hello: %s", b)
	d, _ := onGPU(func(d *device) (*device, error) { return d, nil })
	if d.hello.SMs == 0 || d.hello.SMIDs < d.hello.SMs || d.hello.TimerTickNs <= 0 || d.hello.GPU == "" {
		t.Fatalf("incomplete hello: %+v", d.hello)
	}
	// Every kernel of every module, untraced and traced, and fs_probe in
	// each traced module.
	want := 0
	for _, names := range launch.Kernels() {
		want += len(names)
	}
	if len(d.hello.Kernels) != want {
		t.Fatalf("%d kernels loaded, want %d", len(d.hello.Kernels), want)
	}
}

// traceConfig is traceRun of c, checked as the worker checks a request's run.
func (d *device) traceConfig(c kernels.Config) (*gpuTrace, error) {
	r, err := c.Check()
	if err != nil {
		return nil, err
	}
	return d.traceRun(r)
}

// mirrorTrace runs the CPU mirror of c and decodes it, as a browser would.
func mirrorTrace(c kernels.Config, label string) (*instrument.Header, []*instrument.Record, error) {
	run, err := c.Check()
	if err != nil {
		return nil, nil, err
	}
	h := c.Header(instrument.SourceCPUMirror, label)
	buf, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		return nil, nil, err
	}
	err = kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error {
		buf, err = instrument.AppendRecord(buf, &h, r)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return instrument.ReadAll(bytes.NewReader(buf))
}

// compareRun runs c on the GPU and holds its trace to the mirror's, and its
// outputs to the float64 reference.
func compareRun(c kernels.Config, mirror func() (*instrument.Header, []*instrument.Record, error), worst map[string]float64) error {
	tr, err := onGPU(func(d *device) (*gpuTrace, error) {
		d.keepGradients = true
		return d.traceConfig(c)
	})
	if err != nil {
		return fmt.Errorf("GPU run: %w", err)
	}
	gh, grecs, err := instrument.ReadAll(bytes.NewReader(tr.bytes))
	if err != nil {
		return err
	}
	mh, mrecs, err := mirror()
	if err != nil {
		return err
	}
	if gh.Source != instrument.SourceGPU || gh.Records != mh.Records || len(grecs) != len(mrecs) {
		return fmt.Errorf("GPU trace has %d records, the mirror's %d", len(grecs), len(mrecs))
	}
	bnd := kernelstest.NewBounds(mh)
	for k := range mrecs {
		if err := kernelstest.CompareRecords(gh, grecs[k], mrecs[k], bnd.Of(mrecs[k]), worst); err != nil {
			return fmt.Errorf("record %d: %w", k, err)
		}
	}
	if kernels.Info(c.Variant).Backward {
		if err := writtenAsTraced(c, tr, grecs); err != nil {
			return err
		}
		return gradientsHold(c, grecs, worst)
	}
	// The GPU's outputs against float64, with the stepper issue's bound
	// for the float32 kernels; a bf16 kernel against float64 on the same
	// bf16-rounded inputs, with the ladder issue's: relative error under 1e-2.
	bf16 := gh.DType == instrument.DTypeBF16
	for bh := gh.TracedBH.Lo; bh < gh.TracedBH.Hi; bh++ {
		in := kernels.InputsFor(&c, bh)
		ref, refLSE := kernels.ReferenceOf(&c, in)
		var diff2, ref2, maxS float64
		for _, r := range grecs {
			if r.Kind != instrument.KindEpilogue || r.BH != bh {
				continue
			}
			for row := range r.RowsValid {
				g := r.I*c.Br + row
				for x := range c.D {
					diff2 += sq(float64(r.O[row*c.D+x]) - ref[g*c.D+x])
					ref2 += sq(ref[g*c.D+x])
				}
				lseTol := 1e-4
				if bf16 {
					lseTol = 1e-3
				}
				if d := math.Abs(float64(r.LSE[row]) - refLSE[g]); !(d <= lseTol*math.Max(1, math.Abs(refLSE[g]))) {
					return fmt.Errorf("bh %d row %d: LSE %v, float64 %v", bh, g, r.LSE[row], refLSE[g])
				}
			}
		}
		for r := 0; r < c.Queries(); r++ {
			for col := 0; col < c.N; col++ {
				if c.Causal && col > c.QueryOffset()+r {
					continue
				}
				var dot float64
				for x := 0; x < c.D; x++ {
					dot += float64(in.Q[r*c.D+x]) * float64(in.K[col*c.D+x])
				}
				maxS = math.Max(maxS, math.Abs(dot/math.Sqrt(float64(c.D))))
			}
		}
		tol := 1e-5 * math.Max(1, maxS/100)
		if bf16 {
			tol = 1e-2
		}
		if rel := math.Sqrt(diff2 / ref2); !(rel <= tol) {
			return fmt.Errorf("bh %d: ‖O − ref‖/‖ref‖ = %.3g, bound %.3g", bh, rel, tol)
		}
		key := "output vs float64"
		if bf16 {
			key += " (bf16)"
		}
		worst[key] = math.Max(worst[key], math.Sqrt(diff2/ref2)/tol)
	}
	return nil
}

func sq(x float64) float64 { return x * x }

// TestGPUMatchesMirror runs random configurations over every compiled
// instantiation on the GPU: N from toy sizes to -maxn, weighted toward small
// and ragged, causal or not, every input pattern, partial selections. The
// GPU trace must match the mirror's exactly in structure and traffic, and
// element by element within the bound of bounds_test.go. The mirrors run on
// every core while the GPU works through the list.
func TestGPUMatchesMirror(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (-seed repeats this run), %d configurations, N up to %d", seed, *nConfigs, *maxN)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, name := range strings.Split(*only, ",") {
		if _, ok := instrument.ParseVariant(name); *only != "" && !ok {
			t.Fatalf("-variants: no variant %q", name)
		}
	}
	cfgs := make([]kernels.Config, *nConfigs)
	for k := range cfgs {
		cfgs[k] = kernelstest.RandomGPUConfig(rng, *maxN)
		for *only != "" && !slices.Contains(strings.Split(*only, ","), cfgs[k].Variant.String()) {
			cfgs[k] = kernelstest.RandomGPUConfig(rng, *maxN)
		}
	}
	// Mirrors ahead of the GPU, on a pool of goroutines.
	type result struct {
		h    *instrument.Header
		recs []*instrument.Record
		err  error
	}
	results := make([]chan result, len(cfgs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for k := range jobs {
				h, recs, err := mirrorTrace(cfgs[k], kernels.MirrorLabel)
				results[k] <- result{h, recs, err}
			}
		})
	}
	for k := range results {
		results[k] = make(chan result, 1)
	}
	go func() {
		for k := range cfgs {
			jobs <- k
		}
		close(jobs)
	}()
	defer wg.Wait()

	worst := map[string]float64{}
	counts := map[string]int{}
	start := time.Now()
	for k, c := range cfgs {
		err := compareRun(c, func() (*instrument.Header, []*instrument.Record, error) {
			r := <-results[k]
			return r.h, r.recs, r.err
		}, worst)
		if err != nil {
			t.Fatalf("configuration %d, %s: %v", k, c.Values().Encode(), err)
		}
		counts[fmt.Sprintf("%s causal=%t", c.Variant, c.Causal)]++
		if c.N < max(c.Br, c.Bc) {
			counts["N below the tile"]++
		}
		if (k+1)%25 == 0 && k+1 < len(cfgs) { // a long run says how far it is
			t.Logf("%d of %d configurations matched in %v", k+1, len(cfgs), time.Since(start).Round(time.Second))
		}
	}
	t.Logf("%d configurations matched in %v: %v", len(cfgs), time.Since(start).Round(time.Second), counts)
	names := make([]string, 0, len(worst))
	for n := range worst {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("worst |GPU − mirror| / bound for %-18s %.4f", n, worst[n])
	}
}

// TestGPUSanitizerSample is a handful of small runs of every kernel (or of
// -variants), for compute-sanitizer's memcheck and racecheck (which slow
// kernels a hundredfold): two at N past the tiles, one at N below them
// (one ragged tile each way, most of it padding).
func TestGPUSanitizerSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	worst := map[string]float64{}
	for k := 0; k < 3*len(instrument.Variants); k++ {
		v := instrument.Variants[k%len(instrument.Variants)]
		below := k >= 2*len(instrument.Variants)
		if *only != "" && !slices.Contains(strings.Split(*only, ","), v.String()) {
			continue
		}
		// Drawn for v, not drawn and then relabelled: another rung's tile
		// can be one v does not run (flash2_fast's 128×128 for naive_bwd).
		c := kernelstest.RandomGPUConfig(rng, 160)
		for c.Variant != v {
			c = kernelstest.RandomGPUConfig(rng, 160)
		}
		if tiles := kernels.Info(c.Variant).Tiles; tiles != nil {
			f := tiles[k%len(tiles)]
			c.Br, c.Bc, c.D = f.Br, f.Bc, f.D
			c.N = max(c.N, f.Br, f.Bc)
			if kernels.Info(c.Variant).Arch == kernels.ArchHopper {
				// Four kv-tiles, the last ragged: each of the forward's two
				// stages refilled, its barriers' parity flipped, under the
				// sanitizer.
				c.N = max(c.N, 3*f.Bc+1)
				if kernels.Info(c.Variant).Backward {
					// Seven q-tiles, the last ragged: each of flash3_bwd_tma's
					// three stages of q-tiles refilled at least once.
					c.N = max(c.N, 6*f.Br+1)
					// A backward traces every step of every block: four
					// batch-heads at 64×128, d = 128, N = 385 would be 36 MiB,
					// past one traced run's limit. Two keep a second
					// batch-head's offsets under the sanitizer.
					c.Batch, c.Heads = 1, 2
				}
			}
			if kernels.Info(c.Variant).Decode {
				// Five kv-tiles, the last ragged: each of decode_group's
				// three stages refilled under the sanitizer.
				c.N = max(c.N, (kernels.DecodeStages+1)*f.Bc+1)
			}
		} else { // any tiles, within naive's 8192 outputs per q-tile
			c.Br = min(c.Br, max(1, 8192/c.D))
		}
		if below {
			c.N = 1 + rng.IntN(min(c.Br, c.Bc))
		}
		kernelstest.FitShape(&c)
		c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
		if err := compareRun(c, func() (*instrument.Header, []*instrument.Record, error) { return mirrorTrace(c, "") }, worst); err != nil {
			t.Fatalf("%s: %v", c.Values().Encode(), err)
		}
		tc := c
		tc.Timing, tc.TraceBH, tc.TraceQ = true, instrument.Range{}, instrument.Range{}
		if _, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(tc) }); err != nil {
			t.Fatalf("%s timing mode: %v", c.Values().Encode(), err)
		}
		if kernels.Info(c.Variant).Roles != nil { // and its roles: the watcher, the stamps
			tc.Roles = true
			if _, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(tc) }); err != nil {
				t.Fatalf("%s roles mode: %v", c.Values().Encode(), err)
			}
		}
	}
}

// TestTimingMode traces a whole large grid with timestamps only: every block
// of every batch-head appears, on a real SM, in order within each block.
func TestTimingMode(t *testing.T) {
	c := kernels.Config{Variant: instrument.VariantFlash2, N: 4096, D: 64, Br: 64, Bc: 64, Batch: 4, Heads: 8,
		Causal: true, Pattern: instrument.PatternNormal, Seed: rand.Uint64(), Timing: true}
	tr, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(c) })
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := instrument.ReadAll(bytes.NewReader(tr.bytes))
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range c.Tr() {
		want += min(c.Tc(), (min(c.N, (i+1)*c.Br)-1)/c.Bc+1) + 1
	}
	want *= c.Batch * c.Heads
	if len(recs) != want {
		t.Fatalf("%d timing records, want %d", len(recs), want)
	}
	sms := map[int]bool{}
	var first, last uint64 = math.MaxUint64, 0
	prev := map[[2]int]uint64{}
	for _, r := range recs {
		if r.Kind != instrument.KindTiming || r.SM >= h.NumSMs || r.TEnd < r.TStart {
			t.Fatalf("bad timing record %+v", r)
		}
		k := [2]int{r.BH, r.I}
		if r.TStart < prev[k] {
			t.Fatalf("block %v: a step starts before the previous one ended", k)
		}
		prev[k] = r.TEnd
		sms[r.SM] = true
		first, last = min(first, r.TStart), max(last, r.TEnd)
	}
	t.Logf("timing mode: %d records, %d SMs used of %d, %.3f ms from first start to last end, kernel %.3f ms, timer tick %.0f ns",
		len(recs), len(sms), h.NumSMs, float64(last-first)/1e6, tr.kernelMs, h.TimerTickNs)
	if len(sms) < h.NumSMs/2 {
		t.Errorf("only %d SMs ran blocks", len(sms))
	}
}

// TestGPUOutOfMemoryIsReported asks for more device memory than there is:
// a clear error, not a crash, and the device still works.
func TestGPUOutOfMemoryIsReported(t *testing.T) {
	c := kernels.Config{Variant: instrument.VariantNaive, N: 4096, D: 64, Br: 64, Bc: 64, Batch: 16, Heads: 64,
		Pattern: instrument.PatternNormal, TraceBH: instrument.Range{Lo: 0, Hi: 1}, TraceQ: instrument.Range{Lo: 0, Hi: 1}}
	_, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(c) })
	if err == nil || isFatal(err) {
		t.Fatalf("64 GiB of S and P: %v", err)
	}
	t.Logf("as expected: %v", err)
	c = kernels.Config{Variant: instrument.VariantFlash2, N: 16, D: 8, Br: 4, Bc: 4, Batch: 1, Heads: 1, Pattern: instrument.PatternNormal}
	if _, err := onGPU(func(d *device) (*gpuTrace, error) { return d.traceConfig(c) }); err != nil {
		t.Fatalf("the device after a refused run: %v", err)
	}
}

var profile = flag.Bool("profile", false, "run TestProfileRuns: each profiled run's kernels once, for ncu")

// ProfiledRuns are the runs whose memory counters docs/TRAFFIC.md records:
// the benchmark shapes, where every buffer dwarfs the 50 MB L2, and two toy
// runs where everything fits in it. Their order is the order of the kernel
// launches ncu reports.
var ProfiledRuns = []string{
	"variant=flash2&n=4096&d=64&br=64&bc=64&batch=4&heads=32&pattern=normal&seed=1",
	"variant=flash2&n=4096&d=128&br=64&bc=64&batch=4&heads=16&pattern=normal&seed=1",
	"variant=flash2&n=4096&d=64&br=64&bc=64&batch=4&heads=32&causal=1&pattern=normal&seed=1",
	"variant=naive&n=4096&d=64&br=64&bc=64&batch=4&heads=32&pattern=normal&seed=1",
	"variant=flash2&n=1024&d=64&br=64&bc=64&batch=16&heads=32&pattern=normal&seed=1",
	"variant=naive&n=1024&d=64&br=64&bc=64&batch=16&heads=32&pattern=normal&seed=1",
	"variant=flash2&n=16&d=8&br=4&bc=4&pattern=normal&seed=5",
	"variant=naive&n=16&d=8&br=4&bc=4&pattern=normal&seed=5",
}

// TestProfileRuns launches each profiled run's untraced kernels once, under
// ncu (docs/TRAFFIC.md has the command).
func TestProfileRuns(t *testing.T) {
	if !*profile {
		t.Skip("-profile not set")
	}
	for _, q := range ProfiledRuns {
		v, _ := url.ParseQuery(q)
		c, err := launch.ParseBenchConfig(v)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		_, err = onGPU(func(d *device) (float64, error) {
			pr, err := d.newProblem(c)
			if err != nil {
				return 0, err
			}
			defer pr.mem.free()
			return d.timed(pr, nil)
		})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		fmt.Println("profiled", q)
	}
}

// gradientsHold holds a backward trace's dQ, dK and dV (every q-tile
// traced) to the float64 gradient of the same inputs, every element, with
// the bound the mirror's own test holds it to (kernelstest.BackwardTolerance).
func gradientsHold(c kernels.Config, recs []*instrument.Record, worst map[string]float64) error {
	for bh := c.TracedBH().Lo; bh < c.TracedBH().Hi; bh++ {
		in := kernels.InputsFor(&c, bh)
		ref := kernelstest.ReferenceGrad(in, in.DO, c.N, c.D, c.Causal)
		sq, sk, sv := kernelstest.GradSizesOf(c.Variant, in, in.DO, c.N, c.D, c.Causal)
		tol := kernelstest.BackwardToleranceOf(c.Variant, kernelstest.ScoreTerms(in, c.N, c.D, c.Causal))
		dq, dk, dv := kernels.TraceGradients(&c, recs, bh)
		for _, g := range []struct {
			name string
			got  []float32
			want []float64
			size float64
		}{{"dQ", dq, ref.DQ, sq}, {"dK", dk, ref.DK, sk}, {"dV", dv, ref.DV, sv}} {
			e := kernelstest.GradError(g.got, g.want, g.size)
			if !(e <= tol) { // NaN fails too
				return fmt.Errorf("bh %d: %s off by %.3g of its size, bound %.3g", bh, g.name, e, tol)
			}
			worst["gradients vs float64"] = math.Max(worst["gradients vs float64"], e/tol)
		}
	}
	return nil
}

var gradDump = flag.String("grad-dump", "", "TestGPUBackwardDump writes backward runs' inputs and GPU gradients here, for bench/backward/autograd.py")

// TestGPUBackwardDump runs backward kernels on the GPU, causal and not, at
// d = 64 and 128 with ragged N, and writes for each run its inputs (Q, K,
// V, dO) and the gradients the GPU's trace holds (dQ, dK, dV), raw
// little-endian float32 N×d per batch-head, with a manifest.json, into
// -grad-dump: bench/backward/autograd.py holds them to PyTorch's autograd
// of scaled_dot_product_attention on the same inputs, a reference nobody
// here wrote. Without -grad-dump it does nothing.
func TestGPUBackwardDump(t *testing.T) {
	if *gradDump == "" {
		t.Skip("-grad-dump names no folder")
	}
	if err := os.MkdirAll(*gradDump, 0o755); err != nil {
		t.Fatal(err)
	}
	type run struct {
		Name, Variant              string
		N, D, Br, Bc, Batch, Heads int
		Causal                     bool
		BF16                       bool // bf16 operands: kernelstest.BackwardToleranceBF16 and GradSizesOf
		Seed                       uint64
		Scale                      float32
	}
	var runs []run
	for _, v := range instrument.Variants {
		info := kernels.Info(v)
		if !info.Backward {
			continue
		}
		for k, d := range []int{64, 128} {
			t0, ok := info.SweepTile(d)
			if !ok {
				continue
			}
			for _, causal := range []bool{false, true} {
				c := kernels.Config{Variant: v, N: 3*t0.Br + 17 + 8*k, D: d, Br: t0.Br, Bc: t0.Bc, Batch: 2, Heads: 1,
					Causal: causal, Pattern: instrument.PatternNormal, Seed: rand.Uint64()}
				tr, err := onGPU(func(dv *device) (*gpuTrace, error) { return dv.traceConfig(c) })
				if err != nil {
					t.Fatalf("%+v: %v", c, err)
				}
				_, recs, err := instrument.ReadAll(bytes.NewReader(tr.bytes))
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s_d%d_n%d_causal%v", v, d, c.N, causal)
				for bh := range c.Batch * c.Heads {
					in := kernels.InputsFor(&c, bh)
					dq, dk, dv := kernels.TraceGradients(&c, recs, bh)
					for part, x := range map[string][]float32{"q": in.Q, "k": in.K, "v": in.V, "do": in.DO, "dq": dq, "dk": dk, "dv": dv} {
						buf := make([]byte, 4*len(x))
						for e, f := range x {
							binary.LittleEndian.PutUint32(buf[4*e:], math.Float32bits(f))
						}
						if err := os.WriteFile(filepath.Join(*gradDump, fmt.Sprintf("%s_bh%d_%s.f32", name, bh, part)), buf, 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
				runs = append(runs, run{Name: name, Variant: v.String(), N: c.N, D: c.D, Br: c.Br, Bc: c.Bc, Batch: c.Batch, Heads: c.Heads,
					Causal: causal, BF16: info.DType == instrument.DTypeBF16, Seed: c.Seed, Scale: c.Scale()})
			}
		}
	}
	manifest, _ := json.MarshalIndent(runs, "", "  ")
	if err := os.WriteFile(filepath.Join(*gradDump, "manifest.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d backward runs written to %s", len(runs), *gradDump)
}

// writtenAsTraced holds the dQ, dK and dV a backward run's kernels wrote to
// device memory to the gradients its trace holds (kernels.TraceGradients),
// bit for bit: the trace's dK is the last step's accumulator times the
// scale in one float32 multiply, as the kernel's final write is. It checks
// the kernels' own writes, which no trace record shows.
func writtenAsTraced(c kernels.Config, tr *gpuTrace, recs []*instrument.Record) error {
	if tr.gradients == nil {
		return fmt.Errorf("the worker kept no gradients of the run")
	}
	nd := c.N * c.D
	for bh := c.TracedBH().Lo; bh < c.TracedBH().Hi; bh++ {
		dq, dk, dv := kernels.TraceGradients(&c, recs, bh)
		for b, want := range map[kernels.Buffer][]float32{kernels.BufDQ: dq, kernels.BufDK: dk, kernels.BufDV: dv} {
			got := tr.gradients[b][bh*nd : (bh+1)*nd]
			for e := range want {
				if math.Float32bits(got[e]) != math.Float32bits(want[e]) {
					return fmt.Errorf("bh %d: buffer %d element %d: device memory holds %v, the trace %v", bh, b, e, got[e], want[e])
				}
			}
		}
	}
	return nil
}
