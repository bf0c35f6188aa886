package kernels

import "flashstep/instrument"

// Rung is one step of the kernel ladder, from the first kernel a student
// writes to FlashAttention-2's speed: one idea per rung. The ladder page and
// the stepper read this list; a rung not built yet says so (Built false) and
// names no variant.
type Rung struct {
	Number  int
	Name    string
	Variant instrument.Variant // the variant that runs it, when built
	DType   string
	Idea    string
	Built   bool
	// Bench names the rung's kernels in the ladder bench
	// (bench/ladder/bench.cu), whose recorded figures the page shows; empty
	// for the float32 rungs, which the recorded sweep times.
	Bench string
}

// Ladder is the rungs in order. NaiveMMA is the tensor-core naive partner:
// not a rung, the like-for-like comparison for the last ones.
var Ladder = []Rung{
	{1, "naive_row", instrument.VariantNaiveRow, "f32", "One thread per query row walks every key twice: once for the row's max, once for exp, the sum l and the weighted sum of V. The first kernel a student writes: correct and safe from overflow, no tiles, no shared memory; every row reads all of K twice and V once, and a thread's registers must hold its whole q row and O row.", true, ""},
	{2, "naive", instrument.VariantNaive, "f32", "Three kernels, S and P through device memory: S = QKᵀ written out as N×N, a row softmax reading it back and writing P, then O = PV. Its traffic grows with N², and its memory runs out first.", true, ""},
	{3, "flash1", instrument.VariantFlash1, "f32", "FlashAttention-1's loop order: one block per batch-head loads K_j and V_j once and walks every q-tile with them, so S and P stay on chip, but each q-tile's O, m and l go back to device memory after every kv-tile and are read again for the next, and O is divided by l at every step. Its parallelism is batch × heads, as FlashAttention-1's was: at long N few blocks fill the GPU.", true, ""},
	{4, "flash2", instrument.VariantFlash2, "f32", "FlashAttention-2's loop order: one block per q-tile keeps m, l and O on chip for all its kv-tiles and divides by l once at the end. S and P never leave the chip; in float32 without tensor cores it is compute-bound, barely faster than naive.", true, ""},
	{5, "flash2_mma", instrument.VariantFlash2MMA, "bf16", "The same loop on tensor cores: bf16 Q, K, V, mma.sync m16n8k16 with float32 accumulation, fragments through ldmatrix, P converted to bf16 in registers as the A operand of P·V. Nothing else changes: plain row-major shared tiles (ldmatrix hits the same banks), loads that wait for every thread, expf on scaled scores, 64-row tiles.", true, "flash2_mma"},
	{6, "flash2_fast", instrument.VariantFlash2Fast, "bf16", "What makes it fast: shared memory XOR-swizzled so ldmatrix hits no bank twice, K and V streamed by cp.async while the previous product runs, exp2 with the scale folded in, P packed to bf16 as it is made, 128-row tiles of 4 warps that reuse each K and V fragment twice, causal tiles above the diagonal skipped and only the diagonal ones masked.", true, "flash2_fast"},
	{7, "flash3_wgmma", 0, "bf16", "Hopper's own path: wgmma (asynchronous warpgroup MMAs reading B from shared memory) and TMA loads, toward the cuDNN backend's 650 TFLOP/s at d=128.", false, ""},
}

// NaiveMMA is naive attention on the same tensor cores as the last rungs:
// bf16 S and P products, S and P still through device memory.
var NaiveMMA = Rung{0, "naive_mma", instrument.VariantNaiveMMA, "bf16", "The naive three kernels on tensor cores: S = QKᵀ (float32, N×N), a row softmax writing P (bf16, N×N), O = PV. The like-for-like partner of the bf16 flash rungs: memory-bound on its N² traffic.", false, "naive_mma"}
