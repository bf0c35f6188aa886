package web

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// contentSecurityPolicy lets a page load scripts, styles, fonts and
// frames from this server alone. The pages' inline <script
// type="application/json"> blocks are data, which script-src does not
// govern. Styles allow 'unsafe-inline' because KaTeX's rendered math and
// one lesson grid carry style attributes; scripts set styles through the
// CSSOM, which no policy blocks. 'self' in connect-src covers this host's
// websockets. frame-ancestors 'self' lets a lesson embed the stepper and
// no other site frame any page.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-src 'self'; " +
	"frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'"

// securityHeaders goes on every response. Referrer-Policy: no-referrer
// keeps a room's URL (and anything in it) out of the Referer of every
// request a page makes; nosniff stops a browser reading a download or a
// JSON answer as a script or a page.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// gzipped compresses a response for a client that accepts gzip: a trace
// downloaded over plain HTTP (the websockets' fallback, where a classroom's
// three hundred students share one access point). Level 1: float arrays
// gain little from harder work, and the trace streams as it is computed.
func gzipped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r) {
			next.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w}
		next.ServeHTTP(gw, r) // a handler that aborts panics past finish: no gzip trailer makes a cut trace look whole
		gw.finish()
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

var gzipPool = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }}

// gzipWriter compresses the body of a successful response; an error's
// small JSON goes out as it is.
type gzipWriter struct {
	http.ResponseWriter
	zw      *gzip.Writer
	decided bool
}

func (g *gzipWriter) WriteHeader(status int) {
	if !g.decided {
		g.decided = true
		if status == http.StatusOK {
			h := g.Header()
			h.Set("Content-Encoding", "gzip")
			h.Del("Content-Length")
			g.zw = gzipPool.Get().(*gzip.Writer)
			g.zw.Reset(g.ResponseWriter)
		}
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.decided {
		g.WriteHeader(http.StatusOK)
	}
	if g.zw != nil {
		return g.zw.Write(b)
	}
	return g.ResponseWriter.Write(b)
}

// Flush pushes what is compressed so far to the client, so that a trace
// still streams as its engine computes it.
func (g *gzipWriter) Flush() {
	if g.zw != nil {
		g.zw.Flush()
	}
	http.NewResponseController(g.ResponseWriter).Flush()
}

func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func (g *gzipWriter) finish() {
	if g.zw != nil {
		g.zw.Close()
		gzipPool.Put(g.zw)
		g.zw = nil
	}
}
