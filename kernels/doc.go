// Package kernels owns flashstep's attention kernels: for each variant its
// CUDA source (cuda/<family>/<name>.cu) and its registry entry (<name>.go),
// whose Family gives the Go CPU mirror that follows the kernel's own tile
// order and arithmetic. registry.go lists them; README.md says how to add
// one. The ladder, in order (ladder.go says each rung's idea), from
// cuda/forward:
//
//	1 naive_row.cu   naive_row.go     one thread per query row, float32
//	2 naive.cu       naive.go         S and P through device memory, float32
//	3 flash1.cu      flash1.go        FlashAttention-1's loop order, float32
//	4 flash2.cu      flash2.go        FlashAttention-2's loop order, float32
//	5 flash2_mma.cu  flash2_mma.go    the same loop on tensor cores, bf16
//	6 flash2_fast.cu flash2_fast.go   tuned: swizzle, cp.async, exp2, bf16
//	  naive_mma.cu   naive_mma.go     naive on tensor cores, rung 6's partner
//
// then Hopper's rungs, in cuda/hopper (sm_90a; their PTX is built on the GPU
// machine, scripts/ptx-hopper):
//
//	 7 flash3_wgmma.cu    warpgroup products (wgmma) read from shared memory
//	 8 flash3_tma.cu      tiles copied by the SM's TMA unit, counted in by mbarriers
//	 9 flash3_ws.cu       a producer warpgroup and two consumers (setmaxnreg)
//	10 flash3_pingpong.cu the consumers take turns on the tensor cores (named barriers)
//	11 flash3_overlap.cu  the next tile's S issued with this tile's P·V
//
// each with its .go entry of the same name, one family with rung 6, on the
// headers wgmma.cuh, tma.cuh, hopper_tile.cuh, warpspec.cuh and
// consumer_records.cuh; and past the forward's ladder, the backward pass in
// cuda/backward (backward.go holds what its kernels share):
//
//	flash2_bwd.cu  flash2_bwd.go    FlashAttention-2's backward, float32: a
//	                                block per kv-tile recomputes S and P
//	flash2_bwd_mma.cu flash2_bwd_mma.go  the same loop on tensor cores, bf16
//	naive_bwd.cu   naive_bwd.go     the backward that reads a stored P back
//
// with the pieces they share in cuda/common: instrument.cuh (trace
// writes), trace_abi.h (the record layout, generated) and mma.cuh
// (tensor-core fragments) on the CUDA side; float32.go and bf16.go (the
// arithmetic the mirrors model) on the Go side. The package also owns what a
// run is (Config, its limits and its URL form), the seeded input patterns,
// the float64 forward that tests hold every kernel to (its gradient, which
// only tests need, is kernelstest's), the registry
// describing each variant's trace and the bytes each step moves, and the
// order a trace's steps leave in (Schedule), and what ptxas reported of
// each compiled kernel (Ptxas). The compiled PTX itself is package
// kernels/ptx's, which only what loads or names it imports. How a run is
// launched on a GPU is package launch's; what its bytes cost in device
// memory, package traffic's.
//
// The float32 mirrors round every operation explicitly, float32(a*b) and
// float32(x+y), so that no platform's fused multiply-add changes their
// results, and accumulate in the order the kernels do: dot products over d in
// order, row sums and P·V over the tile's columns in order.
package kernels
