package lessons

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"flashstep/kernels"
)

// Term is one word of the course's glossary: what it means, in a sentence
// or two, and the lesson that teaches it. Forms are the spellings a lesson
// may use for it (the first is the headword); a lesson's page links the
// first of them it meets to the glossary.
type Term struct {
	ID      string
	Forms   []string
	Lesson  string // the slug of the lesson that teaches it
	Meaning string
	// Not are words that, right after a form, make it another word: "block
	// of S" is a block of a matrix, not of threads.
	Not []string
	// Code says the forms are names from the code (an instruction's:
	// `ldmatrix`): a lesson writes them as code, and a code span that is
	// exactly a form is a mention.
	Code bool
}

// Glossary is every term, in the order a student meets them.
var Glossary = []Term{
	{ID: "query-key-value", Forms: []string{"query", "queries"}, Lesson: "attention",
		Meaning: "Each position of a sequence has a query (what it looks for), a key (what it offers) and a value (what it hands over). Q, K and V are the N×d matrices of them, one row per position."},
	{ID: "head-dimension", Forms: []string{"head dimension"}, Lesson: "attention",
		Meaning: "d, the length of one head's query, key and value vectors; 64 or 128 in most models."},
	{ID: "softmax", Forms: []string{"softmax"}, Lesson: "attention",
		Meaning: "Turns a row of scores into weights: exp of each score over the sum of the exps. The weights are positive and add up to 1."},
	{ID: "batch-head", Forms: []string{"batch-head", "batch-heads"}, Lesson: "attention",
		Meaning: "One (sequence of the batch, head) pair: one independent attention problem. The stepper writes batch 1, head 7 as b1 h7; a run has batch × heads of them."},
	{ID: "hbm", Forms: []string{"device memory", "HBM", "HBM3"}, Lesson: "memory",
		Meaning: "The GPU's main memory, HBM (high-bandwidth memory: HBM3 on an H100, 80 GB at about 3.35 TB/s), stacked beside the chip rather than on it: large, and slow next to the chip's arithmetic."},
	{ID: "l2-cache", Forms: []string{"L2 cache", "L2"}, Lesson: "memory",
		Meaning: "The on-chip cache every SM shares (50 MB on an H100), between the SMs and device memory: every read and write of device memory passes through it, and what several blocks read in turn, such as a head's K and V, can come from it instead of from HBM."},
	{ID: "shared-memory", Forms: []string{"shared memory"}, Lesson: "memory",
		Meaning: "Fast memory on each SM (up to 227 KB for one block on an H100), shared by the threads of one block; where a kernel keeps its tiles."},
	{ID: "registers", Forms: []string{"registers"}, Lesson: "memory",
		Meaning: "Each thread's own fastest storage, 255 of 32 bits at most; where FlashAttention keeps its output accumulator."},
	{ID: "arithmetic-intensity", Forms: []string{"arithmetic intensity"}, Lesson: "memory",
		Meaning: "FLOPs a kernel does per byte it moves to or from device memory. Below the machine's ratio (about 295 on an H100 in bf16) a kernel is memory-bound; above it, compute-bound."},
	{ID: "memory-bound", Forms: []string{"memory-bound"}, Lesson: "memory",
		Meaning: "A kernel whose time is set by the bytes it moves, not by its arithmetic: moving fewer bytes would make it faster."},
	{ID: "compute-bound", Forms: []string{"compute-bound"}, Lesson: "memory",
		Meaning: "A kernel whose time is set by its arithmetic: it waits for the arithmetic units, not for memory."},
	{ID: "trace", Forms: []string{"trace"}, Lesson: "memory",
		Meaning: "What an instrumented kernel writes as it runs: a record per step with its m, l, O and, at teaching sizes, S and P. The stepper steps through it."},
	{ID: "naive-attention", Forms: []string{"naive attention"}, Lesson: "naive",
		Meaning: "Attention computed the textbook way: S and P are written whole to device memory, N×N numbers per head, and read back."},
	{ID: "tile", Forms: []string{"tile", "tiles"}, Lesson: "tiling",
		Meaning: "A block of rows and columns a kernel works on at once: a Br×Bc piece of S, from a q-tile of Q and a kv-tile of K and V."},
	{ID: "q-tile", Forms: []string{"q-tile", "q-tiles"}, Lesson: "tiling",
		Meaning: "Br consecutive rows of Q (and of the output). FlashAttention-2 gives each q-tile of each batch-head to one block."},
	{ID: "kv-tile", Forms: []string{"kv-tile", "kv-tiles"}, Lesson: "tiling",
		Meaning: "Bc consecutive rows of K and V. A block walks the kv-tiles in order, one tile step each."},
	{ID: "block", Forms: []string{"block", "blocks"}, Lesson: "tiling",
		Meaning: "A group of GPU threads that run on one SM and share its shared memory; a kernel's grid is made of blocks.",
		Not:     []string{" of S", " of P", " of Q", " of K", " of V", " of O", " of the"}},
	{ID: "ragged-tile", Forms: []string{"ragged"}, Lesson: "tiling",
		Meaning: "The last tile when the tile size does not divide N: fewer real rows or columns, the rest padding that is never used."},
	{ID: "online-softmax", Forms: []string{"online softmax"}, Lesson: "online-softmax",
		Meaning: "Softmax computed tile by tile without seeing the whole row first: keep a running max m and a running sum l, and rescale what was summed whenever m grows."},
	{ID: "running-max", Forms: []string{"running max", "m_old", "m_new"}, Lesson: "online-softmax",
		Meaning: "m, the largest score of a row seen so far. m_old is it before a tile, m_new after."},
	{ID: "running-sum", Forms: []string{"running sum"}, Lesson: "online-softmax",
		Meaning: "l, the sum of exp(score − m) over the columns seen so far, rescaled whenever m grows; the output is divided by it at the end."},
	{ID: "alpha", Forms: []string{"rescale factor", "α"}, Lesson: "online-softmax",
		Meaning: "α = exp(m_old − m_new), by which the running sum and output are multiplied when a tile raises the max; 1 when it does not."},
	{ID: "epilogue", Forms: []string{"epilogue"}, Lesson: "online-softmax",
		Meaning: "The end of a q-tile: the output is divided by l and written to device memory with the log-sum-exp."},
	{ID: "lse", Forms: []string{"log-sum-exp", "LSE"}, Lesson: "online-softmax",
		Meaning: "LSE = m + log l for a row: the log of the sum of the exps of its scores. The backward pass recomputes P from it."},
	{ID: "overflow", Forms: []string{"overflow", "overflows"}, Lesson: "stability",
		Meaning: "A number too large for its type becomes inf: exp(89) in float32, exp(12) in float16. Subtracting the max keeps exp's argument at or below 0."},
	{ID: "underflow", Forms: []string{"underflow", "underflows"}, Lesson: "stability",
		Meaning: "A result too close to 0 for its type rounds to 0: below about 6e−8 in float16 and 1.4e−45 in float32. In softmax it is harmless: a weight that small counts for nothing next to the others."},
	{ID: "nan", Forms: []string{"NaN"}, Lesson: "stability",
		Meaning: "Not a Number: the IEEE result of an operation with no defined value, such as inf/inf, inf − inf or 0·inf. Any arithmetic with a NaN gives NaN, so one spreads to everything computed from it."},
	{ID: "bf16", Forms: []string{"bfloat16", "bf16"}, Lesson: "stability",
		Meaning: "A 16-bit float with float32's range and 8 bits of precision; the tensor cores' input type."},
	{ID: "causal-mask", Forms: []string{"causal mask", "causal"}, Lesson: "causal",
		Meaning: "Query i may only attend to keys up to i: scores above the diagonal are −inf, and a tile entirely above it is skipped."},
	{ID: "sm", Forms: []string{"streaming multiprocessor", "SM", "SMs"}, Lesson: "gpu",
		Meaning: "One of the GPU's 132 (on an H100) processors, each with its own shared memory and registers, running blocks."},
	{ID: "timeline", Forms: []string{"timeline"}, Lesson: "gpu",
		Meaning: "A timing trace drawn as one row per SM and time to the right: which block ran where, and when."},
	{ID: "spill", Forms: []string{"spill", "spills", "spilled"}, Lesson: "registers",
		Meaning: "Values a thread cannot keep in its registers, moved to local memory (device memory, cached): slow."},
	{ID: "local-memory", Forms: []string{"local memory"}, Lesson: "registers",
		Meaning: "Memory private to one thread that lives in device memory, cached by L1 and L2, not in the SM's register file: where the compiler puts the values it spills, so each use of one is a memory access."},
	{ID: "warp", Forms: []string{"warp", "warps"}, Lesson: "tensor-cores",
		Meaning: "32 threads that execute one instruction together; a block is a few warps.",
		Not:     []string{" specialisation"}},
	{ID: "tensor-core", Forms: []string{"tensor core", "tensor cores"}, Lesson: "tensor-cores",
		Meaning: "Units that multiply small matrices in one instruction (mma.sync: 16×16 by 16×8 in bf16, summed in float32)."},
	{ID: "mma-sync", Forms: []string{"mma.sync"}, Lesson: "tensor-cores", Code: true,
		Meaning: "The PTX instruction by which a warp drives the tensor cores: all 32 threads issue it together, and it computes D = A·B + C on small tiles (m16n8k16: a 16×16 bf16 tile times a 16×8 one, summed in float32)."},
	{ID: "fragment", Forms: []string{"fragment", "fragments"}, Lesson: "tensor-cores",
		Meaning: "The share of a tensor-core tile that one thread of the warp holds in its registers, in a pattern the instruction fixes: for mma.sync m16n8k16, four numbers of the 16×8 float32 result per thread, two columns of two rows."},
	{ID: "quad", Forms: []string{"quad", "quads"}, Lesson: "tensor-cores",
		Meaning: "Four neighbouring lanes of a warp (the same lane / 4) that between them hold two whole rows of an mma.sync result tile: a row's max or sum needs only two shuffles among them."},
	{ID: "ldmatrix", Forms: []string{"ldmatrix"}, Lesson: "tensor-cores", Code: true,
		Meaning: "A warp instruction that loads 8×8 tiles of 16-bit numbers from shared memory straight into the fragment layout mma.sync takes, each thread giving the address of one 16-byte row; ldmatrix.trans loads them transposed."},
	{ID: "cp-async", Forms: []string{"cp.async"}, Lesson: "tensor-cores", Code: true,
		Meaning: "A copy from device memory into shared memory that does not pass through the registers and runs while the threads go on: a kernel starts loading the next tile, computes on the current one, then waits for the copy."},
	{ID: "bank-conflict", Forms: []string{"bank conflict", "bank conflicts"}, Lesson: "tensor-cores",
		Meaning: "Shared memory has 32 banks; threads that ask one bank for different addresses are served one after another."},
	{ID: "swizzle", Forms: []string{"swizzle"}, Lesson: "tensor-cores",
		Meaning: "A layout that stores chunk c of row r at c XOR (r mod 8), so that reading a column of chunks touches every bank once."},
	{ID: "cpu-mirror", Forms: []string{"CPU mirror"}, Lesson: "tensor-cores",
		Meaning: "Go code that follows a kernel's own tile order and float32 arithmetic; it computes the trace where there is no GPU, and the tests hold the GPU's trace to it."},
	{ID: "rung", Forms: []string{"ladder", "rung", "rungs"}, Lesson: "roofline",
		Meaning: ladderMeaning()},
	{ID: "roofline", Forms: []string{"roofline"}, Lesson: "roofline",
		Meaning: "A kernel's two floors: its FLOPs at the peak rate and its bytes at the memory's bandwidth; it can be no faster than the larger."},
	{ID: "compute-floor", Forms: []string{"compute floor", "compute floors"}, Lesson: "roofline",
		Meaning: "The least time a run's arithmetic can take: its FLOPs divided by the GPU's peak rate (989.4 TFLOP/s of dense bf16 on an H100 SXM5's tensor cores)."},
	{ID: "memory-floor", Forms: []string{"memory floor", "memory floors"}, Lesson: "roofline",
		Meaning: "The least time a run's traffic can take: the bytes it must move to and from device memory divided by the memory's bandwidth (3.35 TB/s on an H100 SXM5)."},
	{ID: "ridge-point", Forms: []string{"ridge point", "ridge"}, Lesson: "roofline",
		Meaning: "The arithmetic intensity at which a kernel's two floors are equal: the peak FLOP rate over the memory bandwidth, about 295 FLOPs per byte in bf16 on an H100. A kernel below it is memory-bound, one above it compute-bound."},
	{ID: "worklog", Forms: []string{"worklog"}, Lesson: "hopper",
		Meaning: "docs/LADDER.md, the notebook kept while the ladder's rungs were built and measured: each session on the H100 is a lettered run (run l, run m, …) kept with its commands, outputs and conclusions, and a lesson's \"run m\" names the one a figure comes from."},
	{ID: "sm-90a", Forms: []string{"sm_90a"}, Lesson: "hopper", Code: true,
		Meaning: "The compile target for Hopper's own instructions (wgmma, TMA's bulk tensor copies, setmaxnreg): code built for it runs on compute capability 9.0 only, the H100 and H200, and not on later GPUs; the a marks features specific to that architecture. The ladder's other rungs are built for sm_90."},
	{ID: "warpgroup", Forms: []string{"warpgroup", "warpgroups"}, Lesson: "hopper",
		Meaning: "Four consecutive warps of a block, 128 threads, that issue Hopper's wgmma together: warps 0–3 are the first warpgroup, 4–7 the second."},
	{ID: "wgmma", Forms: []string{"wgmma"}, Lesson: "hopper", Code: true,
		Meaning: "Hopper's warpgroup product (wgmma.mma_async): a warpgroup multiplies a 64×16 tile by a 16×N one (N up to 256) into a 64×N float32 accumulator held in its registers, with B, and A if it is not in registers, read by the tensor cores from shared memory through a descriptor. It runs asynchronously until the warps wait for it."},
	{ID: "sass", Forms: []string{"SASS"}, Lesson: "hopper",
		Meaning: "The GPU's own machine code, into which ptxas compiles a kernel's PTX (cuobjdump -sass lists it). Its names are not PTX's: mma.sync becomes HMMA, ldmatrix LDSM, cp.async LDGSTS, Hopper's wgmma HGMMA and a TMA copy (cp.async.bulk.tensor) UTMALDG."},
	{ID: "nsight-compute", Forms: []string{"Nsight Compute"}, Lesson: "hopper",
		Meaning: "NVIDIA's kernel profiler (ncu): it runs a kernel under the SM's hardware counters and reports how busy each pipe was, how often instructions issued, how many bytes moved and much else. It locks the clocks at their base rate, so its durations are not the ladder's timings."},
	{ID: "tensor-pipe", Forms: []string{"tensor pipe"}, Lesson: "hopper",
		Meaning: "An SM's tensor cores as Nsight Compute counts them, as one unit: busy 50% means they worked on some instruction in half of the SM's active cycles, at whatever rate. Busy is not full speed: mma.sync keeps the pipe busy for more cycles than wgmma takes for the same work."},
	{ID: "tma", Forms: []string{"TMA", "Tensor Memory Accelerator"}, Lesson: "hopper",
		Meaning: "Hopper's tensor memory accelerator: a copy unit that is part of each SM and moves a whole box of a tensor between device memory and shared memory on one thread's single instruction, computing every address itself, swizzling on the way in and filling what lies past the tensor's edge with zeros."},
	{ID: "tensor-map", Forms: []string{"tensor map", "tensor maps"}, Lesson: "hopper",
		Meaning: "The 128 bytes that describe a tensor to the TMA engine: its address, the size and stride of each dimension, the box one copy moves, the element type, the swizzle and the fill for out-of-bounds elements. The host encodes it (cuTensorMapEncodeTiled) and passes it to the kernel as a parameter."},
	{ID: "mbarrier", Forms: []string{"mbarrier", "mbarriers"}, Lesson: "hopper",
		Meaning: "A barrier object of 64 bits in shared memory that counts arrivals of threads and bytes of asynchronous copies; a phase completes when both counts are met, and the next phase starts at once. A waiter names the phase it waits for by its parity."},
	{ID: "expect-tx", Forms: []string{"expect_tx"}, Lesson: "hopper", Code: true,
		Meaning: "The part of an mbarrier arrival (mbarrier.arrive.expect_tx) that tells the barrier how many bytes the copies of this phase will count off it: the phase cannot complete until they all have landed."},
	{ID: "phase-parity", Forms: []string{"phase parity", "parity"}, Lesson: "hopper",
		Meaning: "The lowest bit of an mbarrier's phase number, which is all a waiter names (mbarrier.try_wait.parity): the k-th use of a barrier, from 0, is phase k, parity k mod 2."},
	{ID: "warp-specialisation", Forms: []string{"warp specialisation", "warp-specialised"}, Lesson: "hopper",
		Meaning: "Giving the warpgroups of a block different jobs: a producer warpgroup that only issues copies, consumer warpgroups that only compute, handing buffers to each other through full and empty barriers instead of meeting at __syncthreads."},
	{ID: "setmaxnreg", Forms: []string{"setmaxnreg"}, Lesson: "hopper", Code: true,
		Meaning: "A Hopper instruction by which a running warpgroup gives registers back to the SM (setmaxnreg.dec) or takes more (setmaxnreg.inc), to a count from 24 to 256 a thread in steps of 8: a producer that needs few hands them to consumers that need many."},
	{ID: "ping-pong", Forms: []string{"ping-pong"}, Lesson: "hopper",
		Meaning: "Two consumer warpgroups taking turns on the tensor cores, passed between them by named barriers, so that one's softmax runs while the other's product does."},
	{ID: "recompute", Forms: []string{"recomputes", "recompute", "recomputed", "recomputation"}, Lesson: "backward",
		Meaning: "To compute again what was computed once already instead of storing it: FlashAttention's backward recomputes S and P tile by tile from Q, K and the forward's log-sum-exp L, rather than reading back an N×N P the forward never wrote."},
	{ID: "row-term-d", Forms: []string{"D"}, Lesson: "backward",
		Meaning: "In the backward pass, one number per row: D_i = rowsum(dO_i ∘ O_i), the dot product of the row's output gradient with its output. It equals the row's sum of P ∘ dP over every key, so dS = P ∘ (dP − D) needs no whole row of P."},
	{ID: "ds", Forms: []string{"dS"}, Lesson: "backward",
		Meaning: "The gradient of the loss with respect to the scores S: dS = P ∘ (dP − D), element by element. Multiplied by K it gives dQ, and transposed, by Q, dK (both times 1/√d)."},
	{ID: "atomic-add", Forms: []string{"atomic add", "atomic adds", "atomically"}, Lesson: "backward",
		Meaning: "An add into device memory that the hardware performs as one indivisible read, add and write (CUDA's atomicAdd), so that blocks adding into the same number at once lose none of the parts. The order in which the parts land is the GPU's, and since float addition is not associative the sum may differ in its last bits from run to run."},
	{ID: "prefill", Forms: []string{"prefill"}, Lesson: "inference",
		Meaning: "A prompt's first pass through a model: all N of its queries against its N keys at once, the square runs of the earlier lessons. It is compute-bound, and it fills the KV cache."},
	{ID: "decoding", Forms: []string{"decoding"}, Lesson: "inference",
		Meaning: "Generating text one token at a time: each step runs the new token's one query (nq = 1) against the keys and values of every token before it, read from the KV cache. It is memory-bound."},
	{ID: "kv-cache", Forms: []string{"KV cache", "KV caches"}, Lesson: "inference",
		Meaning: "The K and V rows of every token a sequence has seen, kept in device memory by every layer so that a new token computes only its own: 2 · layers · K/V heads · tokens · d numbers a sequence."},
	{ID: "grouped-query-attention", Forms: []string{"grouped-query attention", "grouped heads"}, Lesson: "inference",
		Meaning: "Several query heads share one head of K and V, Hq/Hkv of them a group: the KV cache, and the bytes each decoding step reads, are Hq/Hkv times smaller."},
	{ID: "wave", Forms: []string{"wave"}, Lesson: "inference",
		Meaning: "As many blocks as the GPU runs at once: its SMs times the blocks each holds (132 × 2 for decode_split's block on an H100 or H200). A grid of more blocks runs in several waves."},
	{ID: "split-kv", Forms: []string{"split-KV"}, Lesson: "inference",
		Meaning: "Cutting a query's keys into splits, a block each, so that a decoding step with few heads still fills the GPU (flash-decoding). Each split ends with its own O_s and LSE_s; a merge weighs them by w_s = exp(LSE_s − LSE)."},
}

// GlossaryTerm finds a term by its id.
func GlossaryTerm(id string) (Term, bool) {
	for _, t := range Glossary {
		if t.ID == id {
			return t, true
		}
	}
	return Term{}, false
}

// reWordChar is what may not touch a term's form on either side for it to
// be that word (q-tile in "q-tiles" is the plural's, not a match).
var reTags = regexp.MustCompile(`(?s)<(code|pre|a|h[1-6]|span class="math[^"]*"|div class="math[^"]*")[^>]*>.*?</(code|pre|a|h[1-6]|span|div)>|<[^>]+>`)

// linkTerms links the first mention of each glossary term in a lesson's
// prose to its entry: text inside code, math, links, headings and tags is
// left alone, but for a code span that names a term of the code (Code).
// seen carries the terms already linked on the page.
func linkTerms(html string, seen map[string]bool) string {
	var out strings.Builder
	last := 0
	for _, loc := range reTags.FindAllStringIndex(html, -1) {
		out.WriteString(linkText(html[last:loc[0]], seen))
		out.WriteString(linkCode(html[loc[0]:loc[1]], seen))
		last = loc[1]
	}
	out.WriteString(linkText(html[last:], seen))
	return out.String()
}

// linkCode links an inline code span that is exactly a form of a term of
// the code not yet linked; anything else it returns as it is.
func linkCode(tag string, seen map[string]bool) string {
	inner, ok := strings.CutPrefix(tag, "<code>")
	if !ok {
		return tag
	}
	inner, ok = strings.CutSuffix(inner, "</code>")
	if !ok {
		return tag
	}
	for _, t := range Glossary {
		if t.Code && !seen[t.ID] && slices.Contains(t.Forms, inner) {
			seen[t.ID] = true
			return `<a class="term" href="/glossary#` + t.ID + `" title="` + htmlAttr(t.Meaning) + `">` + tag + `</a>`
		}
	}
	return tag
}

// linkText links first mentions in plain text (HTML text, no tags).
func linkText(text string, seen map[string]bool) string {
	for _, t := range Glossary {
		if seen[t.ID] {
			continue
		}
		for _, form := range t.Forms {
			at := wordIndex(text, form)
			// A line break in the Markdown is a space in the sentence.
			after := func(n string) bool { return strings.HasPrefix(strings.ReplaceAll(text[at+len(form):], "\n", " "), n) }
			if at < 0 || slices.ContainsFunc(t.Not, after) {
				continue
			}
			seen[t.ID] = true
			link := `<a class="term" href="/glossary#` + t.ID + `" title="` + htmlAttr(t.Meaning) + `">` + text[at:at+len(form)] + `</a>`
			// What follows the link is searched for the other terms too.
			return linkText(text[:at], seen) + link + linkText(text[at+len(form):], seen)
		}
	}
	return text
}

// wordIndex finds form in text as a word of its own: no letter, digit or
// hyphen touches it on either side.
func wordIndex(text, form string) int {
	from := 0
	for {
		i := strings.Index(text[from:], form)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(form)
		if (i == 0 || !wordByte(text[i-1])) && (end == len(text) || !wordByte(text[end])) {
			return i
		}
		from = i + 1
	}
}

func wordByte(b byte) bool {
	return b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

func htmlAttr(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;").Replace(s)
}

// ladderMeaning is the glossary's ladder as the registry has it today: its
// Hopper rungs counted and named by their gists, so that a new rung joins
// the sentence by its entry alone.
func ladderMeaning() string {
	var hopper []string
	first, last, fa2 := 0, 0, 0
	for _, r := range kernels.Ladder {
		if !r.Built {
			continue
		}
		if r.Name == "flash2_fast" { // FlashAttention-2 on tensor cores
			fa2 = r.Number
		}
		if r.Arch == kernels.ArchHopper {
			if first == 0 {
				first = r.Number
			}
			last = r.Number
			hopper = append(hopper, r.Gist)
		}
	}
	return fmt.Sprintf("The course's forward kernels in order, each adding one idea: from a thread per row (rung 1) through FlashAttention-2 on tensor cores (rung %d) to %s on Hopper's own instructions (%d to %d: %s). The ladder page times every rung on an H100 beside PyTorch's, and the backward pass beside PyTorch's backward.",
		fa2, countOf(len(hopper), "rung"), first, last, strings.Join(hopper, ", "))
}

// countOf is n things in words for small n ("five rungs").
func countOf(n int, thing string) string {
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	w := fmt.Sprint(n)
	if n < len(words) {
		w = words[n]
	}
	if n != 1 {
		thing += "s"
	}
	return w + " " + thing
}
