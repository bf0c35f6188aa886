package web

import (
	"io/fs"
	"net/http"
)

// staticHandler serves the browser's files. They are embedded in the binary,
// so browsers may keep them for a while but must check back: a new build
// changes them under the same names.
func staticHandler(files fs.FS) http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
