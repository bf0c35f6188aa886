package lessons

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/kernels"
)

// The asks of the lesson on attention at inference (course/15-inference.md):
// three worked out on the server from the directive's sizes, as the Hopper
// asks are (the bytes of a KV cache, the FLOPs a one-token query does per
// byte of cache it reads, and how many splits decode_split cuts a
// query's keys into, by kernels.DecodeSplits itself), and one read from a
// split-KV run's trace (the merged O of a row in one column). As with every
// ask, the answer is never in the lesson.
//
//	::: checkpoint id=cache ask=kv-cache layers=80 kv_heads=8 d=128 tokens=131072
//	How many bytes does one sequence's cache hold?
//	:::
//
//	::: checkpoint id=merge preset=decode-merge ask=merge bh=1 row=0 col=5 widget=merge-run
//	What does the merge write in column 5?
//	:::

// DecodeQuestion is the sizes a computed decode ask is about.
type DecodeQuestion struct {
	// kv-cache: the model's layers, its heads of K and V, the head
	// dimension, the tokens cached, the sequences of the batch and the
	// bytes of one cached element.
	Layers, KVHeads, D, Tokens, Batch, Bytes int
	// decode-intensity: the query heads (KVHeads and Bytes as above).
	Heads int
	// decode-splits: the keys (the cache's tokens) and the kv-tile's
	// keys; Batch and KVHeads as above.
	N, Bc int
}

// elementBytes are the bytes of one cached element a decode ask takes:
// fp8, bf16 (the default) and float32.
var elementBytes = []int{1, 2, 4}

// onDecode is what the computed decode asks share: no preset (their input
// is the directive's sizes), and their source.
type onDecode struct{}

func (onDecode) ownInput() {}

func (onDecode) source(c *Checkpoint) string {
	if c.Ask == AskDecodeSplits {
		return "decode_split's rule for its splits (kernels.DecodeSplits), worked out on the server from the question's sizes"
	}
	return "attention's arithmetic at inference, worked out on the server from the question's sizes"
}

func (onDecode) noPreset(c *Checkpoint, d *directive) {
	if c.Preset != "" {
		d.failf("ask=%s works on the sizes its attributes give, not on a preset's run", c.Ask)
	}
}

// readElementBytes reads bytes=, one cached element's bytes (2: bf16).
func readElementBytes(d *directive) int {
	b := d.whole("bytes", 2, 1, 4)
	if !slices.Contains(elementBytes, b) {
		d.failf("bytes must be 1 (fp8), 2 (bf16) or 4 (float32), got %d", b)
	}
	return b
}

func elementName(b int) string {
	switch b {
	case 1:
		return "an 8-bit float"
	case 4:
		return "float32"
	}
	return "bf16"
}

// gib writes a count of bytes in GiB (2³⁰) and GB (10⁹).
func gib(n float64) string {
	return fmt.Sprintf("%s GiB (%s GB)", strconv.FormatFloat(n/(1<<30), 'g', 4, 64), strconv.FormatFloat(n/1e9, 'g', 4, 64))
}

// kvCache asks how many bytes a KV cache holds: K and V for every layer,
// K/V head, token and column, for every sequence of the batch. Its
// tolerance is relative (tol, 1%), as every count of bytes the course
// asks for.
type kvCache struct{ onDecode }

func (a kvCache) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	q := &c.Decode
	q.Layers = d.whole("layers", -1, 1, 256)
	q.KVHeads = d.whole("kv_heads", -1, 1, 256)
	q.D = d.whole("d", -1, 1, 512)
	q.Tokens = d.whole("tokens", -1, 1, 1<<21)
	q.Batch = d.whole("batch", 1, 1, 1024)
	q.Bytes = readElementBytes(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
}

// KVCacheBytes is the bytes of a KV cache: K and V (two tensors) for every
// layer, K/V head, token and column, at bytes an element, for every
// sequence of the batch.
func KVCacheBytes(layers, kvHeads, tokens, d, bytes, batch int) int64 {
	return 2 * int64(layers) * int64(kvHeads) * int64(tokens) * int64(d) * int64(bytes) * int64(batch)
}

func (kvCache) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	q := c.Decode
	n := KVCacheBytes(q.Layers, q.KVHeads, q.Tokens, q.D, q.Bytes, q.Batch)
	per := KVCacheBytes(q.Layers, q.KVHeads, q.Tokens, q.D, q.Bytes, 1)
	batch := ""
	if q.Batch > 1 {
		batch = fmt.Sprintf(" for one sequence, and %d sequences keep %d of them: %d bytes, %s", q.Batch, q.Batch, n, gib(float64(n)))
	}
	return grading.Solution{Number: float64(n), Display: strconv.FormatInt(n, 10) + " bytes", Lo: 0, Hi: math.Inf(1),
		Why: "a count of bytes is not negative",
		Explain: fmt.Sprintf("Every layer keeps a K and a V row for every token it has seen, for each of its %d K/V heads, d = %d numbers each, in %s (%d bytes): 2 · %d layers · %d K/V heads · %d tokens · %d · %d bytes = %d bytes, %s%s. The query heads add nothing: they share the K/V heads' rows.",
			q.KVHeads, q.D, elementName(q.Bytes), q.Bytes, q.Layers, q.KVHeads, q.Tokens, q.D, q.Bytes, per, gib(float64(per)), batch)}, nil
}

// pose's hint says what the count is made of, never the count. It has no
// digits: any of them could be the answer's.
func (kvCache) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Bytes, func(float64) string {
		h := "Not quite. The cache keeps two tensors, K and V, in every layer: for each K/V head (not each query head), each cached token and each of the d columns, one number of the element's bytes. Multiply them all"
		if c.Decode.Batch > 1 {
			h += ", and by the sequences of the batch, each of which keeps its own"
		}
		return h + ". Answer in bytes, not GB or GiB."
	})
}

// decodeIntensity asks how many FLOPs a one-token query does per byte of
// the KV cache it reads: 4·Hq·N·d FLOPs (Q·Kᵀ and P·V for each query
// head) over 2·Hkv·N·d elements of K and V. Its tolerance is relative
// (tol, 1%): a ratio.
type decodeIntensity struct{ onDecode }

func (a decodeIntensity) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	q := &c.Decode
	q.Heads = d.whole("heads", -1, 1, 256)
	q.KVHeads = d.whole("kv_heads", -1, 1, 256)
	if q.KVHeads > q.Heads || q.Heads%max(q.KVHeads, 1) != 0 {
		d.failf("kv_heads must divide heads: each K/V head serves a whole group of query heads (got %d over %d)", q.Heads, q.KVHeads)
	}
	q.Bytes = readElementBytes(d)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
}

// DecodeIntensity is the FLOPs a one-token query of heads query heads does
// per byte of the K and V it reads, kvHeads heads of them at bytes an
// element: 4·Hq·N·d / (2·Hkv·N·d·bytes).
func DecodeIntensity(heads, kvHeads, bytes int) float64 {
	return 4 * float64(heads) / (2 * float64(kvHeads) * float64(bytes))
}

func (decodeIntensity) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	q := c.Decode
	x := DecodeIntensity(q.Heads, q.KVHeads, q.Bytes)
	ridge := TensorPeakFLOPs / HBMBytesPerSec
	s := grading.Solution{Number: x, Lo: 0, Hi: math.Inf(1), Why: "FLOPs and bytes are not negative"}
	s.Display = c.shown(x)
	s.Explain = fmt.Sprintf("For one layer and one new token against N cached keys: each of the %d query heads takes a dot product of d columns with every key (2·N·d FLOPs, a multiply and an add a column) and adds every value row weighted by its p (2·N·d more), 4·%d·N·d FLOPs in all. The bytes that must come from device memory are the cache's: K and V of the %d K/V heads, 2·%d·N·d numbers of %d bytes (%s). N and d cancel: 4·%d / (2·%d·%d) = %s FLOPs a byte, against the H100's ridge point of %.0f (lesson 11): %.0f times below it. The query and the output, %d·d numbers each, are too few to count.",
		q.Heads, q.Heads, q.KVHeads, q.KVHeads, q.Bytes, elementName(q.Bytes), q.Heads, q.KVHeads, q.Bytes, s.Display, ridge, ridge/x, q.Heads)
	return s, nil
}

// pose's hint is how to count both sides, with no digits.
func (decodeIntensity) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Plain, func(float64) string {
		return "Not quite. Count one layer and one new token against N cached keys. FLOPs: every query head scores every key (a multiply and an add for each of the d columns) and adds every value row weighted by its p (as many again). Bytes: only the cache's, K and V of every K/V head, each key's and value's d numbers at the element's bytes; the query heads of a group share them. Divide: N and d cancel."
	})
}

// decodeSplits asks how many splits decode_split cuts each (batch, K/V
// head)'s keys into for a one-token query, by the rung's own rule
// (kernels.DecodeSplits): a whole number, exactly.
type decodeSplits struct{ onDecode }

func (a decodeSplits) parse(c *Checkpoint, d *directive) {
	a.noPreset(c, d)
	q := &c.Decode
	q.Batch = d.whole("batch", 1, 1, 1024)
	q.KVHeads = d.whole("kv_heads", -1, 1, 256)
	q.N = d.whole("n", -1, 1, 1<<21)
	q.Bc = d.whole("bc", 64, 1, 1024)
	c.Format = grading.FormatNumber
}

// splitsConfig is the run decodeSplits asks about: one query row of one
// query head per K/V head (the grouping changes no block count), in
// kv-tiles of Bc keys.
func (q DecodeQuestion) splitsConfig() kernels.Config {
	return kernels.Config{Variant: instrument.VariantDecodeSplit, N: q.N, Nq: 1, Br: 1, Bc: q.Bc, D: 128,
		Batch: q.Batch, Heads: q.KVHeads, KVHeads: q.KVHeads}
}

func (decodeSplits) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) {
	q := c.Decode
	cfg := q.splitsConfig()
	splits, per := kernels.DecodeSplits(&cfg)
	tc, blocks := cfg.Tc(), q.Batch*q.KVHeads
	wave := kernels.DecodeSMs * kernels.DecodeBlocksPerSM
	want := min(tc, max(1, wave/blocks))
	last := tc - (splits-1)*per
	tail := ""
	if last < per {
		tail = fmt.Sprintf(", the last of them %d", last)
	}
	return grading.Solution{Number: float64(splits), Display: strconv.Itoa(splits), Lo: 1, Hi: math.Inf(1),
		Why: "every (batch, K/V head) has at least one split",
		Explain: fmt.Sprintf("%d keys make %d kv-tiles of %d. Without splits the grid has one block per (sequence, K/V head): %d · %d = %d. One wave is %d SMs with %d blocks each, %d blocks: room for ⌊%d / %d⌋ = %d splits of each, capped at the %d kv-tiles: %d. Each split then takes ⌈%d / %d⌉ = %d kv-tiles, and %d kv-tiles in runs of %d make ⌈%d / %d⌉ = %d splits%s, %d blocks in all.",
			q.N, tc, q.Bc, q.Batch, q.KVHeads, blocks, kernels.DecodeSMs, kernels.DecodeBlocksPerSM, wave, wave, blocks, wave/blocks, tc, want,
			tc, want, per, tc, per, tc, per, splits, tail, splits*blocks)}, nil
}

// pose's hint is the rule, with no digits but the hardware's.
func (decodeSplits) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Whole(), grading.Plain, func(float64) string {
		return "Not quite. decode_split fills one wave: every SM holding as many blocks as fit it, shared among the blocks the grid has without splits (one per sequence and K/V head), rounded down, and never more splits than kv-tiles. Then it hands each split the kv-tiles divided by that, rounded up, and counts the splits those runs of kv-tiles make, rounding up again."
	})
}

// mergedO asks for a row's merged O in one column of a split-KV run: each
// split's partial O_s (divided by its own l) weighed by w_s = exp(LSE_s −
// LSE), LSE the log of Σ_s exp(LSE_s), as the merge kernel writes it. Its
// tolerance is grading.SmallValue (±tol, 0.01, and at most 2% of the
// value): O is an average of the values and may be small.
type mergedO struct{}

// splitVariant says whether a run's trace holds split-KV records: split
// ends, a merge record per split, then the epilogue.
func splitVariant(c *kernels.Config) bool {
	return slices.ContainsFunc(kernels.Schedule(c), func(s kernels.StepRef) bool { return s.Kind == instrument.KindSplitEnd })
}

func (mergedO) parse(c *Checkpoint, d *directive) {
	c.needFullTrace(d)
	if !splitVariant(&c.Run) {
		d.failf("ask=merge reads a split-KV run's split ends and merge (decode_split); preset %q runs %s", c.Preset, c.Run.Variant)
	}
	c.readBH(d)
	c.Row = d.whole("row", -1, 0, c.Run.Queries()-1)
	c.Col = d.whole("col", -1, 0, c.Run.D-1)
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.01)
	c.Rel = d.rel()
	c.needTracedRow(d)
}

// splitMerge is what a row's merge reads and writes, from the trace.
type splitMerge struct {
	lse, o []float32 // each split's LSE_s and O_s in the column, by split
	w      []float32 // the merge's weight of each split
	rowLSE float32   // the row's LSE, as the merge wrote it
	merged float32   // O in the column after the last split's merge
	step   int       // the last merge record's step, from 1
}

func (c *Checkpoint) splitMerge(t *Trace) (splitMerge, error) {
	h := t.H
	i, row := c.Row/h.Br, c.Row%h.Br
	e := row*h.D + c.Col
	var m splitMerge
	for k, r := range t.Steps {
		if r.BH != c.BH || r.I != i {
			continue
		}
		switch r.Kind {
		case instrument.KindSplitEnd:
			if r.J != len(m.lse) {
				return m, fmt.Errorf("checkpoint %s: split %d's end comes where split %d's was due", c.ID, r.J, len(m.lse))
			}
			m.lse, m.o = append(m.lse, r.LSE[row]), append(m.o, r.O[e])
		case instrument.KindMerge:
			m.w = append(m.w, r.Alpha[row])
			m.rowLSE, m.merged, m.step = r.LSE[row], r.O[e], k+1
		}
	}
	if len(m.lse) == 0 || len(m.w) != len(m.lse) {
		return m, fmt.Errorf("checkpoint %s: %d split ends and %d merge records of q-tile %d of batch-head %d: %w", c.ID, len(m.lse), len(m.w), i, c.BH, errNotInTrace)
	}
	return m, nil
}

// g6 writes a float32 to six significant digits, as the stepper's rows
// table and the lesson's figures do.
func g6(x float32) string { return strconv.FormatFloat(float64(x), 'g', 6, 32) }

func (mergedO) solve(c *Checkpoint, t *Trace) (grading.Solution, error) {
	m, err := c.splitMerge(t)
	if err != nil {
		return grading.Solution{}, err
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	var parts, weights, sum []string
	for s, l := range m.lse {
		parts = append(parts, fmt.Sprintf("split %d ended with LSE_%d = %s and O_%d = %s", s, s, g6(l), s, g6(m.o[s])))
		if math.IsInf(float64(l), -1) {
			parts[s] += " (it saw no key: it weighs nothing)"
			continue
		}
		lo, hi = min(lo, float64(m.o[s])), max(hi, float64(m.o[s]))
		weights = append(weights, fmt.Sprintf("w_%d = exp(%s − %s) = %s", s, g6(l), g6(m.rowLSE), g6(m.w[s])))
		o := g6(m.o[s])
		if m.o[s] < 0 {
			o = "(" + o + ")"
		}
		sum = append(sum, fmt.Sprintf("%s · %s", g6(m.w[s]), o))
	}
	x := float64(m.merged)
	s := grading.Solution{Number: x, Step: m.step, Lo: lo, Hi: hi,
		Why: "the merged O is an average of the splits' O_s in this column, weighted by w_s that are positive and add up to one, so it lies between the smallest and the largest of them"}
	if math.IsInf(lo, 0) { // no split saw a key: O = 0
		s.Lo, s.Hi = 0, 0
	}
	s.Display = c.shown(x)
	s.Explain = fmt.Sprintf("Row %d, column %d: %s. The row's whole log-sum-exp is LSE = log Σ_s exp(LSE_s) = %s (the kernel subtracts the largest LSE_s before exp and adds it back after the log). Each split's weight is %s, and they add up to one. O = Σ_s w_s · O_s = %s = %s, what the merge wrote at step %d. Each O_s was already divided by its own l; the weights put the splits back on the whole row's sum, as α = exp(m_old − m_new) puts a sum made under an older max on the new one.",
		c.Row, c.Col, strings.Join(parts, "; "), g6(m.rowLSE), strings.Join(weights, ", "), strings.Join(sum, " + "), s.Display, m.step)
	return s, nil
}

// pose's hint is the merge's rule, with no number but the column's.
func (mergedO) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, c.smallValue(), grading.Plain, func(float64) string {
		return fmt.Sprintf("Not quite. First the row's whole log-sum-exp: LSE = log Σ_s exp(LSE_s), the log of the sum of the splits' sums (subtract the largest LSE_s before exp, as the safe softmax does, and add it back after the log). Then each split's weight w_s = exp(LSE_s − LSE), and O = Σ_s w_s · O_s in column %d. Each O_s is already divided by its own l: do not divide again, and do not average the splits evenly; the weights add up to one.", c.Col)
	})
}
