package web

import (
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// labWorker is the lab's sandbox for a student's JavaScript. A dedicated
// worker runs under the policy its own script is sent with: this one may
// eval (the student's code) and may reach nothing over the network, so code
// pasted from anywhere can only compute.
const (
	labWorker       = "js/lab_worker.js"
	labWorkerPolicy = "default-src 'none'; script-src 'self' 'unsafe-eval'"
)

// staticHandler serves the browser's files. They are embedded in the binary,
// so browsers may keep them for a while but must check back: a new build
// changes them under the same names. A folder is no page: it answers 404
// rather than a listing of what is in it.
func staticHandler(files fs.FS) http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "."
		}
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		if name == labWorker {
			w.Header().Set("Content-Security-Policy", labWorkerPolicy)
		}
		fileServer.ServeHTTP(w, r)
	})
}
