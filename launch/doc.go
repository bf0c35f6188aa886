// Package launch owns how flashstep's compiled kernels run on a GPU: which
// instantiations each .cu file compiles (tiles, head dim, threads), the
// device buffers a run needs, each launch's grid, block, shared memory and
// arguments in order, and where a traced launch writes each block's records
// in the trace buffer. It is pure Go: the GPU worker launches what For
// returns, and the tests check it on any machine.
package launch
