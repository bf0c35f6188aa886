// Package ptx holds the kernels' compiled PTX, as committed: each rung's
// untraced module and its traced one (built with -DFS_TRACE), by `make ptx`
// (nvcc 11.8) or, for the Hopper rungs, scripts/ptx-hopper on the GPU
// machine. The files are gzipped (module.ptx.gz: about 4 MB where the text
// is 23 MB; the repository travels whole to the GPU machine, under a size
// limit) and read back as text here. It is a package of its own because it
// is large and only the GPU worker, which loads it, and the pages that name
// its hash need it; everything else reads the rungs from package kernels.
package ptx

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io"
	"sync"

	"flashstep/kernels"
)

//go:embed *.ptx.gz
var files embed.FS

// Text returns a module's PTX (kernels.Modules names them).
func Text(module string) (string, error) {
	b, err := Bytes(module)
	return string(b), err
}

// Bytes returns a module's PTX as bytes.
func Bytes(module string) ([]byte, error) {
	gz, err := files.ReadFile(module + ".ptx.gz")
	if err != nil {
		return nil, err
	}
	return Gunzip(gz)
}

// Gunzip is a committed file's text: the worker's -ptx-dir reads
// module.ptx.gz files with it too.
func Gunzip(gz []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// Hash identifies the compiled kernels: a cached GPU trace is only valid
// for the PTX that made it. It hashes the PTX text, so compressing the
// files did not change it.
var Hash = sync.OnceValue(func() string {
	h := sha256.New()
	for _, m := range kernels.Modules {
		b, _ := Bytes(m)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})
