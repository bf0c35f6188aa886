package web

import (
	"io/fs"
	"log/slog"
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

// VendorFiles are the browser libraries the pages load from
// /static/vendor/: `make assets` copies them from node_modules into
// static/vendor, which the binary embeds. Without them a page still loads,
// but its formulas lose their layout (KaTeX's stylesheet) or the stepper's
// stay raw LaTeX (its script), its heatmaps lose their colours, the
// sweep has no chart and the lab no editor.
var VendorFiles = []string{
	"vendor/katex/katex.min.js",
	"vendor/katex/katex.min.css",
	"vendor/d3/d3-color.min.js",
	"vendor/d3/d3-interpolate.min.js",
	"vendor/d3/d3-scale-chromatic.min.js",
	"vendor/chart/chart.umd.min.js",
	"vendor/codemirror/codemirror.js",
}

// MissingVendor lists the VendorFiles that files does not hold.
func MissingVendor(files fs.FS) []string {
	var missing []string
	for _, name := range VendorFiles {
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() {
			missing = append(missing, name)
		}
	}
	return missing
}

// warnMissingVendor says at start, loudly, that the server was built
// without the browser libraries, which no page would otherwise say.
func warnMissingVendor(files fs.FS, log *slog.Logger) {
	if files == nil || log == nil {
		return
	}
	if missing := MissingVendor(files); len(missing) > 0 {
		log.Warn("the browser libraries are missing from static/vendor: formulas lose their typesetting (raw LaTeX, or KaTeX's markup without its stylesheet), heatmaps have no colours, the sweep no chart and the lab no editor; run `make assets` and build the server again",
			"missing", strings.Join(missing, ", "))
	}
}

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
