package lessons

import (
	"regexp"
	"strings"
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
}

// Glossary is every term, in the order a student meets them.
var Glossary = []Term{
	{"query-key-value", []string{"query", "queries", "keys", "values"}, "attention",
		"Each position of a sequence has a query (what it looks for), a key (what it offers) and a value (what it hands over). Q, K and V are the N×d matrices of them, one row per position."},
	{"head-dimension", []string{"head dimension"}, "attention",
		"d, the length of one head's query, key and value vectors; 64 or 128 in most models."},
	{"softmax", []string{"softmax"}, "attention",
		"Turns a row of scores into weights: exp of each score over the sum of the exps. The weights are positive and add up to 1."},
	{"batch-head", []string{"batch-head", "batch-heads"}, "attention",
		"One (sequence of the batch, head) pair: one independent attention problem. The stepper writes batch 1, head 7 as b1 h7; a run has batch × heads of them."},
	{"hbm", []string{"device memory", "HBM"}, "memory",
		"The GPU's main memory (HBM3 on an H100: 80 GB at about 3.35 TB/s): large, and slow next to the chip's arithmetic."},
	{"shared-memory", []string{"shared memory"}, "memory",
		"Fast memory on each SM (up to 227 KB for one block on an H100), shared by the threads of one block; where a kernel keeps its tiles."},
	{"registers", []string{"registers"}, "memory",
		"Each thread's own fastest storage, 255 of 32 bits at most; where FlashAttention keeps its output accumulator."},
	{"arithmetic-intensity", []string{"arithmetic intensity"}, "memory",
		"FLOPs a kernel does per byte it moves to or from device memory. Below the machine's ratio (about 295 on an H100 in bf16) a kernel is memory-bound; above it, compute-bound."},
	{"memory-bound", []string{"memory-bound"}, "memory",
		"A kernel whose time is set by the bytes it moves, not by its arithmetic: moving fewer bytes would make it faster."},
	{"compute-bound", []string{"compute-bound"}, "memory",
		"A kernel whose time is set by its arithmetic: it waits for the arithmetic units, not for memory."},
	{"trace", []string{"trace"}, "memory",
		"What an instrumented kernel writes as it runs: a record per step with its m, l, O and, at teaching sizes, S and P. The stepper steps through it."},
	{"naive-attention", []string{"naive attention"}, "naive",
		"Attention computed the textbook way: S and P are written whole to device memory, N×N numbers per head, and read back."},
	{"tile", []string{"tile", "tiles"}, "tiling",
		"A block of rows and columns a kernel works on at once: a Br×Bc piece of S, from a q-tile of Q and a kv-tile of K and V."},
	{"q-tile", []string{"q-tile", "q-tiles"}, "tiling",
		"Br consecutive rows of Q (and of the output). FlashAttention-2 gives each q-tile of each batch-head to one block."},
	{"kv-tile", []string{"kv-tile", "kv-tiles"}, "tiling",
		"Bc consecutive rows of K and V. A block walks the kv-tiles in order, one tile step each."},
	{"block", []string{"block", "blocks"}, "tiling",
		"A group of GPU threads that run on one SM and share its shared memory; a kernel's grid is made of blocks."},
	{"ragged-tile", []string{"ragged"}, "tiling",
		"The last tile when the tile size does not divide N: fewer real rows or columns, the rest padding that is never used."},
	{"online-softmax", []string{"online softmax"}, "online-softmax",
		"Softmax computed tile by tile without seeing the whole row first: keep a running max m and a running sum l, and rescale what was summed whenever m grows."},
	{"running-max", []string{"running max", "m_old", "m_new"}, "online-softmax",
		"m, the largest score of a row seen so far. m_old is it before a tile, m_new after."},
	{"running-sum", []string{"running sum"}, "online-softmax",
		"l, the sum of exp(score − m) over the columns seen so far, rescaled whenever m grows; the output is divided by it at the end."},
	{"alpha", []string{"rescale factor", "α"}, "online-softmax",
		"α = exp(m_old − m_new), by which the running sum and output are multiplied when a tile raises the max; 1 when it does not."},
	{"epilogue", []string{"epilogue"}, "online-softmax",
		"The end of a q-tile: the output is divided by l and written to device memory with the log-sum-exp."},
	{"lse", []string{"log-sum-exp", "LSE"}, "online-softmax",
		"LSE = m + log l for a row: the log of the sum of the exps of its scores. The backward pass recomputes P from it."},
	{"overflow", []string{"overflow", "overflows"}, "stability",
		"A number too large for its type becomes inf: exp(89) in float32, exp(12) in float16. Subtracting the max keeps exp's argument at or below 0."},
	{"bf16", []string{"bfloat16", "bf16"}, "stability",
		"A 16-bit float with float32's range and 8 bits of precision; the tensor cores' input type."},
	{"causal-mask", []string{"causal mask", "causal"}, "causal",
		"Query i may only attend to keys up to i: scores above the diagonal are −inf, and a tile entirely above it is skipped."},
	{"sm", []string{"streaming multiprocessor", "SM", "SMs"}, "gpu",
		"One of the GPU's 132 (on an H100) processors, each with its own shared memory and registers, running blocks."},
	{"timeline", []string{"timeline"}, "gpu",
		"A timing trace drawn as one row per SM and time to the right: which block ran where, and when."},
	{"warp", []string{"warp", "warps"}, "registers",
		"32 threads that execute one instruction together; a block is a few warps."},
	{"spill", []string{"spill", "spills", "spilled"}, "registers",
		"Values a thread cannot keep in its registers, moved to local memory (device memory, cached): slow."},
	{"tensor-core", []string{"tensor core", "tensor cores"}, "tensor-cores",
		"Units that multiply small matrices in one instruction (mma.sync: 16×16 by 16×8 in bf16, summed in float32)."},
	{"bank-conflict", []string{"bank conflict", "bank conflicts"}, "tensor-cores",
		"Shared memory has 32 banks; threads that ask one bank for different addresses are served one after another."},
	{"swizzle", []string{"swizzle"}, "tensor-cores",
		"A layout that stores chunk c of row r at c XOR (r mod 8), so that reading a column of chunks touches every bank once."},
	{"roofline", []string{"roofline"}, "roofline",
		"A kernel's two floors: its FLOPs at the peak rate and its bytes at the memory's bandwidth; it can be no faster than the larger."},
	{"cpu-mirror", []string{"CPU mirror"}, "roofline",
		"Go code that follows a kernel's own tile order and float32 arithmetic; it computes the trace where there is no GPU, and the tests hold the GPU's trace to it."},
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
var reTags = regexp.MustCompile(`(?s)<(code|pre|a|h[1-6]|span class="math[^"]*")[^>]*>.*?</(code|pre|a|h[1-6]|span)>|<[^>]+>`)

// linkTerms links the first mention of each glossary term in a lesson's
// prose to its entry: text inside code, math, links, headings and tags is
// left alone. seen carries the terms already linked on the page.
func linkTerms(html string, seen map[string]bool) string {
	var out strings.Builder
	last := 0
	for _, loc := range reTags.FindAllStringIndex(html, -1) {
		out.WriteString(linkText(html[last:loc[0]], seen))
		out.WriteString(html[loc[0]:loc[1]])
		last = loc[1]
	}
	out.WriteString(linkText(html[last:], seen))
	return out.String()
}

// linkText links first mentions in plain text (HTML text, no tags).
func linkText(text string, seen map[string]bool) string {
	for _, t := range Glossary {
		if seen[t.ID] {
			continue
		}
		for _, form := range t.Forms {
			at := wordIndex(text, form)
			if at < 0 {
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
