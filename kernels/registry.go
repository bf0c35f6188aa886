package kernels

import "flashstep/instrument"

// VariantInfo describes one kernel variant: what pages say about it, the
// records its trace holds per q-tile, its device-memory traffic model and its
// CPU mirror.
type VariantInfo struct {
	Variant instrument.Variant
	Title   string
	Summary string
	// DType is what the kernel computes in, as its trace header says: bf16
	// variants take Q, K and V rounded to bf16 (InputsFor).
	DType instrument.DType

	// Materialised: S and P go through device memory (naive's three phases),
	// rather than living one tile at a time on chip.
	Materialised bool

	// Traffic is the device-memory bytes a record's step loads and stores,
	// from the kernel's access pattern.
	Traffic func(c *Config, r *instrument.Record) (read, written uint64)

	// phases is how many phases the variant's records leave in: the trace
	// holds phase 0 of every block, then phase 1 of every block, and so on
	// (naive's three kernels; flash1's kv-tiles, one after the other).
	phases  func(c *Config) int
	records func(c *Config, i int) []kindCount
	block   func(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record))
}

// kindCount says that a q-tile's trace holds n records of a kind, emitted in
// the given phase of the variant, for kv-tiles j0, j0+1, ... (kinds with a
// kv-tile).
type kindCount struct {
	kind  instrument.Kind
	n     int
	phase int
	j0    int
}

// onePhase is the phases of a variant whose blocks each run once, start to end.
func onePhase(*Config) int { return 1 }

// variantOrder is the kernels in ladder order (kernels/ladder.go), naive_mma,
// the tensor-core naive partner, last.
var variantOrder = []*VariantInfo{
	naiveRowInfo,
	{
		Variant:      instrument.VariantNaive,
		Title:        "Naive attention (float32)",
		Summary:      "Three kernels: S = QKᵀ to device memory, a row softmax to P in device memory, then O = PV.",
		DType:        instrument.DTypeF32,
		Materialised: true,
		Traffic:      naiveTraffic,
		phases:       func(*Config) int { return naivePhases },
		records:      naiveRecords,
		block:        naiveBlock,
	},
	flash1Info,
	{
		Variant: instrument.VariantFlash2,
		Title:   "FlashAttention-2 (float32)",
		Summary: "One block per q-tile keeps m, l and O on chip and walks the kv-tiles: S and P never leave the chip.",
		DType:   instrument.DTypeF32,
		Traffic: flash2Traffic,
		phases:  onePhase,
		records: flash2Records,
		block:   flash2Block,
	},
	flash2MMAInfo,
	{
		Variant: instrument.VariantFlash2Fast,
		Title:   "FlashAttention-2, tensor cores (bf16)", // the stepper's projector select holds about 37 characters
		Summary: "FlashAttention-2's loop on tensor cores: bf16 Q, K, V and P through mma.sync with float32 accumulation, exp2 with the scale folded in.",
		DType:   instrument.DTypeBF16,
		Traffic: flash2FastTraffic,
		phases:  onePhase,
		records: flash2Records, // the same tiles as flash2: one step per visited kv-tile, then the epilogue
		block:   flash2FastBlock,
	},
	{
		Variant:      instrument.VariantNaiveMMA,
		Title:        "Naive attention, tensor cores (bf16)",
		Summary:      "naive's three kernels on tensor cores: bf16 products, S (float32) and P (bf16) still N×N in device memory.",
		DType:        instrument.DTypeBF16,
		Materialised: true,
		Traffic:      naiveMMATraffic,
		phases:       func(*Config) int { return naivePhases },
		records:      naiveRecords,
		block:        naiveMMABlock,
	},
}

// The ladder's other rungs, in ladder order.
var (
	naiveRowInfo = &VariantInfo{
		Variant: instrument.VariantNaiveRow,
		Title:   "One thread per row (float32)",
		Summary: "The first kernel a student writes: one thread per query row walks every key twice, once for the row max, once for exp, the sum and P·V.",
		DType:   instrument.DTypeF32,
		Traffic: naiveRowTraffic,
		phases:  onePhase,
		records: naiveRowRecords,
		block:   naiveRowBlock,
	}
	flash1Info = &VariantInfo{
		Variant: instrument.VariantFlash1,
		Title:   "FlashAttention-1 loop order (float32)",
		Summary: "kv-tiles outer, q-tiles inner: one block per batch-head reads O, m and l from device memory and writes them back at every tile.",
		DType:   instrument.DTypeF32,
		Traffic: flash1Traffic,
		phases:  flash1Phases,
		records: flash1Records,
		block:   flash1Block,
	}
	flash2MMAInfo = &VariantInfo{
		Variant: instrument.VariantFlash2MMA,
		Title:   "FlashAttention-2, plain mma (bf16)",
		Summary: "flash2's loop on tensor cores, nothing tuned: bf16 Q, K, V and P through mma.sync and ldmatrix, plain shared tiles, loads that wait, expf.",
		DType:   instrument.DTypeBF16,
		Traffic: flash2FastTraffic, // the same loads and stores as flash2_fast
		phases:  onePhase,
		records: flash2Records,
		block:   flash2MMABlock,
	}
)

var variantInfo = func() map[instrument.Variant]*VariantInfo {
	m := map[instrument.Variant]*VariantInfo{}
	for _, v := range variantOrder {
		m[v.Variant] = v
	}
	return m
}()

// ElementBytes is the size of one element of Q, K, V and O in device
// memory: 2 for bf16, 4 for float32.
func (v *VariantInfo) ElementBytes() int {
	if v.DType == instrument.DTypeBF16 {
		return 2
	}
	return 4
}

// Variants lists the kernel variants in the order pages show them.
func Variants() []*VariantInfo { return variantOrder }

// Info describes variant v, or nil.
func Info(v instrument.Variant) *VariantInfo { return variantInfo[v] }

func variantNames() []string {
	var n []string
	for _, v := range variantOrder {
		n = append(n, v.Variant.String())
	}
	return n
}

// Header is the trace header of a run of c: its shape, its selection and the
// exact count of records the trace will hold.
func (c *Config) Header(source instrument.Source, label string) instrument.Header {
	return instrument.Header{
		Variant: c.Variant, DType: c.dtype(), Source: source, Causal: c.Causal, Timing: c.Timing, Pattern: c.Pattern,
		N: c.N, D: c.D, Br: c.Br, Bc: c.Bc, Batch: c.Batch, Heads: c.Heads,
		TracedBH: c.TracedBH(), TracedQ: c.TracedQ(),
		Seed: c.Seed, Scale: c.Scale(),
		Records: c.recordCount(),
		Label:   label,
	}
}

// dtype is the element type of c's kernel; float32 for an unknown variant,
// which Validate refuses anyway.
func (c *Config) dtype() instrument.DType {
	if v := variantInfo[c.Variant]; v != nil {
		return v.DType
	}
	return instrument.DTypeF32
}

// recordCount and TraceBytes add up the records of every traced q-tile. A
// timing trace holds one timing record per step of every block, no inputs.
func (c *Config) recordCount() int {
	perBH := 1 // the inputs record
	if c.Timing {
		perBH = 0
	}
	q := c.TracedQ()
	for i := q.Lo; i < q.Hi; i++ {
		for _, kc := range variantInfo[c.Variant].records(c, i) {
			perBH += kc.n
		}
	}
	return perBH * c.TracedBH().Len()
}

// TraceBytes is the exact size of the trace of c with an empty source label
// (a label adds its length, rounded up to 8).
func (c *Config) TraceBytes() int64 {
	h := instrument.Header{N: c.N, D: c.D, Br: c.Br, Bc: c.Bc}
	if c.Timing {
		return int64(h.HeaderBytes()) + int64(c.recordCount())*int64(h.RecordBytes(instrument.KindTiming))
	}
	perBH := int64(h.RecordBytes(instrument.KindInputs))
	q := c.TracedQ()
	for i := q.Lo; i < q.Hi; i++ {
		for _, kc := range variantInfo[c.Variant].records(c, i) {
			perBH += int64(kc.n) * int64(h.RecordBytes(kc.kind))
		}
	}
	return int64(h.HeaderBytes()) + perBH*int64(c.TracedBH().Len())
}

// GPUElementBytes is the size of one element of Q, K, V and O on the GPU:
// the variant's (2 for the bf16 kernels, 4 for the float32 ones).
func (c *Config) GPUElementBytes() int {
	if v := Info(c.Variant); v != nil {
		return v.ElementBytes()
	}
	return 4
}

// ConfigFromHeader is the run a trace header describes, selection included.
func ConfigFromHeader(h *instrument.Header) Config {
	c := Config{Variant: h.Variant, N: h.N, D: h.D, Br: h.Br, Bc: h.Bc, Batch: h.Batch, Heads: h.Heads,
		Causal: h.Causal, Pattern: h.Pattern, Seed: h.Seed, Timing: h.Timing}
	if h.TracedBH != c.TracedBH() {
		c.TraceBH = h.TracedBH
	}
	if h.TracedQ != c.TracedQ() {
		c.TraceQ = h.TracedQ
	}
	return c
}
