package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Split-KV decoding (flash-decoding), bf16: decode_split.cu, the second rung
// of inference's ladder (docs/DECODE.md).
//
// decode_group gives each (batch, K/V head, q-tile) one block, and a
// decoding step at batch 1 has few of those: 8 blocks for 132 SMs. This
// rung cuts each block's keys into splits, a block each (decode_group's
// walk over the split's kv-tiles alone, from a fresh m, l and O), which
// ends with the split's partial: O_s = O/l and LSE_s = m + log l over its
// keys. A second kernel merges a q-tile's splits, the online softmax's
// rescale across blocks instead of across tiles:
//
//	M     = max_s LSE_s
//	LSE   = M + log Σ_s exp(LSE_s − M)     the whole row's log-sum-exp
//	w_s   = exp(LSE_s − LSE)               split s's share of the row's
//	                                        probability (the w_s sum to 1)
//	O     = Σ_s w_s·O_s                    in split order, one fma each
//
// all float32 (expf, logf, fmaf), one thread per row and column. A split
// whose kv-tiles a causal q-tile never reaches ends with LSE_s = −Inf and
// weighs nothing.
//
// The splits' walks are flash2_fast's arithmetic row for row, as
// decode_group's; the merge is new arithmetic, so the rung founds a family
// whose bound (kernelstest's DecodeSplitStep) holds the walks to
// flash2_fast's and the merge to its own.
var decodeSplitRung = &VariantInfo{
	Variant:   instrument.VariantDecodeSplit,
	Title:     "Decode, split-KV and a merge (bf16)",
	Summary:   "decode_group's walk cut into splits of the cache, a block each, so that a few heads still fill the GPU; a second kernel merges the splits' partials, weighting each by exp(LSE_s − LSE).",
	DType:     instrument.DTypeBF16,
	Shapes:    Shapes{Queries: true, GroupedHeads: true},
	Decode:    true,
	Loop:      LoopFused,
	Idea:      "Split-KV (flash-decoding): cut the cache into splits, a block each, so that batch 1 still fills every SM; each split ends with its partial O and log-sum-exp, and a second kernel merges them, weighting split s by exp(LSE_s − LSE): the online softmax's rescale, across blocks.",
	StepRun:   "/step?variant=decode_split&n=256&nq=1&d=64&br=1&bc=64&heads=4&kv_heads=1&pattern=normal&seed=1",
	Colour:    "#e08a00",
	BytesNote: "Each step reads K_j and V_j once for the block's group of query heads (counted on the group's first head) and, at its split's first kv-tile, the head's Q_i; a split's end writes its partial O and LSE in float32, which the merge reads back before it writes O_i (bf16) and the LSE.",
	GPURate:   4e12, CPURate: 0.4e9,
	Tiles:    decodeGroupRung.Tiles, // the same blocks, each over a split
	Instance: func(t Tile) string { return fmt.Sprintf("DECODE_SPLIT_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D) },
	Launches: func(c *Config, t Tile) Launches {
		return splitLaunches(c, t, "decode_split", "decode_merge", Buf(BufK), Buf(BufV))
	},
	// The split kernel writes a slot per flash step and split end, the
	// merge one per merge record and the epilogue, per (batch-head,
	// q-tile).
	TraceSlots: &TraceSlots{
		Slot: func(c *Config, s StepRef) (int, int) {
			splits, _ := DecodeSplits(c)
			block := s.BH*c.Tr() + s.I
			switch s.Kind {
			case instrument.KindSplitEnd:
				return 0, block*(c.Tc()+splits) + c.Tc() + s.J
			case instrument.KindMerge:
				return 1, block*(splits+1) + s.J
			case instrument.KindEpilogue:
				return 1, block*(splits+1) + splits
			}
			return 0, block*(c.Tc()+splits) + s.J
		},
		Count: func(c *Config, launch int) int {
			splits, _ := DecodeSplits(c)
			if launch == 1 {
				return c.Batch * c.Heads * c.Tr() * (splits + 1)
			}
			return c.Batch * c.Heads * c.Tr() * (c.Tc() + splits)
		},
	},
	GPULimits: decodeSplitLimits,
	Family:    FamilyDecodeSplit,
	phases:    func(*Config) int { return 2 },
	records:   decodeSplitRecords,
}

// splitLaunches are a split-KV rung's two launches at t: its split kernel
// (name_br…_bc…_d…), which takes Q, then the cache's arguments (K and V, or
// a paged cache's pools and table), then its outputs and sizes; and the
// merge (merge_br…_d…).
func splitLaunches(c *Config, t Tile, name, merge string, cache ...Arg) Launches {
	splits, per := DecodeSplits(c)
	rows := int64(c.Batch*c.Heads) * int64(splits) * int64(c.Tr()*c.Br)
	args := append([]Arg{Buf(BufQ)}, cache...)
	args = append(args, Buf(BufSplitO), Buf(BufSplitLSE),
		Val(c.N), Val(c.Queries()), Val(c.Heads), Val(c.Group()), ScaleArg(c), CausalArg(c), Val(per), Val(splits))
	return Launches{
		Kernels: []Launch{
			{Name: fmt.Sprintf("%s_br%d_bc%d_d%d", name, t.Br, t.Bc, t.D), Grid: [3]int{c.Tr(), c.Batch * c.KVHeadCount(), splits},
				Threads: t.Threads, Shared: DecodeGroupSharedBytes(t), Args: args},
			// The merge reads a q-tile's LSE_s into shared memory first:
			// room for the most splits DecodeSplits makes, one wave's.
			{Name: fmt.Sprintf("%s_br%d_d%d", merge, t.Br, t.D), Grid: [3]int{c.Tr(), c.Batch * c.Heads, 1}, Threads: decodeMergeThreads,
				Shared: 4 * DecodeSMs * DecodeBlocksPerSM * t.Br,
				Args:   []Arg{Buf(BufSplitO), Buf(BufSplitLSE), Buf(BufO), Buf(BufLSE), Val(c.Queries()), Val(splits)}},
		},
		Extra: map[Buffer]int64{BufSplitO: rows * int64(c.D) * 4, BufSplitLSE: rows * 4},
	}
}

// decodeMergeThreads is the merge kernel's block: a thread per column of
// O, looping over them where d is larger.
const decodeMergeThreads = 128

// DecodeSMs and DecodeBlocksPerSM are the grid DecodeSplits aims to fill:
// the reference GPUs' 132 SMs (H100 SXM, H200) with two of decode_group's
// blocks each (its shared memory at d = 128 holds two).
const (
	DecodeSMs         = 132
	DecodeBlocksPerSM = 2
)

// DecodeSplits is how decode_split cuts each q-tile's kv-tiles: into
// splits of per kv-tiles each (the last may be shorter), as many splits as
// the grid's one wave of DecodeSMs·DecodeBlocksPerSM blocks holds, and
// never more than the kv-tiles. One wave, not more: 320 blocks where 264
// run at once leave most SMs idle for the second wave's 56 (measured: 0.6
// of the read bandwidth at batch 8 with 5 splits of 64 blocks, run ac). A
// rule of the run's shape alone, so the mirror, the GPU and a recording
// agree without a field: batch 1 with 8 K/V heads and 4096 keys in 64-key
// tiles makes 32 splits of 2 kv-tiles.
func DecodeSplits(c *Config) (splits, per int) {
	blocks := c.Batch * c.KVHeadCount() * c.Tr()
	want := min(c.Tc(), max(1, DecodeSMs*DecodeBlocksPerSM/blocks))
	per = ceilDiv(c.Tc(), want)
	return ceilDiv(c.Tc(), per), per
}

// decodeSplitLimits: decode_group's atom, and a grid whose third dimension
// holds the splits.
func decodeSplitLimits(c *Config) error {
	if err := decodeGroupLimits(c); err != nil {
		return err
	}
	if splits, _ := DecodeSplits(c); splits > MaxGridY {
		return FieldErrors{{Field: FieldN, Message: fmt.Sprintf("%s gives each split a slice of its grid: at most %d splits (got %d)", c.Variant, MaxGridY, splits)}}
	}
	return nil
}

// decodeSplitKVTiles is the kv-tiles split s of q-tile i walks: its own,
// up to the last one the q-tile visits (none past it, under a causal mask).
func decodeSplitKVTiles(c *Config, i, s int) (j0, j1 int) {
	_, per := DecodeSplits(c)
	jEnd := flash2KVTiles(c, i)
	j0 = min(s*per, jEnd)
	return j0, min((s+1)*per, jEnd)
}

// decodeSplitRecords: each split's steps then its end (the split kernel),
// then a merge record a split and the epilogue (the merge kernel).
func decodeSplitRecords(c *Config, i int) []kindCount {
	splits, _ := DecodeSplits(c)
	var out []kindCount
	for s := range splits {
		if j0, j1 := decodeSplitKVTiles(c, i, s); j1 > j0 {
			out = append(out, kindCount{kind: instrument.KindFlashStep, n: j1 - j0, j0: j0})
		}
		out = append(out, kindCount{kind: instrument.KindSplitEnd, n: 1, j0: s, noCols: true})
	}
	return append(out, kindCount{kind: instrument.KindMerge, n: splits, phase: 1, noCols: true},
		kindCount{kind: instrument.KindEpilogue, n: 1, phase: 1})
}

// decodeSplitBlock is q-tile i of batch-head bh: each split walked from a
// fresh state and ended, then the merge.
func decodeSplitBlock(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record)) {
	splits, _ := DecodeSplits(c)
	parts := make([]*instrument.Record, splits)
	for s := range splits {
		w := mirrorArith.walk(c, in, bh, i)
		j0, j1 := decodeSplitKVTiles(c, i, s)
		w.steps(j0, j1, 0, emit)
		parts[s] = w.end(instrument.KindSplitEnd, s)
		emit(0, parts[s])
	}
	for _, r := range DecodeMerge(c, parts, exp32, log32) {
		emit(1, r)
	}
}

// DecodeMerge merges a q-tile's split ends (parts, in split order) as the
// merge kernel does, with exp and log the float32 exponential and
// logarithm (the mirror's; a test swaps in others): a merge record per
// split, then the epilogue.
func DecodeMerge(c *Config, parts []*instrument.Record, exp, log func(float32) float32) []*instrument.Record {
	br, d := c.Br, c.D
	first := parts[0]
	out := make([]*instrument.Record, 0, len(parts)+1)
	lse := make([]float32, br)
	for r := range br {
		mx := negInf
		for _, p := range parts {
			mx = max(mx, p.LSE[r])
		}
		if mx == negInf { // no split saw a key: O = 0, LSE = −Inf
			lse[r] = negInf
			continue
		}
		var sum float32
		for _, p := range parts {
			sum = float32(sum + exp(float32(p.LSE[r]-mx)))
		}
		lse[r] = float32(mx + log(sum))
	}
	o := make([]float32, br*d)
	for s, p := range parts {
		rec := &instrument.Record{Kind: instrument.KindMerge, BH: first.BH, I: first.I, J: s, RowsValid: first.RowsValid,
			LSE: append([]float32(nil), lse...), Alpha: make([]float32, br)}
		for r := range br {
			if lse[r] == negInf {
				continue
			}
			w := exp(float32(p.LSE[r] - lse[r]))
			rec.Alpha[r] = w
			for x := range d {
				o[r*d+x] = fma32(w, p.O[r*d+x], o[r*d+x])
			}
		}
		rec.O = append([]float32(nil), o...)
		rec.BytesRead, rec.BytesWritten = decodeSplitTraffic(c, rec)
		out = append(out, rec)
	}
	epi := &instrument.Record{Kind: instrument.KindEpilogue, BH: first.BH, I: first.I, J: -1, RowsValid: first.RowsValid,
		O: o, LSE: lse}
	epi.BytesRead, epi.BytesWritten = decodeSplitTraffic(c, epi)
	return append(out, epi)
}

// decodeSplitTraffic is decode_group's, with Q read at each split's first
// kv-tile (every split's block loads it), a split's end writing its
// partial (float32 O and LSE) and a merge record reading one back.
func decodeSplitTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	const f32, bf16 = 4, 2
	rows, d := uint64(r.RowsValid), uint64(c.D)
	switch r.Kind {
	case instrument.KindFlashStep:
		read, written = decodeTraffic(c, r)
		if _, per := DecodeSplits(c); r.J > 0 && r.J%per == 0 {
			read += rows * d * bf16
		}
		return read, written
	case instrument.KindSplitEnd:
		return 0, rows*d*f32 + rows*f32
	case instrument.KindMerge:
		return rows*d*f32 + rows*f32, 0
	}
	return decodeTraffic(c, r) // the epilogue: O in bf16 and the LSE
}

// FamilyDecodeSplit: flash2_fast's walk over each split, then the merge of the splits' partials.
var FamilyDecodeSplit = &Family{Name: "decode_split", Traffic: decodeSplitTraffic, block: decodeSplitBlock}
