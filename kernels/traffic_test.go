package kernels

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"flashstep/instrument"
)

// The schedule is the mirror's record sequence, without the numbers.
func TestScheduleIsTheMirrorsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 9))
	for range 200 {
		c := randomConfig(rng)
		sched := Schedule(&c)
		k := 0
		err := RunMirror(context.Background(), c, func(r *instrument.Record) error {
			if r.Kind == instrument.KindInputs {
				return nil
			}
			s := sched[k]
			if s.Kind != r.Kind || s.BH != r.BH || s.I != r.I || s.J != r.J || s.RowsValid != r.RowsValid || s.ColsValid != r.ColsValid {
				t.Fatalf("%+v step %d: schedule %+v, mirror %s (%d,%d,%d)", c, k, s, r.Kind, r.BH, r.I, r.J)
			}
			k++
			return nil
		})
		if err != nil || k != len(sched) {
			t.Fatalf("%+v: %v, %d mirror steps, %d scheduled", c, err, k, len(sched))
		}
	}
}

// TestRunTrafficByHand checks the two-figure model against totals worked
// out from the kernels' structure.
func TestRunTrafficByHand(t *testing.T) {
	const f = 4
	for _, tc := range []struct {
		n, d, bh int
	}{{4096, 64, 128}, {1024, 128, 256}, {512, 64, 4}} {
		N, d, bh := uint64(tc.n), uint64(tc.d), uint64(tc.bh)
		c := Config{N: tc.n, D: tc.d, Br: 64, Bc: 64, Batch: 1, Heads: tc.bh, Pattern: instrument.PatternNormal}
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
	const h100 = 85017493504
	// The benchmark shape at N=4096, d=64: B=4, H=32.
	p, err := PlanMemory(4, 32, 4096, 64, h100)
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
		{p.NaiveMaxN, func(n int) int64 { q, _ := PlanMemory(4, 32, n, 64, h100); return q.NaiveBytes }},
		{p.FlashMaxN, func(n int) int64 { q, _ := PlanMemory(4, 32, n, 64, h100); return q.FlashBytes }},
	} {
		if x.bytes(x.maxN) > h100 || x.bytes(x.maxN+1) <= h100 {
			t.Errorf("max N %d is not the boundary", x.maxN)
		}
	}
	if p.NaiveMaxN > 16384 || p.FlashMaxN < 50*p.NaiveMaxN {
		t.Errorf("naive stops at %d, flash at %d", p.NaiveMaxN, p.FlashMaxN)
	}
	if p.FlashTileByte != int64(Flash2Instance{Br: 64, Bc: 64, D: 64}.SharedBytes()) {
		t.Error("tile bytes")
	}
	var fe FieldErrors
	if _, err := PlanMemory(0, 1, 1<<23, 1, h100); !errors.As(err, &fe) || len(fe) != 2 {
		t.Fatalf("bad input: %v", err)
	}
}

// TestRunTrafficFlash2Fast: the bf16 kernel moves flash2's elements at 2
// bytes each (the LSE stays float32), in one launch named for it; under a
// causal mask K and V still come from DRAM once per head.
func TestRunTrafficFlash2Fast(t *testing.T) {
	for _, causal := range []bool{false, true} {
		c := Config{Variant: instrument.VariantFlash2Fast, N: 4096, D: 128, Br: 128, Bc: 48, Batch: 1, Heads: 16, Causal: causal, Pattern: instrument.PatternNormal}
		N, d, bh := uint64(c.N), uint64(c.D), uint64(16)
		runs := H100.RunTraffic(c)
		if len(runs) != 1 || runs[0].Kernel != "flash2_fast" {
			t.Fatalf("launches %+v", runs)
		}
		var wantRead uint64
		for _, s := range Schedule(&Config{Variant: c.Variant, N: c.N, D: c.D, Br: c.Br, Bc: c.Bc, Batch: 1, Heads: 1, Causal: causal}) {
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
