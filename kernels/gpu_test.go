package kernels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	. "flashstep/kernels"
	"flashstep/kernels/kernelstest"
)

func TestFlash2InstancesMatchSource(t *testing.T) {
	src, err := os.ReadFile("flash2.cu")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^FLASH2_INSTANCE\((\d+), (\d+), (\d+), (\d+)\)`)
	var got []Flash2Instance
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		n := func(s string) int { v, _ := strconv.Atoi(s); return v }
		got = append(got, Flash2Instance{n(m[1]), n(m[2]), n(m[3]), n(m[4])})
	}
	if len(got) != len(Flash2Instances) {
		t.Fatalf("flash2.cu compiles %v, the registry lists %v", got, Flash2Instances)
	}
	for k := range got {
		if got[k] != Flash2Instances[k] {
			t.Fatalf("flash2.cu compiles %v, the registry lists %v", got, Flash2Instances)
		}
		if f := got[k]; f.Br > f.Threads || (f.Br*f.D)%f.Threads != 0 || f.SharedBytes() > MaxSharedBytes {
			t.Errorf("instance %v breaks the kernel's assumptions", f)
		}
	}
}

// TestFlash2FastInstancesMatchSource: the tensor-core kernel's compiled
// tiles are the registry's, and each fits the kernel's assumptions: whole
// 16-row atoms per warp, 8-column atoms in pairs, rows of at least eight
// 16-byte chunks for the swizzle, and shared memory within the GPU's.
func TestFlash2FastInstancesMatchSource(t *testing.T) {
	src, err := os.ReadFile("flash2_fast.cu")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^FLASH2_FAST_INSTANCE\((\d+), (\d+), (\d+), (\d+)\)`)
	var got []Flash2FastInstance
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		n := func(s string) int { v, _ := strconv.Atoi(s); return v }
		got = append(got, Flash2FastInstance{n(m[1]), n(m[2]), n(m[3]), n(m[4])})
	}
	if len(got) == 0 || len(got) != len(Flash2FastInstances) {
		t.Fatalf("flash2_fast.cu compiles %v, the registry lists %v", got, Flash2FastInstances)
	}
	for k, f := range got {
		if f != Flash2FastInstances[k] {
			t.Fatalf("flash2_fast.cu compiles %v, the registry lists %v", got, Flash2FastInstances)
		}
		if f.Br%(16*f.Warps) != 0 || f.Bc%16 != 0 || f.D%64 != 0 || f.SharedBytes() > MaxSharedBytes {
			t.Errorf("instance %v breaks the kernel's assumptions", f)
		}
	}
}

// TestNaiveMMAInstancesMatchSource: naive_mma's compiled tiles are the
// registry's, each at one of flash2_fast's (the side by side steps both over
// the same tiles), within the kernels' assumptions.
func TestNaiveMMAInstancesMatchSource(t *testing.T) {
	src, err := os.ReadFile("naive_mma.cu")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^NAIVE_MMA_INSTANCE\((\d+), (\d+)\)`)
	var got []NaiveMMAInstance
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		n := func(s string) int { v, _ := strconv.Atoi(s); return v }
		got = append(got, NaiveMMAInstance{n(m[1]), n(m[2])})
	}
	if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(NaiveMMAInstances) {
		t.Fatalf("naive_mma.cu compiles %v, the registry lists %v", got, NaiveMMAInstances)
	}
	for _, f := range got {
		c := Config{Variant: instrument.VariantFlash2Fast, Br: NaiveMMABr, Bc: f.Bc, D: f.D}
		scores, pv := f.SharedBytes()
		if _, ok := Flash2FastInstanceFor(&c); !ok || f.Bc%16 != 0 || f.D%64 != 0 || max(scores, pv) > MaxSharedBytes {
			t.Errorf("instance %v is not at a flash2_fast tile, or breaks the kernels' assumptions", f)
		}
	}
}

// TestGPUTraceLayout places the mirror's records where the layout says each
// block writes: they must tile the buffer exactly, in the mirror's order.
func TestGPUTraceLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 300 {
		c := kernelstest.RandomGPUConfig(rng, 300)
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if err := c.ValidateGPU(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		h := c.Header(instrument.SourceGPU, "")
		lay := GPUTraceLayout(&c)
		// The mirror's records after the inputs, with their offsets.
		var off uint64
		type blockKey struct{ launch, block int }
		first := map[blockKey]uint64{}
		launchOf := map[instrument.Kind]int{instrument.KindFlashStep: 0, instrument.KindScores: 0, instrument.KindSoftmax: 1, instrument.KindPV: 2}
		err := RunMirror(context.Background(), c, func(r *instrument.Record) error {
			if r.Kind == instrument.KindInputs {
				return nil
			}
			l, ok := launchOf[r.Kind]
			if r.Kind == instrument.KindEpilogue {
				l = 0 // a flash kernel's epilogue is in its one launch; naive's in its third
				if Info(c.Variant).Materialised {
					l = 2
				}
				ok = true
			}
			if !ok {
				t.Fatalf("unexpected %s record", r.Kind)
			}
			var block int
			if Info(c.Variant).Materialised && r.Kind == instrument.KindScores {
				block = (r.BH*c.Tr()+r.I)*c.Tc() + r.J
			} else {
				block = r.BH*c.Tr() + r.I
			}
			k := blockKey{l, block}
			if _, seen := first[k]; !seen {
				first[k] = off
			}
			off += uint64(h.RecordBytes(r.Kind))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if off != lay.Bytes {
			t.Fatalf("%+v: mirror records take %d bytes, the layout %d", c, off, lay.Bytes)
		}
		for li, l := range lay.Launches {
			for b, o := range l.Offsets {
				want, traced := first[blockKey{li, b}]
				if !traced {
					want = NotTraced
				}
				if o != want {
					t.Fatalf("%+v: launch %s block %d at %d, the mirror's record is at %d", c, l.Kernel, b, o, want)
				}
			}
		}
	}
}

func TestPtxasReportCoversEveryKernel(t *testing.T) {
	figs := Ptxas()
	seen := map[string]PtxasFigures{}
	for _, f := range figs {
		seen[f.Module+"/"+f.Kernel] = f
	}
	for _, m := range []string{ModuleFlash2, ModuleFlash2Traced} {
		for _, f := range Flash2Instances {
			p, ok := seen[m+"/"+f.Name()]
			if !ok || p.Registers == 0 {
				t.Errorf("ptxas.txt has no figures for %s in %s", f.Name(), m)
			}
		}
		ptx, err := PTX(m)
		if err != nil || !strings.Contains(ptx, ".entry flash2_br64_bc64_d128(") {
			t.Errorf("module %s: %v", m, err)
		}
	}
	for _, m := range []string{ModuleNaive, ModuleNaiveTraced} {
		for _, k := range []string{"naive_scores", "naive_softmax", "naive_pv"} {
			if p, ok := seen[m+"/"+k]; !ok || p.Registers == 0 {
				t.Errorf("ptxas.txt has no figures for %s in %s", k, m)
			}
		}
	}
	if len(PTXHash()) != 16 {
		t.Error("PTX hash")
	}
}

func TestTimingModeSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 5))
	for range 100 {
		c := kernelstest.RandomGPUConfig(rng, 600)
		c.TraceBH, c.TraceQ, c.Timing = instrument.Range{}, instrument.Range{}, true
		lay := GPUTraceLayout(&c)
		h := c.Header(instrument.SourceGPU, "")
		if got, want := int64(lay.Bytes)+int64(h.HeaderBytes()), c.TraceBytes(); got != want {
			t.Fatalf("%+v: layout %d bytes, TraceBytes %d", c, got, want)
		}
		if uint64(h.Records)*56 != lay.Bytes {
			t.Fatalf("%+v: %d records for %d bytes", c, h.Records, lay.Bytes)
		}
	}
}
