package connlimit

// fileReserve is the descriptors DefaultTotal leaves for what the server
// opens besides connections.
const fileReserve = 256

// totalFor is DefaultTotal for a limit of files open at once: the limit
// less fileReserve, or half of a limit too small for the reserve; 0 (no
// cap) for an unlimited one.
func totalFor(files uint64) int {
	const unlimited = 1 << 30 // RLIM_INFINITY, or as good as it
	switch {
	case files >= unlimited:
		return 0
	case files > 2*fileReserve:
		return int(files) - fileReserve
	default:
		return max(1, int(files)/2)
	}
}
