//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

// Built for this machine rather than for a browser, the command says how
// to build it.
func main() {
	fmt.Fprintln(os.Stderr, "sitewasm runs in a browser's Web Worker: build it with GOOS=js GOARCH=wasm go build ./cmd/sitewasm")
	os.Exit(2)
}
