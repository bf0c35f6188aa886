//go:build !unix

package connlimit

// DefaultTotal is 0 (no cap) where the limit on open files is not read.
func DefaultTotal() int { return 0 }
