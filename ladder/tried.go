package ladder

// MeasuredIdea is an idea built into a backward rung and timed against the
// rung without it in the same call on the GPU. BackwardTried are those
// tried at d = 64, where the backward stayed furthest from cuDNN's until
// run av (the last try, run ay, came after it), and left out; BulkIdeas
// are the two that flash3_bwd_bulk keeps, measured apart. The ladder page
// lists both under the backward rungs, so that an engineer climbing the
// ladder sees what each idea is worth and what did not pay;
// docs/LADDER.md has each run's reading, its patch and its correctness
// checks.
type MeasuredIdea struct {
	What string // the idea
	On   string // the rung it changed
	GPU  string
	Run  string // the run's name in docs/LADDER.md and docs/GPU.md
	// Before and After are the rung's TFLOP/s without and with the idea
	// (N = 4096, B·N = 16384, H·d = 2048, no mask), each the mean of the
	// rows of Raw that BeforeAt and AfterAt name, as many of each: the
	// call's rounds, which alternated the two (TestTriedIdeasAreTheirRuns
	// computes them again from the file).
	Before, After float64
	// Raw is the call's raw figures, in docs/ladder-runs: a file, or a
	// pattern of files (path.Match's) read in name order.
	Raw               string
	BeforeAt, AfterAt RawRows
}

// RawRows names rows of a raw bench output: those whose first field is
// Kernel and whose check passed, in the sections whose header holds
// Section, or anywhere when Section is empty. A section opens with a line
// opening with "== " or "## ", and with each file, headed by its name.
type RawRows struct{ Section, Kernel string }

// Worth is what the idea made of the rung: After over Before.
func (t MeasuredIdea) Worth() float64 { return t.After / t.Before }

// BackwardTried are the tries in the order they were made.
var BackwardTried = []MeasuredIdea{
	{What: "two warpgroups on one q-tile (a 64 × 128 tile), dQ split over the kv rows, its two parts added atomically",
		On: "flash3_bwd_wgmma", GPU: "H100", Run: "w", Before: 265.25, After: 244.75,
		Raw:      "2026-11-28-w-bwd-ksplit-h100.txt",
		BeforeAt: RawRows{"", "flash3_bwd_wgmma_bc64_d64"}, AfterAt: RawRows{"", "flash3_bwd_wgmma_bc128_d64"}},
	{What: "three blocks an SM: registers capped at 168 (44 bytes spilled) and a narrower dQ stage",
		On: "flash3_bwd_wgmma", GPU: "H200", Run: "x", Before: 263.15, After: 257.30,
		Raw:      "2026-11-28-x-bwd-3blocks-h200.txt",
		BeforeAt: RawRows{"== old d64 round", "flash3_bwd_wgmma_bc64_d64"}, AfterAt: RawRows{"== new d64 round", "flash3_bwd_wgmma_bc64_d64"}},
	{What: "a q-tile's dQ adds held in registers and sent once the next q-tile's products are issued",
		On: "flash3_bwd_wgmma", GPU: "H200", Run: "y", Before: 263.60, After: 254.20,
		Raw:      "2026-11-28-y-bwd-late-dq-h200.txt",
		BeforeAt: RawRows{"== old d64 round", "flash3_bwd_wgmma_bc64_d64"}, AfterAt: RawRows{"== new d64 round", "flash3_bwd_wgmma_bc64_d64"}},
	{What: "two warpgroups on one q-tile again, dQ's two parts added by the bulk reduce",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "al", Before: 335.40, After: 269.70,
		Raw:      "2026-11-28-bulk-split-dq-bench.txt",
		BeforeAt: RawRows{"", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"", "flash3_bwd_bulk_bc128_d64"}},
	{What: "the next q-tile's Sᵀ and dPᵀ asked for before this q-tile's elementwise work, one wait for all products",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "am", Before: 335.60, After: 316.33,
		Raw:      "2026-11-28-bwd-overlap-am.txt",
		BeforeAt: RawRows{"", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"", "flash3_bwd_overlap_bc64_d64"}},
	{What: "the same unrolled by two, so that no register is copied (255 registers, spills, products serialised)",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "an", Before: 337.83, After: 269.37,
		Raw:      "2026-11-28-bwd-overlap-an.txt",
		BeforeAt: RawRows{"== unrolled", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"== unrolled", "flash3_bwd_overlap_bc64_d64"}},
	{What: "the next q-tile's Sᵀ and dPᵀ asked for after this q-tile's dQ product instead",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "an", Before: 338.03, After: 250.33,
		Raw:      "2026-11-28-bwd-overlap-an.txt",
		BeforeAt: RawRows{"== late", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"== late", "flash3_bwd_overlap_bc64_d64"}},
	{What: "the copy engine's work (dQ's adds, the stage's refill) asked for under the next q-tile's first products",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "aq", Before: 335.53, After: 336.77,
		Raw:      "2026-11-28-bulk-deferred-aq.txt",
		BeforeAt: RawRows{"== old", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"== new", "flash3_bwd_bulk_bc64_d64"}},
	{What: "each product's shared-memory descriptors made by one add to the operand's first",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "ar", Before: 335.53, After: 338.30,
		Raw:      "2026-11-28-bwd-desc-ar.txt",
		BeforeAt: RawRows{"## a (committed)", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"## b (descriptors", "flash3_bwd_bulk_bc64_d64"}},
	// After run av, on the rung as it now stands: the plan's producer.
	{What: "a producer warp beside the consumer warpgroup issues every copy, each stage freed through an mbarrier, no block-wide barrier (the fifth warp costs the SM its third block)",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "ay", Before: 382.20, After: 348.40,
		Raw:      "2026-11-28-bwd-producer-ay.txt",
		BeforeAt: RawRows{"== a (committed)", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"== b (producer)", "flash3_bwd_bulk_bc64_d64"}},
}

// BulkIdeas are flash3_bwd_bulk's two ideas, each timed against the rung
// without it: the copy engine's bulk reduce for dQ, against
// flash3_bwd_tma in one run of the backward bench (a round each), and two
// q-tiles in flight (three blocks an SM at d = 64), against the bulk rung
// with three, in three alternated rounds.
var BulkIdeas = []MeasuredIdea{
	{What: "dQ added by the copy engine's bulk reduce: a warp stages its part as the copy engine's boxes, and one thread asks for the adds",
		On: "flash3_bwd_tma", GPU: "H200", Run: "ah", Before: 306.10, After: 335.20,
		Raw:      "2026-11-28-bulk-h200-backward-table.txt",
		BeforeAt: RawRows{"", "flash3_bwd_tma_bc64_d64"}, AfterAt: RawRows{"", "flash3_bwd_bulk_bc64_d64"}},
	{What: "two q-tiles in flight instead of three, so that three blocks fit an SM at d = 64 (168 registers, 74 KiB)",
		On: "flash3_bwd_bulk", GPU: "H200", Run: "av", Before: 335.33, After: 380.80,
		Raw:      "2026-11-28-bwd-stages-av-ab-[ab][123].txt",
		BeforeAt: RawRows{"-ab-a", "flash3_bwd_bulk_bc64_d64"}, AfterAt: RawRows{"-ab-b", "flash3_bwd_bulk_bc64_d64"}},
}
