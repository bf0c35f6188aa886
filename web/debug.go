package web

import (
	"net"
	"net/http"
	"runtime"
)

// debugStats answers the server's runtime figures (its rooms, its shared
// computations, its memory) to a client on this machine only: the load
// generator reads them.
func (s *Server) debugStats(w http.ResponseWriter, r *http.Request) error {
	// A proxy on this machine makes every client look local: a request it
	// forwarded (it says so) is not the load generator's.
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" {
		return errNotFound
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	writeJSON(w, http.StatusOK, map[string]any{"rooms": s.class.Stats(), "runs": s.runs.Stats(),
		"heap_alloc": ms.HeapAlloc, "heap_inuse": ms.HeapInuse, "sys": ms.Sys, "goroutines": runtime.NumGoroutine()})
	return nil
}
