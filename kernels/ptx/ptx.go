// Package ptx holds the kernels' compiled PTX, as committed: each rung's
// untraced module and its traced one (built with -DFS_TRACE), by `make ptx`
// (nvcc 11.8) or, for the Hopper rungs, scripts/ptx-hopper on the GPU
// machine. It is a package of its own because it is large (15 MB) and only
// the GPU worker, which loads it, and the pages that name its hash need it;
// everything else reads the rungs from package kernels.
package ptx

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"

	"flashstep/kernels"
)

//go:embed *.ptx
var files embed.FS

// Text returns a module's PTX (kernels.Modules names them).
func Text(module string) (string, error) {
	b, err := files.ReadFile(module + ".ptx")
	return string(b), err
}

// Hash identifies the compiled kernels: a cached GPU trace is only valid
// for the PTX that made it.
func Hash() string {
	h := sha256.New()
	for _, m := range kernels.Modules {
		b, _ := files.ReadFile(m + ".ptx")
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
