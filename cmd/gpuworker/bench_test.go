//go:build gpu

package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"unsafe"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/ptx"
	"flashstep/launch"

	"gorgonia.org/cu"
)

// ptxDir, if set, holds other builds of some modules, loaded instead of the
// committed PTX: DIR/module.cubin (SASS, loaded as it is), DIR/module.ptx
// or DIR/module.ptx.gz (JIT-compiled by the driver like the committed one). The benchmarks then
// time those builds, to tell what the compiler is worth from what the
// source is.
var ptxDir = flag.String("ptx-dir", "", "load modules found in this folder (module.cubin, module.ptx or module.ptx.gz) instead of the committed PTX")

func init() {
	committed := modulePTX
	modulePTX = func(module string) (string, error) {
		if *ptxDir != "" {
			if b, err := os.ReadFile(filepath.Join(*ptxDir, module+".cubin")); err == nil {
				return string(b), nil
			}
			// The committed form is gzipped; scripts/ptx-hopper build leaves
			// the text beside it for ptxas. Ignored files outlive a call on
			// a warm machine, so a .ptx that is not its .ptx.gz's text is
			// refused rather than loaded in its place.
			text, errText := os.ReadFile(filepath.Join(*ptxDir, module+".ptx"))
			gz, errGz := os.ReadFile(filepath.Join(*ptxDir, module+".ptx.gz"))
			switch {
			case errGz == nil:
				b, err := ptx.Gunzip(gz)
				if err == nil && errText == nil && string(text) != string(b) {
					err = fmt.Errorf("-ptx-dir %s: %s.ptx is not %s.ptx.gz's text (a stale build?): remove one", *ptxDir, module, module)
				}
				return string(b), err
			case errText == nil:
				return string(text), nil
			}
		}
		return committed(module)
	}
}

// BenchmarkFlash2 times flash2 at the FlashAttention benchmark shapes
// (B·N = 16384, H·d = 2048) with CUDA events: untraced, traced with two
// q-tiles of one batch-head recorded in full, and traced in timestamps-only mode (every
// block). FLOPs are 4·B·H·N²·d, halved under a causal mask. Run it with
// -test.bench Flash2 -test.benchtime 20x; docs/GPU.md records the figures
// beside PyTorch's on the same GPU.
func BenchmarkFlash2(b *testing.B) {
	for _, shape := range []struct {
		n, d, br, bc int
		causal       bool
	}{
		{4096, 64, 64, 64, false},
		{4096, 128, 64, 64, false},
		{4096, 128, 32, 64, false},
		{4096, 64, 64, 64, true},
		{4096, 128, 64, 64, true},
	} {
		c := kernels.Config{Variant: instrument.VariantFlash2, N: shape.n, D: shape.d, Br: shape.br, Bc: shape.bc,
			Batch: max(1, 16384/shape.n), Heads: 2048 / shape.d, Causal: shape.causal, Pattern: instrument.PatternNormal, Seed: 1}
		name := fmt.Sprintf("N=%d/d=%d/Br=%d/Bc=%d/causal=%t", c.N, c.D, c.Br, c.Bc, c.Causal)
		for _, mode := range []string{"untraced", "traced-2-q-tiles", "timing-all-blocks"} {
			b.Run(name+"/"+mode, func(b *testing.B) { benchFlash2(b, c, mode) })
		}
	}
}

// BenchmarkRungs times every rung the ladder bench times but naive_mma
// (BenchmarkNaiveMMA) the same way, one sub-benchmark per rung, at its
// compiled tiles (-test.bench 'Rungs/flash3_ws/' picks one): untraced, two
// q-tiles of one batch-head traced in full, every block timestamped. The
// bar: tracing one head costs at most 1.5× the untraced time.
func BenchmarkRungs(b *testing.B) {
	for _, info := range kernels.Variants() {
		if info.Bench && !info.Materialised {
			b.Run(info.Name(), func(b *testing.B) { benchRung(b, info.Variant) })
		}
	}
}

// benchRung times a tensor-core rung at its compiled tiles and the
// benchmark shapes: untraced, two q-tiles of one batch-head traced in full, every block
// timestamped.
func benchRung(b *testing.B, v instrument.Variant) {
	for _, f := range kernels.Info(v).Tiles {
		for _, causal := range []bool{false, true} {
			n := 4096
			c := kernels.Config{Variant: v, N: n, D: f.D, Br: f.Br, Bc: f.Bc,
				Batch: max(1, 16384/n), Heads: 2048 / f.D, Causal: causal, Pattern: instrument.PatternNormal, Seed: 1}
			name := fmt.Sprintf("N=%d/d=%d/Br=%d/Bc=%d/causal=%t", c.N, c.D, c.Br, c.Bc, c.Causal)
			for _, mode := range []string{"untraced", "traced-2-q-tiles", "timing-all-blocks"} {
				b.Run(name+"/"+mode, func(b *testing.B) { benchFlash2(b, c, mode) })
			}
		}
	}
}

// BenchmarkFlash3Roles measures what recording the warp roles costs the
// warp-specialised rungs, those with a role table (docs/ROLES.md): untraced, every block timestamped, and every
// block's roles recorded, at N = 4096 and one batch of 8 heads (the
// benchmark shape's 128 batch-heads would be a roles trace past one run's
// limit; 8 heads are 256 blocks, about two waves of the chip).
func BenchmarkFlash3Roles(b *testing.B) {
	for _, info := range kernels.Variants() {
		if info.Roles == nil {
			continue
		}
		v := info.Variant
		for _, f := range info.Tiles {
			for _, causal := range []bool{false, true} {
				c := kernels.Config{Variant: v, N: 4096, D: f.D, Br: f.Br, Bc: f.Bc,
					Batch: 1, Heads: 8, Causal: causal, Pattern: instrument.PatternNormal, Seed: 1}
				name := fmt.Sprintf("%s/N=%d/d=%d/heads=%d/causal=%t", v, c.N, c.D, c.Heads, c.Causal)
				for _, mode := range []string{"untraced", "timing-all-blocks", "roles-all-blocks"} {
					b.Run(name+"/"+mode, func(b *testing.B) { benchFlash2(b, c, mode) })
				}
			}
		}
	}
}

// BenchmarkBackward times the tensor-core backward rungs (flash2_bwd_mma,
// flash3_bwd_wgmma: every bf16 backward of the registry) through the
// worker (the committed PTX, JIT-compiled by the driver; pre, main and dq
// between the worker's CUDA events) at the tile the sweep runs for each
// head dim, untraced, at the benchmark shapes: what the product runs,
// beside bench/backward's own build (docs/LADDER.md, runs p and v). Each
// shape's inputs take the host some 20 s (the exact forward in float64).
func BenchmarkBackward(b *testing.B) {
	for _, v := range instrument.Variants {
		info := kernels.Info(v)
		if !info.Backward || info.DType != instrument.DTypeBF16 {
			continue
		}
		for _, d := range []int{64, 128} {
			f, _ := info.SweepTile(d)
			for _, causal := range []bool{false, true} {
				n := 4096
				c := kernels.Config{Variant: v, N: n, D: f.D, Br: f.Br, Bc: f.Bc,
					Batch: max(1, 16384/n), Heads: 2048 / f.D, Causal: causal, Pattern: instrument.PatternNormal, Seed: 1}
				b.Run(fmt.Sprintf("%s/N=%d/d=%d/Br=%d/Bc=%d/causal=%t/untraced", v, c.N, c.D, c.Br, c.Bc, c.Causal),
					func(b *testing.B) { benchFlash2(b, c, "untraced") })
			}
		}
	}
}

// BenchmarkNaiveMMA times naive attention on the tensor cores at the same
// shapes and tiles as BenchmarkFlash2Fast, untraced: run both in one call
// for the bf16 pair's ratio (the bar: flash at least 4× at d=128).
func BenchmarkNaiveMMA(b *testing.B) {
	for _, f := range kernels.Info(instrument.VariantNaiveMMA).Tiles {
		for _, causal := range []bool{false, true} {
			n := 4096
			c := kernels.Config{Variant: instrument.VariantNaiveMMA, N: n, D: f.D, Br: f.Br, Bc: f.Bc,
				Batch: max(1, 16384/n), Heads: 2048 / f.D, Causal: causal, Pattern: instrument.PatternNormal, Seed: 1}
			b.Run(fmt.Sprintf("N=%d/d=%d/Br=%d/Bc=%d/causal=%t/untraced", c.N, c.D, c.Br, c.Bc, c.Causal), func(b *testing.B) { benchFlash2(b, c, "untraced") })
		}
	}
}

func benchFlash2(b *testing.B, c kernels.Config, mode string) {
	ms, err := onGPU(func(d *device) ([]float64, error) {
		pr, err := d.newProblem(c)
		if err != nil {
			return nil, err
		}
		defer pr.mem.free()
		var tr *traceArgs
		if mode != "untraced" {
			tc := c
			timing := mode == "timing-all-blocks" || mode == "roles-all-blocks"
			tc.Timing, tc.Roles = timing, mode == "roles-all-blocks"
			if !timing {
				// A whole head at N = 4096 is past one traced run's
				// limit (kernels.MaxTraceBytes): its first q-tiles.
				tc.TraceBH = instrument.Range{Lo: 0, Hi: 1}
				tc.TraceQ = instrument.Range{Lo: 0, Hi: 2}
			}
			run, err := tc.Check()
			if err != nil {
				return nil, err
			}
			lay, err := launch.ForTrace(run)
			if err != nil {
				return nil, err
			}
			tr = &traceArgs{mode: instrument.ModeFull}
			if tc.Roles {
				tr.mode = instrument.ModeRoles
			} else if timing {
				tr.mode = instrument.ModeTiming
			}
			if tr.buf, err = pr.mem.alloc(int64(lay.TraceBytes)); err != nil {
				return nil, err
			}
			for _, l := range lay.Kernels {
				p, err := pr.mem.alloc(int64(len(l.Offsets)) * 8)
				if err != nil {
					return nil, err
				}
				if err := cu.MemcpyHtoD(p, unsafe.Pointer(&l.Offsets[0]), int64(len(l.Offsets))*8); err != nil {
					return nil, err
				}
				tr.offsets = append(tr.offsets, p)
			}
			b.ReportMetric(float64(lay.TraceBytes)/(1<<20), "trace-MiB")
		}
		if _, err := d.timed(pr, tr); err != nil { // warm-up
			return nil, err
		}
		var times []float64
		for b.Loop() {
			t, err := d.timed(pr, tr)
			if err != nil {
				return nil, err
			}
			times = append(times, t)
		}
		return times, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	sort.Float64s(ms)
	med := ms[len(ms)/2]
	flops := 4 * float64(c.Batch*c.Heads) * float64(c.N) * float64(c.N) * float64(c.D)
	if c.Causal {
		flops /= 2
	}
	if kernels.Info(c.Variant).Backward {
		flops *= 2.5 // five products of the forward's two, as FlashAttention's benchmarks count
	}
	b.ReportMetric(med, "median-ms")
	b.ReportMetric(flops/med/1e9, "TFLOP/s")
}
