// Package lessons owns the course: the lesson texts (Markdown with math, one
// file per lesson under course/, embedded in the binary), the widgets their
// directives place, the named runs (presets) those widgets step through, and
// the checkpoints a student answers, graded against a run's trace.
//
// A preset is a run's URL query, so a lesson, a link and the stepper's own
// form name runs the same way. This package never runs a kernel: the server
// obtains a checkpoint's trace from its engines and hands it to Solve. The
// one exception is a figure of a split-KV run's split ends
// (figures_decode.go), read from the CPU mirror for a run only the mirror
// takes, so that it is the trace every engine steps.
package lessons

import (
	"fmt"
	"net/url"
	"sort"

	"flashstep/kernels"
)

// Preset is a ready-made run to step through.
type Preset struct {
	Title   string
	Summary string
	Query   string // kernels.Config in URL form
}

// Run parses the preset's run.
func (p Preset) Run() (kernels.Run, error) {
	v, err := url.ParseQuery(p.Query)
	if err != nil {
		return kernels.Run{}, fmt.Errorf("preset %q: %w", p.Title, err)
	}
	return kernels.ParseRun(v)
}

// Config is the configuration of the preset's run.
func (p Preset) Config() (kernels.Config, error) {
	r, err := p.Run()
	return r.Config(), err
}

// Runs are the presets lesson directives name (preset=toy). Runs that the
// GPU's compiled kernels can run carry the names they have in
// recordings/list.txt, and a test holds every such run to having a
// recording, so a class without a GPU still sees an H100's numbers; a run of
// a shape the GPU does not run comes from the CPU mirror everywhere.
var Runs = map[string]Preset{
	"toy":                    {"Toy run", "N=8, d=4, 2×2 tiles: every number fits on a projector.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
	"peaked":                 {"Peaked rows", "Each query has one dominant key: softmax is almost a lookup.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=peaked&seed=2"},
	"large-logits":           {"Large logits", "Scores in the hundreds: exp would overflow without subtracting the running max.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=large&seed=3"},
	"ragged":                 {"Ragged tiles", "N=11 does not divide into tiles of 4: padding appears.", "variant=flash2&n=11&d=8&br=4&bc=4&pattern=normal&seed=7"},
	"ragged-causal":          {"Ragged and causal", "N=11 in 4×4 tiles, causal: padding, masked and skipped tiles.", "variant=flash2&n=11&d=8&br=4&bc=4&causal=1&pattern=normal&seed=7"},
	"loop-order":             {"One block's loop", "N=16 in 4×4 tiles: follow q-tile 0 across every kv-tile.", "variant=flash2&n=16&d=8&br=4&bc=4&pattern=normal&seed=5"},
	"causal-16":              {"Causal, N=16", "The same run with the causal mask: skipped and half-masked tiles.", "variant=flash2&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	"real-tiles":             {"Real tile sizes", "N=256, d=64, 64×64 tiles, one head: what a real kernel's block does.", "variant=flash2&n=256&d=64&br=64&bc=64&pattern=normal&seed=1"},
	"naive-toy":              {"Naive attention", "The toy run again, with S and P written to device memory.", "variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
	"naive-ragged-causal":    {"Naive, ragged and causal", "Naive computes every tile, masked or not.", "variant=naive&n=11&d=8&br=4&bc=4&causal=1&pattern=normal&seed=7"},
	"fast-real-tiles":        {"Tensor cores, real tiles", "The bf16 tensor-core kernel (flash2_fast): N=256, d=64, 128×128 tiles, one head.", "variant=flash2_fast&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"fast-real-tiles-causal": {"Tensor cores, causal", "The same tensor-core run with the causal mask: the tile above the diagonal is never visited.", "variant=flash2_fast&n=256&d=64&br=128&bc=128&causal=1&pattern=normal&seed=1"},
	"wgmma-real-tiles":       {"wgmma, real tiles", "Rung 7 (flash3_wgmma): rung 6's loop with its products issued by a warpgroup with wgmma. N=256, d=64, 128×128 tiles, one head.", "variant=flash3_wgmma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"tma-real-tiles":         {"TMA, real tiles", "Rung 8 (flash3_tma): tiles copied by the TMA engine, counted in by mbarriers. N=256, d=64, 128×128 tiles, one head.", "variant=flash3_tma&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"ws-real-tiles":          {"Warp-specialised, real tiles", "Rung 9 (flash3_ws): a producer warpgroup that only copies, two consumers that only compute. N=256, d=64, 128×128 tiles, one head.", "variant=flash3_ws&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"pingpong-real-tiles":    {"Ping-pong, real tiles", "Rung 10 (flash3_pingpong): the two consumers take turns on the tensor cores. N=256, d=64, 128×128 tiles, one head.", "variant=flash3_pingpong&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"overlap-real-tiles":     {"Two products in flight, real tiles", "Rung 11 (flash3_overlap): each consumer issues the next tile's S with this tile's P·V and runs its softmax between the two waits. N=256, d=64, 128×128 tiles, one head.", "variant=flash3_overlap&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	"naive-row-toy":          {"One thread per row", "The ladder's first rung (naive_row) on the toy run: two passes over the keys, the max, then exp and the sums.", "variant=naive_row&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
	"naive-row-causal-16":    {"One thread per row, causal", "The ladder's first rung (naive_row) on the causal N=16 run: two passes over the keys, the max, then exp and the sums.", "variant=naive_row&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	"flash1-causal-16":       {"FlashAttention-1's loop order", "The causal N=16 run in FlashAttention-1's order (flash1): kv-tiles outside, O, m and l back to device memory at every step.", "variant=flash1&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	"bwd-16":                 {"The backward pass", "flash2_bwd on the inputs of lesson 5's run, N=16, d=8, 4×4 tiles: each kv-tile's block walks the q-tiles, recomputing S and P from the forward's L.", "variant=flash2_bwd&n=16&d=8&br=4&bc=4&pattern=normal&seed=5"},
	"bwd-causal-16":          {"The causal backward", "The same backward under the causal mask: each kv-tile's block starts at the first q-tile that sees its keys.", "variant=flash2_bwd&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	"timeline-2048":          {"A whole grid on an H100", "Every block of a causal run, N=2048 with 16 heads: which SM ran which tile, when.", "variant=flash2&n=2048&d=64&br=64&bc=64&batch=2&heads=8&causal=1&pattern=normal&seed=1&mode=timing"},
	"ws-roles":               {"Rung 9's warp roles on an H100", "flash3_ws in roles mode, N=1024, d=64, 128×128 tiles, 16 heads, recorded on an H100: each block's producer copies and each consumer's waits, products and softmax, stamped by the kernel as it ran (the stamps slow it; lesson 12 says by how much).", "variant=flash3_ws&n=1024&d=64&br=128&bc=128&batch=1&heads=16&pattern=normal&seed=1&mode=roles"},
	"pingpong-roles":         {"Rung 10's warp roles on an H100", "flash3_pingpong in roles mode, the same run as ws-roles: the two consumers take turns issuing their products, and each turn waited for is stamped beside the copies, products and softmax (the stamps slow the kernel; lesson 12 says by how much).", "variant=flash3_pingpong&n=1024&d=64&br=128&bc=128&batch=1&heads=16&pattern=normal&seed=1&mode=roles"},
	"decode-group":           {"One new token, a block per K/V head", "decode_group on one query row a head (nq=1) against a cache of N=256 keys, 4 query heads sharing 1 head of K and V, d=64, 64-key tiles, recorded on an H100.", "variant=decode_group&n=256&nq=1&d=64&br=1&bc=64&heads=4&kv_heads=1&pattern=normal&seed=1"},
	"decode-split":           {"One new token, split four ways", "decode_split on the same run, recorded on an H100: each of the 4 kv-tiles a split of its own, walked from a fresh m, l and O, ended with its O_s and LSE_s, then merged.", "variant=decode_split&n=256&nq=1&d=64&br=1&bc=64&heads=4&kv_heads=1&pattern=normal&seed=1"},
	"decode-merge":           {"Two splits and their merge", "decode_split with N=128 keys, so two splits of one kv-tile each, 4 query heads over 1 K/V head, d=32: each head's two partials and the merge that weighs them. The CPU mirror (the GPU's decode tiles are d=64 and 128), so that a lesson may quote its numbers.", "variant=decode_split&n=128&nq=1&d=32&br=1&bc=64&heads=4&kv_heads=1&pattern=normal&seed=8"},
	"decode-paged":           {"One new token from a paged cache", "decode_paged on two sequences of N=512 keys (batch 2), 4 query heads over 1 K/V head, d=64, recorded on an H200: each kv-tile read from the page its sequence's block table names, in a pool of 16.", "variant=decode_paged&n=512&nq=1&d=64&br=1&bc=64&batch=2&heads=4&kv_heads=1&pattern=normal&seed=1"},
	"decode-chunk-causal":    {"A chunk of new tokens, causal", "decode_group with 48 new query rows against N=128 keys (positions 80 to 127), causal aligned to the end, 2 query heads over 1 K/V head, d=16, 8×16 tiles. The CPU mirror.", "variant=decode_group&n=128&nq=48&d=16&br=8&bc=16&heads=2&kv_heads=1&causal=1&pattern=normal&seed=1"},
}

// RunNames lists the presets' names in order.
func RunNames() []string {
	names := make([]string, 0, len(Runs))
	for n := range Runs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Starters are the runs the home page offers first.
var Starters = []Preset{Runs["toy"], Runs["ragged-causal"], Runs["large-logits"], Runs["naive-toy"], Runs["real-tiles"], Runs["timeline-2048"]}

// Link is a page of the app a lesson or the home page points to.
type Link struct {
	Title   string
	Summary string
	Href    string
}

// Pages are the app's views beyond the stepper.
var Pages = []Link{
	{"Naive against flash, step by step", "Both kernels on the same inputs, with their memory traffic.", "/compare?n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	{"Naive against flash on tensor cores", "The bf16 pair, recorded on an H100: naive_mma against flash2_fast at 128×128 tiles.", "/compare?pair=bf16&n=256&d=64&br=128&bc=128&pattern=normal&seed=1"},
	{"Naive against flash, timed", "Both kernels across N on an H100: where naive runs out of memory.", "/sweep"},
}
