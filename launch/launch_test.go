package launch_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/kernels/ptx"
	. "flashstep/launch"
)

// TestGPUTraceLayout places the mirror's records where the plan says each
// launch writes them: they must tile the buffer exactly, in the mirror's
// order. Which launch and slot writes a record is worked out here from each
// kernel's own indexing, not from the plan's. The runs: every variant at
// every tile it is compiled for, whole and partly traced
// (kernelstest.EdgeGPUConfigs), then 400 random ones up to N = 300, or
// under -short 80 up to N = 160.
func TestGPUTraceLayout(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	runs := kernelstest.EdgeGPUConfigs(rng)
	maxN := 300
	if testing.Short() {
		maxN = 160
	}
	for range testrand.Runs(400, 40) {
		runs = append(runs, kernelstest.RandomGPUConfig(rng, maxN))
	}
	for _, c := range runs {
		run := kernelstest.MustRun(t, c)
		p, err := ForTrace(run)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		h := c.Header(instrument.SourceGPU, "")
		var off uint64
		type slotKey struct{ launch, slot int }
		first := map[slotKey]uint64{}
		materialised := kernels.Info(c.Variant).Materialised
		// flash1 (a block per batch-head) and decode_group (a block per
		// group of heads) write each record to a slot of its own.
		perRecord := c.Variant == instrument.VariantFlash1 || c.Variant == instrument.VariantDecodeGroup
		// The split-KV rungs (decode_split, decode_paged): the split
		// kernel's slots, then the merge's.
		split := kernels.Info(c.Variant).Family == kernels.FamilyDecodeSplit
		err = kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error {
			if r.Kind == instrument.KindInputs {
				return nil
			}
			block := r.BH*c.Tr() + r.I // grid (Tr, B·H): blockIdx.y·Tr + blockIdx.x
			k := slotKey{0, block}
			splits, _ := kernels.DecodeSplits(&c)
			switch {
			case split && r.Kind == instrument.KindSplitEnd: // the split kernel's slots: steps, then split ends
				k.slot = block*(c.Tc()+splits) + c.Tc() + r.J
			case split && r.Kind == instrument.KindFlashStep:
				k.slot = block*(c.Tc()+splits) + r.J
			case split && r.Kind == instrument.KindMerge: // the merge's: each split, then the epilogue
				k = slotKey{1, block*(splits+1) + r.J}
			case split && r.Kind == instrument.KindEpilogue:
				k = slotKey{1, block*(splits+1) + splits}
			case perRecord && r.Kind == instrument.KindEpilogue: // a slot per record
				k.slot = block*(c.Tc()+1) + c.Tc()
			case perRecord:
				k.slot = block*(c.Tc()+1) + r.J
			case r.Kind == instrument.KindBwdStep: // a slot per (kv-tile, q-tile) of grid (Tc, B·H)
				k = slotKey{1, (r.BH*c.Tc()+r.J)*c.Tr() + r.I}
			case r.Kind == instrument.KindBwdDP: // naive_bwd's first kernel, grid (Tc, Tr, B·H)
				k.slot = block*c.Tc() + r.J
			case r.Kind == instrument.KindBwdDS:
				k.launch = 1
			case r.Kind == instrument.KindBwdKV: // its fourth, a slot per (kv-tile, q-tile)
				k = slotKey{3, (r.BH*c.Tc()+r.J)*c.Tr() + r.I}
			case r.Kind == instrument.KindBwdDQ: // the third kernel, grid (Tr, B·H)
				k.launch = 2
			case materialised && r.Kind == instrument.KindScores: // grid (Tc, Tr, B·H)
				k.slot = block*c.Tc() + r.J
			case materialised && r.Kind == instrument.KindSoftmax:
				k.launch = 1
			case materialised:
				k.launch = 2
			}
			if _, seen := first[k]; !seen {
				first[k] = off
			}
			off += uint64(h.RecordBytes(r.Kind))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if off != p.TraceBytes {
			t.Fatalf("%+v: mirror records take %d bytes, the plan %d", c, off, p.TraceBytes)
		}
		for li, l := range p.Kernels {
			for b, o := range l.Offsets {
				want, traced := first[slotKey{li, b}]
				if !traced {
					want = NotTraced
				}
				if o != want {
					t.Fatalf("%+v: launch %s slot %d at %d, the mirror's record is at %d", c, l.Name, b, o, want)
				}
			}
		}
	}
}

func TestPtxasReportCoversEveryKernel(t *testing.T) {
	t.Parallel()
	seen := map[string]kernels.PtxasFigures{}
	for _, f := range kernels.Ptxas() {
		seen[f.Module+"/"+f.Kernel] = f
	}
	all := Kernels()
	for _, m := range kernels.Modules {
		names := all[m]
		if len(names) == 0 {
			t.Errorf("module %s lists no kernels", m)
		}
		text, err := ModuleText(m)
		if err != nil {
			t.Fatalf("module %s: %v", m, err)
		}
		for _, k := range names {
			if p, ok := seen[m+"/"+k]; !ok || p.Registers == 0 {
				t.Errorf("ptxas.txt has no figures for %s in %s", k, m)
			}
			if !strings.Contains(text, ".entry "+k+"(") {
				t.Errorf("module %s has no kernel %s", m, k)
			}
		}
	}
	if len(ptx.Hash()) != 16 {
		t.Error("PTX hash")
	}
}

func TestTimingModeSize(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 100 {
		c := kernelstest.RandomGPUConfig(rng, 600)
		c.TraceBH, c.TraceQ, c.Timing = instrument.Range{}, instrument.Range{}, true
		for c.TraceBytes() > kernels.MaxTraceBytes { // a whole grid of small tiles: no run
			c = kernelstest.RandomGPUConfig(rng, 600)
			c.TraceBH, c.TraceQ, c.Timing = instrument.Range{}, instrument.Range{}, true
		}
		p, err := ForTrace(kernelstest.MustRun(t, c))
		if err != nil {
			t.Fatal(err)
		}
		h := c.Header(instrument.SourceGPU, "")
		if got, want := int64(p.TraceBytes)+int64(h.HeaderBytes()), c.TraceBytes(); got != want {
			t.Fatalf("%+v: layout %d bytes, TraceBytes %d", c, got, want)
		}
		if uint64(h.Records)*56 != p.TraceBytes {
			t.Fatalf("%+v: %d records for %d bytes", c, h.Records, p.TraceBytes)
		}
	}
}

// TestForBenchmarkShapes: an untraced run is held to the GPU's limits only,
// not the stepper's (batch up to 16, N up to 4096): every variant plans the
// sweep's benchmark shapes, B·N = 16384 and H·d = 2048, up to N = 32768.
func TestForBenchmarkShapes(t *testing.T) {
	t.Parallel()
	for _, v := range instrument.Variants { // the backward's too: the sweep times them on request
		for _, d := range []int{64, 128} {
			for _, n := range []int{512, 4096, 32768} {
				c := kernels.Config{Variant: v, N: n, D: d, Br: 64, Bc: 64, Batch: max(1, 16384/n), Heads: 2048 / d, Pattern: instrument.PatternNormal}
				if tile, ok := kernels.Info(v).SweepTile(d); ok {
					c.Br, c.Bc = tile.Br, tile.Bc
				}
				p, err := For(&c)
				if err != nil {
					t.Fatalf("%s N=%d d=%d B=%d: %v", v, n, d, c.Batch, err)
				}
				if len(p.Kernels) == 0 || p.TraceBytes != 0 || p.Kernels[0].Offsets != nil {
					t.Fatalf("%s N=%d d=%d: an untraced plan %+v", v, n, d, p)
				}
				if c.Validate() == nil && n > kernels.MaxN {
					t.Fatalf("the stepper's limits changed: N=%d passes Validate", n)
				}
			}
		}
	}
}

// TestDynamicSharedCoversEveryKernel: the ladder page says each compiled
// kernel's shared memory; every kernel has a figure but those whose tiles
// are the run's (naive's and naive_bwd's), and it is what the plan
// launches it with.
func TestDynamicSharedCoversEveryKernel(t *testing.T) {
	t.Parallel()
	shared := DynamicShared()
	for m, names := range Kernels() {
		for _, k := range names {
			if _, ok := shared[k]; !ok && k != "fs_probe" && !runTiled(m) { // naive's tiles are the run's
				t.Errorf("%s/%s has no shared-memory figure", m, k)
			}
		}
	}
	rng := testrand.New(t)
	for range 200 {
		c := kernelstest.RandomGPUConfig(rng, 300)
		p, err := For(&c)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range p.Kernels {
			if want, ok := shared[k.Name]; ok && want != k.Shared {
				t.Fatalf("%s: launched with %d B, the figure says %d", k.Name, k.Shared, want)
			}
		}
	}
}

// TestValidateGridAndOffsetLimits: runs the kernels could not launch, or
// whose trace-offset tables would be gigabytes, are refused before they
// reach the GPU, with the field and the limit named; the offsets only where
// a trace is laid out (ValidateTraced, ForTrace), since an untraced run
// uploads none.
func TestValidateGridAndOffsetLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query, field, mentions string
		offsets                bool // refused for its trace offsets alone
	}{
		// 16·64 batch-heads of flash1 at 2×2 tiles: 34 GB of offsets for a 508 KB trace.
		{"variant=flash1&n=4096&d=4&br=2&bc=2&batch=16&heads=64&trace_bh=0-0&trace_q=0-0", kernels.FieldBatch, "at most 128.0 MiB", true},
		{"variant=naive&n=4096&d=1&br=1&bc=1", kernels.FieldBatch, "at most 128.0 MiB", true},
		{"variant=flash2&n=16&d=4&br=2&bc=2&batch=512&heads=128", kernels.FieldHeads, "at most 65535", false},
		{"variant=naive&n=65600&d=1&br=1&bc=65600", kernels.FieldBr, "at most 65535", false},
	} {
		v, _ := url.ParseQuery(tc.query)
		c, err := kernels.ParseBenchFields(v)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		err = ValidateTraced(&c)
		var fe kernels.FieldErrors
		if !errors.As(err, &fe) || !strings.Contains(fe.ByField()[tc.field], tc.mentions) {
			t.Errorf("%s traced: %v, want %s mentioning %q", tc.query, err, tc.field, tc.mentions)
		}
		err = Validate(&c)
		if tc.offsets && err != nil {
			t.Errorf("%s untraced: %v, want no refusal: an untraced run uploads no trace offsets", tc.query, err)
		}
		if !tc.offsets && (!errors.As(err, &fe) || !strings.Contains(fe.ByField()[tc.field], tc.mentions)) {
			t.Errorf("%s untraced: %v, want %s mentioning %q", tc.query, err, tc.field, tc.mentions)
		}
	}
	// The tables Validate bounds are the ones the plan builds.
	rng := testrand.New(t)
	for range 200 {
		c := kernelstest.RandomGPUConfig(rng, 300)
		p, err := ForTrace(kernelstest.MustRun(t, c))
		if err != nil {
			t.Fatal(err)
		}
		var b int64
		for _, k := range p.Kernels {
			b += 8 * int64(len(k.Offsets))
		}
		if b != OffsetBytesForTest(&c) {
			t.Fatalf("%+v: the plan's offset tables take %d bytes, the check counts %d", c, b, OffsetBytesForTest(&c))
		}
	}
}

// TestUntracedRunsUploadNoOffsets: the sweep times naive_bwd at N=32768
// (B=1, H=32) untraced, so its 128 MiB of trace offsets, had it been traced,
// do not refuse it; traced, or in timing mode, the same grid is refused for
// them, and ForTrace refuses what ValidateTraced does.
func TestUntracedRunsUploadNoOffsets(t *testing.T) {
	t.Parallel()
	c := kernels.Config{Variant: instrument.VariantNaiveBwd, N: 32768, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 32, Pattern: instrument.PatternNormal}
	if OffsetBytesForTest(&c) <= MaxOffsetBytes {
		t.Fatalf("%d bytes of offsets: pick a larger grid", OffsetBytesForTest(&c))
	}
	if err := Validate(&c); err != nil {
		t.Errorf("untraced: %v", err)
	}
	p, err := For(&c)
	if err != nil {
		t.Fatalf("untraced: %v", err)
	}
	for _, k := range p.Kernels {
		if k.Offsets != nil {
			t.Fatalf("untraced plan of %s has offsets", k.Name)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		var fe kernels.FieldErrors
		if !errors.As(err, &fe) || !strings.Contains(fe.ByField()[kernels.FieldBatch], "8-byte trace offset for every record") {
			t.Errorf("%s: %v, want %s refused for its trace offsets", what, err, kernels.FieldBatch)
		}
	}
	refused("traced", ValidateTraced(&c))
	c.Timing = true
	refused("timing", ValidateTraced(&c))

	// A run the stepper takes: 16·64 batch-heads of flash1 at 2×2 tiles,
	// one block traced.
	c = kernels.Config{Variant: instrument.VariantFlash1, N: 4096, D: 4, Br: 2, Bc: 2, Batch: 16, Heads: 64, Pattern: instrument.PatternNormal,
		TraceBH: instrument.Range{Lo: 0, Hi: 1}, TraceQ: instrument.Range{Lo: 0, Hi: 1}}
	if _, err := For(&c); err != nil {
		t.Errorf("flash1 untraced: %v", err)
	}
	_, err = ForTrace(kernelstest.MustRun(t, c))
	var fe kernels.FieldErrors
	if !errors.As(err, &fe) || !strings.Contains(fe.ByField()[kernels.FieldBatch], "8-byte trace offset for every") {
		t.Errorf("flash1 ForTrace: %v, want %s refused for its trace offsets", err, kernels.FieldBatch)
	}
}

// TestInstancesMatchSource: each rung's .cu compiles the tiles its registry
// entry lists, in the same order (VariantInfo.Instance), and each module's
// PTX holds exactly the kernels the worker loads from it; every launch fits
// the GPU's shared memory.
func TestInstancesMatchSource(t *testing.T) {
	t.Parallel()
	instance := regexp.MustCompile(`(?m)^[A-Z0-9_]+_INSTANCE\([\d, ]+\)`)
	for _, info := range kernels.Variants() {
		src, err := os.ReadFile("../" + kernels.SourcePath(info.Variant))
		if err != nil {
			t.Fatal(err)
		}
		got := instance.FindAllString(string(src), -1)
		var want []string
		for _, tile := range info.Tiles {
			want = append(want, info.Instance(tile))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s.cu compiles %q, its registry entry lists %q", info.Name(), got, want)
		}
	}
	for name, shared := range DynamicShared() {
		if shared > MaxSharedBytes {
			t.Errorf("%s takes %d B of shared memory, above the GPU's %d", name, shared, MaxSharedBytes)
		}
	}
	entry := regexp.MustCompile(`(?m)^\.(?:visible )?\.entry (\w+)\(`)
	for m, names := range Kernels() {
		text, err := ModuleText(m)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entry.FindAllStringSubmatch(text, -1) {
			got = append(got, e[1])
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(names))
		if !slices.Equal(got, want) {
			t.Errorf("module %s holds %v, the worker loads %v", m, got, want)
		}
	}
}

// runTiled says whether a PTX module's kernels take their tiles from the
// run (a variant compiled at no tiles): their shared memory is the run's.
func runTiled(module string) bool {
	for _, info := range kernels.Variants() {
		if module == info.Module() || module == info.Module()+"_traced" {
			return info.Tiles == nil
		}
	}
	return false
}
