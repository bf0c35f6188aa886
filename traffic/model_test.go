package traffic

import (
	"errors"
	"fmt"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
)

// TestRunTrafficByHand checks the two-figure model against totals worked
// out from the kernels' structure.
func TestRunTrafficByHand(t *testing.T) {
	t.Parallel()
	const f = 4
	for _, tc := range []struct {
		n, d, bh int
	}{{4096, 64, 128}, {1024, 128, 256}, {512, 64, 4}} {
		N, d, bh := uint64(tc.n), uint64(tc.d), uint64(tc.bh)
		c := kernels.Config{N: tc.n, D: tc.d, Br: 64, Bc: 64, Batch: 1, Heads: tc.bh, Pattern: instrument.PatternNormal}
		tr := uint64(c.Tr())
		c.Variant = instrument.VariantFlash2
		flash := H100.RunTraffic(c)
		if len(flash) != 1 {
			t.Fatalf("flash2 has %d launches", len(flash))
		}
		fl := flash[0]
		if fl.L2Read != bh*f*(N*d+2*tr*N*d) || fl.L2Write != bh*f*(N*d+N) {
			t.Errorf("flash2 N=%d: L2 %d/%d", tc.n, fl.L2Read, fl.L2Write)
		}
		// K and V come from DRAM once per head when the heads in flight fit.
		wantDRAMRead := bh * f * 3 * N * d
		if !H100.kvFits(&c) {
			wantDRAMRead = fl.L2Read
		}
		if fl.DRAMRead != wantDRAMRead || fl.DRAMWrite != fl.L2Write {
			t.Errorf("flash2 N=%d: DRAM %d/%d, want %d/%d", tc.n, fl.DRAMRead, fl.DRAMWrite, wantDRAMRead, fl.L2Write)
		}
		c.Variant = instrument.VariantNaive
		naive := H100.RunTraffic(c)
		if len(naive) != 3 || naive[0].Kernel != "naive_scores" || naive[2].Kernel != "naive_pv" {
			t.Fatalf("naive launches %+v", naive)
		}
		sc, sm, pv := naive[0], naive[1], naive[2]
		if sc.L2Write != bh*f*N*N || sm.L2Read != bh*f*3*N*N || sm.L2Write != bh*f*(N*N+N) || pv.L2Read != bh*f*(N*N+tr*N*d) {
			t.Errorf("naive N=%d: L2 %+v", tc.n, naive)
		}
		spFits := H100.bufferFits(&c)
		rowsFit := int64(H100.SoftmaxRows)*int64(tc.n)*4 <= H100.L2Bytes
		wantSm := map[bool]uint64{false: 3 * bh * f * N * N, true: bh * f * N * N}[rowsFit]
		if spFits {
			wantSm = 0
		}
		if sm.DRAMRead != wantSm {
			t.Errorf("naive N=%d: softmax reads %d from DRAM, want %d", tc.n, sm.DRAMRead, wantSm)
		}
		if sc.DRAMRead != bh*f*2*N*d || sc.DRAMWrite != sc.L2Write {
			t.Errorf("naive scores N=%d: DRAM %d/%d", tc.n, sc.DRAMRead, sc.DRAMWrite)
		}
		// The point of it all: naive moves about 4N² bytes per head through
		// DRAM, flash about 4Nd: N/d + 1 times fewer.
		var naiveDRAM uint64
		for _, k := range naive {
			naiveDRAM += k.DRAMRead + k.DRAMWrite
		}
		if ratio := float64(naiveDRAM) / float64(fl.DRAMRead+fl.DRAMWrite); !spFits && ratio < 0.9*float64(N)/float64(d) {
			t.Errorf("N=%d d=%d: naive moves only %.1f× flash's DRAM bytes", tc.n, tc.d, ratio)
		}
	}
}

func TestPlanMemory(t *testing.T) {
	t.Parallel()
	const h100 = 85017493504
	// The benchmark shape at N=4096, d=64: B=4, H=32.
	p, err := PlanMemory(4, 32, 4096, 64, instrument.DTypeF32, h100)
	if err != nil {
		t.Fatal(err)
	}
	if p.NaiveSPBytes != 2*128*4096*4096*4 || p.InputsBytes != 128*(4*4096*64*4+4096*4) || !p.NaiveFits {
		t.Fatalf("%+v", p)
	}
	// The largest N is where the next one does not fit, for both.
	for _, x := range []struct {
		maxN  int
		bytes func(n int) int64
	}{
		{p.NaiveMaxN, func(n int) int64 { q, _ := PlanMemory(4, 32, n, 64, instrument.DTypeF32, h100); return q.NaiveBytes }},
		{p.FlashMaxN, func(n int) int64 { q, _ := PlanMemory(4, 32, n, 64, instrument.DTypeF32, h100); return q.FlashBytes }},
	} {
		if x.bytes(x.maxN) > h100 || x.bytes(x.maxN+1) <= h100 {
			t.Errorf("max N %d is not the boundary", x.maxN)
		}
	}
	if p.NaiveMaxN > 16384 || p.FlashMaxN < 50*p.NaiveMaxN {
		t.Errorf("naive stops at %d, flash at %d", p.NaiveMaxN, p.FlashMaxN)
	}
	f2 := kernels.Config{Variant: instrument.VariantFlash2, N: 64, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 1}
	if plan, err := launch.For(&f2); err != nil || p.FlashTileByte != int64(plan.Kernels[0].Shared) {
		t.Errorf("a flash block's tile bytes: %d, flash2 launches with %v (%v)", p.FlashTileByte, plan.Kernels, err)
	}
	var fe kernels.FieldErrors
	if _, err := PlanMemory(0, 1, 1<<23, 1, instrument.DTypeF32, h100); !errors.As(err, &fe) || len(fe) != 2 {
		t.Fatalf("bad input: %v", err)
	}
}

// TestRunTrafficFlash2Fast: the bf16 kernel moves flash2's elements at 2
// bytes each (the LSE stays float32), in one launch named for it; under a
// causal mask K and V still come from DRAM once per head.
func TestRunTrafficFlash2Fast(t *testing.T) {
	t.Parallel()
	for _, causal := range []bool{false, true} {
		c := kernels.Config{Variant: instrument.VariantFlash2Fast, N: 4096, D: 128, Br: 128, Bc: 48, Batch: 1, Heads: 16, Causal: causal, Pattern: instrument.PatternNormal}
		N, d, bh := uint64(c.N), uint64(c.D), uint64(16)
		runs := H100.RunTraffic(c)
		if len(runs) != 1 || runs[0].Kernel != "flash2_fast" {
			t.Fatalf("launches %+v", runs)
		}
		var wantRead uint64
		for _, s := range kernels.Schedule(&kernels.Config{Variant: c.Variant, N: c.N, D: c.D, Br: c.Br, Bc: c.Bc, Batch: 1, Heads: 1, Causal: causal}) {
			if s.Kind == instrument.KindFlashStep {
				wantRead += 2 * 2 * uint64(s.ColsValid) * d
			}
		}
		wantRead = bh * (wantRead + 2*N*d)
		r := runs[0]
		if r.L2Read != wantRead || r.L2Write != bh*(2*N*d+4*N) {
			t.Errorf("causal %v: L2 %d/%d, want %d/%d", causal, r.L2Read, r.L2Write, wantRead, bh*(2*N*d+4*N))
		}
		if !H100.kvFits(&c) || r.DRAMRead != bh*2*3*N*d || r.DRAMWrite != r.L2Write {
			t.Errorf("causal %v: DRAM %d/%d, want %d/%d", causal, r.DRAMRead, r.DRAMWrite, bh*2*3*N*d, r.L2Write)
		}
	}
}

// TestPlanMemoryBF16: in bf16 the inputs and naive_mma's P take half, S and
// the LSE stay float32, and naive still runs out long before flash. A flash
// block's shared memory is not flash2's at half the bytes: flash2_mma holds
// Q_i, K_j and V_j in bf16, unpadded, and S and P in registers.
func TestPlanMemoryBF16(t *testing.T) {
	t.Parallel()
	const h100 = 80 << 30
	f, _ := PlanMemory(2, 16, 8192, 128, instrument.DTypeF32, h100)
	b, _ := PlanMemory(2, 16, 8192, 128, instrument.DTypeBF16, h100)
	bh, n, d := int64(32), int64(8192), int64(128)
	if b.InputsBytes != bh*(4*n*d*2+n*4) || f.InputsBytes != bh*(4*n*d*4+n*4) {
		t.Errorf("inputs: bf16 %d, f32 %d", b.InputsBytes, f.InputsBytes)
	}
	if b.NaiveSPBytes != bh*n*n*(4+2) || f.NaiveSPBytes != bh*n*n*8 {
		t.Errorf("S and P: bf16 %d, f32 %d", b.NaiveSPBytes, f.NaiveSPBytes)
	}
	// flash2: 4·(64·128 + 64·129 + 64·128 + 64·65 + 3·64); flash2_mma:
	// 2·(64·128 + 2·64·128), and at d = 64 2·(64·64 + 2·64·64).
	if f.FlashTileByte != 115968 || b.FlashTileByte != 49152 {
		t.Errorf("a flash block's shared memory: f32 %d, bf16 %d", f.FlashTileByte, b.FlashTileByte)
	}
	if b64, _ := PlanMemory(2, 16, 8192, 64, instrument.DTypeBF16, h100); b64.FlashTileByte != 24576 {
		t.Errorf("a flash block's shared memory, bf16 at d=64: %d", b64.FlashTileByte)
	}
	if b.DType != "bf16" || b.FlashMaxN <= f.FlashMaxN || b.NaiveMaxN <= f.NaiveMaxN || b.FlashMaxN < 50*b.NaiveMaxN {
		t.Errorf("bf16 plan %+v against f32 %+v", b, f)
	}
}

// TestRunTrafficFlash1 against the kernel's structure: every step reads Q_i,
// and after the first kv-tile O_i, m_i and l_i, and writes those three back;
// K and V are read once per head. At N = 4096, d = 128 with 16 heads in
// flight the running state does not fit in L2, so every one of those bytes
// reaches DRAM; at a toy size it does, and O reaches DRAM once.
func TestRunTrafficFlash1(t *testing.T) {
	t.Parallel()
	const f = 4
	for _, tc := range []struct {
		n, d, heads int
		fits        bool
	}{{4096, 128, 16, false}, {256, 64, 2, true}} {
		c := kernels.Config{Variant: instrument.VariantFlash1, N: tc.n, D: tc.d, Br: 64, Bc: 64, Batch: 1, Heads: tc.heads, Pattern: instrument.PatternNormal}
		N, d, bh := uint64(tc.n), uint64(tc.d), uint64(tc.heads)
		steps := uint64(c.Tr() * c.Tc())
		rows := uint64(c.Br)
		runs := H100.RunTraffic(c)
		if len(runs) != 1 || runs[0].Kernel != "flash1" {
			t.Fatalf("launches %+v", runs)
		}
		state := rows*d*f + 2*rows*f
		wantRead := bh * (steps*rows*d*f + (steps-uint64(c.Tr()))*state + 2*N*d*f)
		wantWrite := bh * (steps*state + N*f)
		r := runs[0]
		if r.L2Read != wantRead || r.L2Write != wantWrite {
			t.Errorf("N=%d: L2 %d/%d, want %d/%d", tc.n, r.L2Read, r.L2Write, wantRead, wantWrite)
		}
		if H100.flash1Fits(&c) != tc.fits {
			t.Fatalf("N=%d: fits %v", tc.n, !tc.fits)
		}
		if !tc.fits && (r.DRAMRead != r.L2Read || r.DRAMWrite != r.L2Write) {
			t.Errorf("N=%d: DRAM %d/%d, want every L2 byte", tc.n, r.DRAMRead, r.DRAMWrite)
		}
		if tc.fits && (r.DRAMRead != bh*3*N*d*f || r.DRAMWrite != bh*(N*d*f+2*N*f+N*f)) {
			t.Errorf("N=%d: DRAM %d/%d, want %d/%d", tc.n, r.DRAMRead, r.DRAMWrite, bh*3*N*d*f, bh*(N*d*f+3*N*f))
		}
		// Against flash2 on the same shape: Tc times the output writes.
		c2 := c
		c2.Variant = instrument.VariantFlash2
		if w2 := H100.RunTraffic(c2)[0].L2Write; r.L2Write <= uint64(c.Tc())*(w2-bh*N*f)-1 {
			t.Errorf("N=%d: flash1 writes %d, flash2 %d", tc.n, r.L2Write, w2)
		}
	}
}

// TestRunTrafficNaiveRow: pass 1 reads Q once and K, pass 2 K and V again,
// per block; nothing but O and the LSE is written.
func TestRunTrafficNaiveRow(t *testing.T) {
	t.Parallel()
	const f = 4
	c := kernels.Config{Variant: instrument.VariantNaiveRow, N: 1024, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 4, Pattern: instrument.PatternNormal}
	N, d, bh, tr := uint64(c.N), uint64(c.D), uint64(4), uint64(c.Tr())
	r := H100.RunTraffic(c)
	if len(r) != 1 || r[0].Kernel != "naive_row" {
		t.Fatalf("launches %+v", r)
	}
	if want := bh * (N*d*f + tr*3*N*d*f); r[0].L2Read != want || r[0].L2Write != bh*(N*d*f+N*f) {
		t.Errorf("L2 %d/%d, want %d/%d", r[0].L2Read, r[0].L2Write, want, bh*(N*d*f+N*f))
	}
	if want := bh * 3 * N * d * f; r[0].DRAMRead != want {
		t.Errorf("DRAM read %d, want %d: Q, K and V once each", r[0].DRAMRead, want)
	}
}

// TestRunStepsCountsTheWalk holds RunSteps to the schedule RunTraffic walks
// for every rung at a size that fits, and to its cap at one that does not
// (1×1 tiles at N=4096: 16.7 million steps, counted no further than the cap).
func TestRunStepsCountsTheWalk(t *testing.T) {
	t.Parallel()
	for _, v := range kernels.Variants() {
		c := kernels.Config{Variant: v.Variant, N: 200, D: 64, Br: 16, Bc: 32, Batch: 2, Heads: 3, Pattern: instrument.PatternNormal}
		for _, causal := range []bool{false, true} {
			c.Causal = causal
			one := c
			one.TraceBH, one.TraceQ = instrument.Range{Lo: 0, Hi: 1}, instrument.Range{}
			if got, want := RunSteps(c), len(kernels.Schedule(&one)); got != want {
				t.Errorf("%s causal=%v: RunSteps %d, the schedule has %d", v.Name(), causal, got, want)
			}
		}
	}
	big := kernels.Config{Variant: instrument.VariantFlash1, N: 4096, D: 1, Br: 1, Bc: 1, Batch: 16, Heads: 64, Pattern: instrument.PatternNormal}
	if got := RunSteps(big); got != MaxRunSteps+1 {
		t.Errorf("1×1 tiles at N=4096: RunSteps %d, want the cap %d", got, MaxRunSteps+1)
	}
}

// TestBackwardTraffic: a backward run's traffic is told per kernel (flash2_bwd's
// pre, main and dq; naive_bwd's dp, ds, dq and dkv), and the naive backward
// writes dP and dS, N² floats each per batch-head, where flash2_bwd writes no
// N×N matrix at all. (Its DRAM figures: TestBackwardDRAM.)
func TestBackwardTraffic(t *testing.T) {
	t.Parallel()
	const N, d, bh = 256, 64, 2
	want := map[instrument.Variant][]string{
		instrument.VariantFlash2Bwd: {"flash2_bwd_pre", "flash2_bwd_main", "flash2_bwd_dq"},
		instrument.VariantNaiveBwd:  {"naive_bwd_dp", "naive_bwd_ds", "naive_bwd_dq", "naive_bwd_dkv"},
	}
	written := map[instrument.Variant]uint64{}
	for v, kernelsWanted := range want {
		c := kernels.Config{Variant: v, N: N, D: d, Br: 64, Bc: 64, Batch: 1, Heads: bh, Pattern: instrument.PatternNormal}
		var names []string
		for _, tr := range H100.RunTraffic(c) {
			names = append(names, tr.Kernel)
			written[v] += tr.L2Write
		}
		if fmt.Sprint(names) != fmt.Sprint(kernelsWanted) {
			t.Errorf("%s: kernels %v, want %v", v, names, kernelsWanted)
		}
	}
	// flash2_bwd writes D, dQ (zeroed, then added once per kv-tile, then
	// scaled), dK and dV; naive_bwd dP and dS (N² each) and dQ, dK, dV.
	nd, n2 := uint64(N*d*4*bh), uint64(N*N*4*bh)
	if f := written[instrument.VariantFlash2Bwd]; f != uint64(N*4*bh)+nd+uint64(N/64)*nd+nd+2*nd {
		t.Errorf("flash2_bwd wrote %d bytes", f)
	}
	if n := written[instrument.VariantNaiveBwd]; n != 2*n2+3*nd {
		t.Errorf("naive_bwd wrote %d bytes, want dP and dS (%d each) and dQ, dK, dV", n, n2)
	}
}

// TestBackwardDRAM holds the backward's DRAM model to totals worked out by
// hand, per kernel, at N=256, d=64 on two batch-heads: on the H100, where
// everything a batch-head touches fits in L2, each input is read once, dQ
// comes in once for its atomic adds and goes out once, and naive_bwd's N×N
// matrices are written once and read back from L2 (P, an input, once from
// DRAM); and on a cache of one byte, where nothing stays: every request is
// DRAM's, and each of flash2_bwd's atomic adds into dQ reads its lines back
// from DRAM too.
func TestBackwardDRAM(t *testing.T) {
	t.Parallel()
	const N, d, bh, tiles = 256, 64, 2, 4 // 64×64 tiles: 4 q-tiles, 4 kv-tiles
	nd, n, n2 := uint64(N*d*4*bh), uint64(N*4*bh), uint64(N*N*4*bh)
	none := CacheModel{Name: "none", L2Bytes: 1, ResidentBlocks: 132, SoftmaxRows: 1}
	want := map[string]map[string][2]uint64{ // cache, kernel: DRAM read, written
		"H100": {
			"flash2_bwd_pre":  {2*nd + n, n + nd},
			"flash2_bwd_main": {2*nd + 2*nd + 2*n + nd, nd + 2*nd}, // K, V; Q, dO, L, D; dQ in; dQ out, dK, dV
			"flash2_bwd_dq":   {nd, nd},
			"naive_bwd_dp":    {2 * nd, n2},
			"naive_bwd_ds":    {n2, n2},
			"naive_bwd_dq":    {nd, nd},
			"naive_bwd_dkv":   {2 * nd, 2 * nd},
		},
		"none": {
			"flash2_bwd_pre":  {2*nd + n, n + nd},
			"flash2_bwd_main": {2*nd + tiles*(2*nd+2*n) + tiles*nd, tiles*nd + 2*nd},
			"flash2_bwd_dq":   {nd, nd},
			"naive_bwd_dp":    {2 * tiles * nd, n2},
			"naive_bwd_ds":    {4 * n2, n2},
			"naive_bwd_dq":    {n2 + tiles*nd, nd},
			"naive_bwd_dkv":   {2*n2 + 2*tiles*nd, 2 * nd},
		},
	}
	for _, m := range []CacheModel{H100, none} {
		key := map[bool]string{true: "H100", false: "none"}[m.Name == H100.Name]
		for _, v := range []instrument.Variant{instrument.VariantFlash2Bwd, instrument.VariantNaiveBwd} {
			c := kernels.Config{Variant: v, N: N, D: d, Br: 64, Bc: 64, Batch: 1, Heads: bh, Pattern: instrument.PatternNormal}
			for _, tr := range m.RunTraffic(c) {
				w, ok := want[key][tr.Kernel]
				if !ok {
					t.Fatalf("%s: no totals for kernel %s", key, tr.Kernel)
				}
				if tr.DRAMRead != w[0] || tr.DRAMWrite != w[1] {
					t.Errorf("%s %s: DRAM %d read, %d written; want %d and %d", key, tr.Kernel, tr.DRAMRead, tr.DRAMWrite, w[0], w[1])
				}
				if key == "none" && tr.Kernel != "flash2_bwd_main" && (tr.DRAMRead != tr.L2Read || tr.DRAMWrite != tr.L2Write) {
					t.Errorf("no cache, %s: DRAM %d/%d differs from its requests %d/%d", tr.Kernel, tr.DRAMRead, tr.DRAMWrite, tr.L2Read, tr.L2Write)
				}
			}
		}
	}
}
