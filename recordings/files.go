//go:build !js

package recordings

import "embed"

// Files holds list.txt and one .fstrace per line of it; sweep-*.json, a
// benchmark sweep recorded on the same GPU; sdpa-*.json, PyTorch's attention
// timings measured beside it (../shared/bench/sdpa_anchor.py); traffic-*.json,
// the hardware's memory counters against the traffic model; ladder-*.json,
// the ladder bench (scripts/bench-gpu); backward-*.json, the tensor-core
// backward timed beside PyTorch's SDPA backward (scripts/bench-backward).
//
//go:embed list.txt *.fstrace *.json
var Files embed.FS
