//go:build unix

package connlimit

import "syscall"

// DefaultTotal is the cap on connections in all when the server says
// nothing else: the process's limit on open files (Go raises the soft
// limit to the hard one at start) less a reserve for what else the server
// opens (the GPU worker's pipes, one process per lab kernel, the broker,
// its logs), so that a full house still leaves it the files it needs.
// 0 (no cap) where the limit is unknown.
func DefaultTotal() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return totalFor(lim.Cur)
}
