// Package recordings holds traces recorded on a GPU and shipped for replay
// on machines without one: the runs of the home page and the lessons, and a
// timeline of a whole grid. list.txt names each run; `gpuworker record`
// (docs/GPU.md) makes the files.
package recordings

import "embed"

// Files holds list.txt and one .fstrace per line of it; sweep-*.json, a
// benchmark sweep recorded on the same GPU; sdpa-*.json, PyTorch's attention
// timings measured beside it (../shared/bench/sdpa_anchor.py); traffic-*.json,
// the hardware's memory counters against the traffic model.
//
//go:embed list.txt *.fstrace *.json
var Files embed.FS
