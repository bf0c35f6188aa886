// Package kernels owns flashstep's attention kernels: for each variant its
// CUDA source and, beside it, the Go CPU mirror that follows the kernel's own
// tile order and float32 arithmetic (flash2.cu beside flash2.go). It also owns
// what a run is (Config, its limits and its URL form), the seeded input
// patterns, the float64 reference that tests hold every kernel to, and the
// registry describing each variant's trace and device-memory traffic.
//
// The mirrors round every float32 operation explicitly, float32(a*b) and
// float32(x+y), so that no platform's fused multiply-add changes their
// results, and accumulate in the order the kernels do: dot products over d in
// order, row sums and P·V over the tile's columns in order.
package kernels
