// Package launch owns how a run of flashstep's compiled kernels is laid out
// on a GPU: the device buffers it needs, its launches in order (each rung
// states its own grid, block, shared memory and arguments in its registry
// entry, kernels.VariantInfo.Launches), the limits a GPU run must meet, and
// where a traced launch writes each block's records in the trace buffer. It
// names no rung. It is pure Go: the GPU worker launches what For returns,
// and the tests check it on any machine.
package launch
