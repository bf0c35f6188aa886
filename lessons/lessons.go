// Package lessons owns the course: the outline of lessons and the presets of
// the live steppers they embed. A preset is a run's URL query, so a lesson, a
// link and the stepper's own form name runs the same way.
package lessons

// Preset is a ready-made run to step through.
type Preset struct {
	Title   string
	Summary string
	Query   string // kernels.Config in URL form
}

// Lesson is one entry of the course outline. Lessons without text yet still
// list the presets that show their idea.
type Lesson struct {
	Slug    string
	Title   string
	Summary string
	Presets []Preset
}

// Starters are the runs the home page offers first. Every preset here and in
// Course is recorded on a GPU (recordings/list.txt), so a machine without one
// still shows a GPU's numbers; a test holds them to that.
var Starters = []Preset{
	{"Toy run", "N=8, d=4, 2×2 tiles: every number fits on a projector.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
	{"Ragged and causal", "N=11 in 4×4 tiles, causal: padding, masked and skipped tiles.", "variant=flash2&n=11&d=8&br=4&bc=4&causal=1&pattern=normal&seed=7"},
	{"Large logits", "Scores in the hundreds: exp would overflow without subtracting the running max.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=large&seed=3"},
	{"Naive attention", "The toy run again, with S and P written to device memory.", "variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
	{"Real tile sizes", "N=256, d=64, 64×64 tiles, one head: what a real kernel's block does.", "variant=flash2&n=256&d=64&br=64&bc=64&pattern=normal&seed=1"},
	{"A whole grid on an H100", "Every block of a causal run, N=2048 with 16 heads: which SM ran which tile, when.", "variant=flash2&n=2048&d=64&br=64&bc=64&batch=2&heads=8&causal=1&pattern=normal&seed=1&mode=timing"},
}

// Course is the outline of the guided course, in order.
var Course = []Lesson{
	{"attention", "Attention as soft lookup", "Each query scores every key; softmax turns scores into weights over the values.",
		[]Preset{{"Peaked rows", "Each query has one dominant key: softmax is almost a lookup.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=peaked&seed=2"}}},
	{"memory", "The memory hierarchy and naive attention", "Why writing the N×N scores to device memory is the cost that matters.",
		[]Preset{
			{"Naive, step by step", "S, then softmax, then PV, each through device memory.", "variant=naive&n=8&d=4&br=2&bc=2&pattern=normal&seed=1"},
			{"Naive, ragged and causal", "Naive computes every tile, masked or not.", "variant=naive&n=11&d=8&br=4&bc=4&causal=1&pattern=normal&seed=7"},
		}},
	{"tiling", "Tiling", "Split Q into row tiles and K, V into column tiles that fit on chip.",
		[]Preset{{"Ragged tiles", "N=11 does not divide into tiles of 4: padding appears.", "variant=flash2&n=11&d=8&br=4&bc=4&pattern=normal&seed=7"}}},
	{"online-softmax", "Online softmax", "Keep a running max m and sum l; rescale by exp(m_old − m_new) when the max grows.",
		[]Preset{{"Large logits", "Without the max, exp(300) overflows.", "variant=flash2&n=8&d=4&br=2&bc=2&pattern=large&seed=3"}}},
	{"loop-order", "FlashAttention-1 and -2 loop orders", "FA2 keeps one q-tile's m, l and O on chip and divides once at the end.",
		[]Preset{{"One block's loop", "Follow q-tile 0 across every kv-tile.", "variant=flash2&n=16&d=8&br=4&bc=4&pattern=normal&seed=5"}}},
	{"causal", "Causal masking", "Tiles above the diagonal are skipped, the diagonal tile is masked inside.",
		[]Preset{{"Causal", "Skipped and half-masked tiles.", "variant=flash2&n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"}}},
	{"tensor-cores", "Tensor cores", "bf16 matrix instructions and what they ask of the tile shapes.", nil},
	{"performance", "The performance ladder", "From naive to FlashAttention-2-class speed, measured on a GPU.",
		[]Preset{{"A whole grid on an H100", "The timeline of every block: the causal tail, SMs waiting.", "variant=flash2&n=2048&d=64&br=64&bc=64&batch=2&heads=8&causal=1&pattern=normal&seed=1&mode=timing"}}},
}

// Link is a page of the app a lesson or the home page points to.
type Link struct {
	Title   string
	Summary string
	Href    string
}

// Pages are the app's views beyond the stepper.
var Pages = []Link{
	{"Naive against flash, step by step", "Both kernels on the same inputs, with their memory traffic.", "/compare?n=16&d=8&br=4&bc=4&causal=1&pattern=normal&seed=5"},
	{"Naive against flash, timed", "Both kernels across N on an H100: where naive runs out of memory.", "/sweep"},
}
