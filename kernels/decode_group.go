package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// Decoding, a block per head of K and V, bf16: decode_group.cu, the first
// rung of inference's ladder (docs/DECODE.md).
//
// A decoding step's queries are few (one new token's, or a handful) and
// its keys many (the cache). One block per (batch, kv-head, q-tile) packs
// the q-tiles of the query heads that share the K/V head (Heads/KVHeads of
// them, Br rows each) into one 16-row mma atom, and walks the cache: each
// K_j and V_j is read once for the whole group, three tiles in flight by
// cp.async. The block's four warps split S's columns and O's, and meet in
// shared memory where the softmax needs whole rows.
//
// Row by row its arithmetic is flash2_fast's: the same mma chunks in the
// same order, the same quad partial sums of l, exp2 with the scale folded
// in. So it joins that family (its mirror and its GPU bound); only its
// traffic differs, a grouped head's K and V being read once.
var decodeGroupRung = &VariantInfo{
	Variant: instrument.VariantDecodeGroup,
	Title:   "Decode, a block per K/V head (bf16)",
	Summary: "Inference's few queries against a long cache: one block per head of K and V walks the cache once for every query head that shares it, their rows packed into one tensor-core atom.",
	DType:   instrument.DTypeBF16,
	Shapes:  Shapes{Queries: true, GroupedHeads: true},
	Decode:  true,
	Loop:    LoopFused,
	Idea:    "Decoding's shape: a few queries against the whole cache, where the tensor cores idle and the cost is reading K and V. One block per head of K and V packs the query heads that share it into one 16-row mma atom, so each K_j and V_j is read once for the group, with three kv-tiles in flight.",
	StepRun: "/step?variant=decode_group&n=256&nq=1&d=64&br=1&bc=64&heads=4&kv_heads=1&pattern=normal&seed=1",
	Colour:  "#c05a00",
	BytesNote: "Each step reads K_j and V_j once for the block's group of query heads (counted on the group's first head) and, at the first kv-tile, the head's Q_i, all bf16; the epilogue writes O_i (bf16) and the LSE. " +
		"A grouped run's other heads read no K or V of their own.",
	GPURate: 4e12, CPURate: 0.4e9, // bytes-bound: about the cache's bytes a second
	// Br is a head's query rows; the group's heads × Br fill at most one
	// 16-row atom (GPULimits). TestInstancesMatchSource checks
	// decode_group.cu agrees.
	Tiles: []Tile{
		{1, 64, 64, 128}, {2, 64, 64, 128}, {4, 64, 64, 128}, {8, 64, 64, 128}, {16, 64, 64, 128},
		{1, 64, 128, 128}, {2, 64, 128, 128}, {4, 64, 128, 128}, {8, 64, 128, 128}, {16, 64, 128, 128},
	},
	Instance: func(t Tile) string { return fmt.Sprintf("DECODE_GROUP_INSTANCE(%d, %d, %d)", t.Br, t.Bc, t.D) },
	Launches: func(c *Config, t Tile) Launches {
		return Launches{Kernels: []Launch{{Name: fmt.Sprintf("decode_group_br%d_bc%d_d%d", t.Br, t.Bc, t.D),
			Grid: [3]int{c.Tr(), c.Batch * c.KVHeadCount(), 1}, Threads: t.Threads, Shared: DecodeGroupSharedBytes(t),
			Args: append(QKVO(), Val(c.N), Val(c.Queries()), Val(c.Heads), Val(c.Group()), ScaleArg(c), CausalArg(c))}}}
	},
	// A block writes the records of every head of its group: a slot per
	// record, as flash1's.
	TraceSlots: recordSlots,
	GPULimits:  decodeGroupLimits,
	Family:     FamilyFlash2Fast,
	Traffic:    decodeTraffic,
	phases:     onePhase,
	records:    flash2Records,
}

// DecodeAtomRows is the rows of decode_group's one mma atom: the group's
// heads × Br must fit it.
const DecodeAtomRows = 16

// DecodeStages is how many kv-tiles decode_group keeps in flight
// (decode::NS).
const DecodeStages = 3

// DecodeGroupSharedBytes is decode_group's dynamic shared memory at t
// (decode::smem_bytes): the atom's Q rows and the stages of K_j and V_j in
// bf16, and the atom's S in float32, rows padded by 8.
func DecodeGroupSharedBytes(t Tile) int {
	return 2*(DecodeAtomRows*t.D+DecodeStages*2*t.Bc*t.D) + 4*DecodeAtomRows*(t.Bc+8)
}

// decodeGroupLimits: the group's q-tiles share one 16-row atom (the split
// and paged rungs' blocks too; the message names the run's rung).
func decodeGroupLimits(c *Config) error {
	if rows := c.Group() * c.Br; rows > DecodeAtomRows {
		return FieldErrors{{Field: FieldBr, Message: fmt.Sprintf("%s packs the q-tiles of a K/V head's %d query heads (heads/kv_heads) into one %d-row tensor-core atom: heads/kv_heads × Br must be at most %d (got %d × %d); lower Br or raise kv_heads",
			c.Variant, c.Group(), DecodeAtomRows, DecodeAtomRows, c.Group(), c.Br)}}
	}
	return nil
}

// decodeTraffic is flash2_fast's traffic, with K_j and V_j counted once
// per group: on the step of the group's first head, which the block reads
// them for; its other heads' steps read only their Q_i.
func decodeTraffic(c *Config, r *instrument.Record) (read, written uint64) {
	read, written = flash2FastTraffic(c, r)
	if r.Kind == instrument.KindFlashStep && c.KVSource(r.BH) != r.BH {
		read -= 2 * uint64(r.ColsValid) * uint64(c.D) * 2
	}
	return read, written
}
