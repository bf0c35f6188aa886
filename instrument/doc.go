// Package instrument owns flashstep's trace format: the one ABI shared by the
// CUDA kernels, the Go CPU mirrors, the server and the browser.
//
// A trace is what an instrumented attention kernel records as it runs: at
// every tile step the running row max m, the running sum l, the rescale factor
// exp(m_old − m_new), the output accumulator O and the score and probability
// tiles S and P, plus the device-memory bytes that step moved.
//
// # Format, version 4
//
// All integers and floats are little-endian; floats are IEEE-754 binary32.
// A trace is one header followed by Header.Records records. Every part starts
// on an 8-byte boundary (the GPU writes 64-bit fields in place), so the header
// and each record are padded with zero bytes to a multiple of 8.
//
// The header is headerWire (96 bytes) followed by LabelBytes of UTF-8 saying
// where the numbers came from ("CPU mirror", a GPU's name and driver, or a
// recording). Version is FormatVersion when written; a decoder reads every
// version from MinFormatVersion on. Version 2 added the backward pass's record
// kinds and nothing else, version 3 the warp roles' records, version 4 the
// header's nq (the run's query rows: the last nq of its n positions) and
// kv_heads (the heads of K and V) where it had padding, version 5
// split-KV's split_end and merge records: an older trace reads as before
// (nq = n, kv_heads = heads), and one holding a kind, a flag or a field of
// a later version is malformed.
//
// A record is recordHeaderWire (56 bytes) followed by the float32 arrays its
// kind lists in Kinds, in that order, each sized from the header's N, nq,
// d, Br and Bc. Matrices are row-major. The kinds are:
//
//	inputs      Q (nq×d), K and V (N×d each) of one batch-head
//	flash_step  one FlashAttention tile step (q-tile i, kv-tile j):
//	            m_old, m_new, alpha, l (Br each), S, P (Br×Bc), O (Br×d)
//	scores      naive phase 1: S tile written to device memory (Br×Bc)
//	softmax     naive phase 2: full-row max m and sum l of a q-tile (Br each)
//	pv          naive phase 3: P tile read back, O accumulator (Br×d)
//	epilogue    end of a q-tile: normalised O (Br×d) and log-sum-exp (Br)
//	timing      no arrays: just the SM and timestamps of a step
//	bwd_pre     backward, a q-tile's preprocessing: dO and O (Br×d) read,
//	            L (Br, the forward's log-sum-exp) read, D = rowsum(dO∘O) (Br)
//	bwd_step    backward, kv-tile j's block at q-tile i: the recomputed S and
//	            P (Br×Bc), dP and dS (Br×Bc), the dV and dK accumulators
//	            after the step (Bc×d) and the step's contribution to dQ (Br×d)
//	bwd_dq      backward, a q-tile's finished dQ (Br×d)
//	bwd_dp      naive backward phase 1: a dP tile written (Br×Bc)
//	bwd_ds      naive backward phase 2: a q-tile's D (Br) from whole rows of
//	            P and dP, and its rows of dS written
//	bwd_kv      naive backward phase 4: kv-tile j's block reads q-tile i's P
//	            and dS tiles back (Br×Bc each): dV and dK so far (Bc×d)
//	split_end   split-KV, split j's end (j is a split, not a kv-tile): its
//	            partial O (Br×d, divided by its own l) and LSE (Br)
//	merge       split-KV, split j added to the merge: the row's LSE (Br),
//	            the split's weight w = exp(LSE_j − LSE) (Br), O so far (Br×d)
//
// m is in natural-log units of the scaled logits S = QKᵀ/√d, so
// LSE = m + log l. Masked scores are −Inf in S and 0 in P.
//
// Ragged tiles: the last q-tile has RowsValid < Br rows of data and the last
// kv-tile ColsValid < Bc columns. Arrays keep their full Br×Bc or Br×d shape;
// rows at or past RowsValid and columns at or past ColsValid are padding that
// the kernel computed on zero-filled loads. They are never data: views hatch
// them and comparisons skip them.
//
// Order: the inputs records of the traced batch-heads first, then the steps in
// kernel order (FlashAttention-2: per batch-head, per q-tile, kv-tiles in
// order, then that q-tile's epilogue; naive: each phase over the whole grid;
// the backward: every q-tile's bwd_pre, then each kv-tile's block walking
// the q-tiles, then every q-tile's bwd_dq). A backward trace's traced
// q-tiles are the rows whose steps it records, in every kv-tile's block.
//
// # One source of truth
//
// The wire structs and the Kinds table below are the definition. The CUDA
// header kernels/cuda/common/trace_abi.h and the browser's static/js/trace_abi.js are
// generated from them (go test ./instrument -run TestGeneratedABI -update) and
// a test fails when either is stale.
package instrument
