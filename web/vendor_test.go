package web

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/runner"
)

// TestWarnsWithoutVendor: a server built without `make assets` (no
// static/vendor) says so at start, naming what is missing and the command
// that fixes it; one built with every library says nothing of the kind.
func TestWarnsWithoutVendor(t *testing.T) {
	t.Parallel()
	start := func(files fstest.MapFS) string {
		var out bytes.Buffer
		NewServer(Deps{Engines: testEngines{Runner: runner.Mirror{}}, Static: files, Log: slog.New(slog.NewTextHandler(&out, nil))})
		return out.String()
	}
	bare := fstest.MapFS{"js/stepper.js": {Data: []byte("// stepper")}}
	logged := start(bare)
	for _, want := range []string{"level=WARN", "make assets", "raw LaTeX", "vendor/katex/katex.min.js"} {
		if !strings.Contains(logged, want) {
			t.Errorf("without static/vendor the server logs %q, which does not say %q", logged, want)
		}
	}
	full := fstest.MapFS{"js/stepper.js": {Data: []byte("// stepper")}}
	for _, name := range VendorFiles {
		full[name] = &fstest.MapFile{Data: []byte("/* lib */")}
	}
	if logged := start(full); strings.Contains(logged, "make assets") {
		t.Errorf("with every library the server still warns: %s", logged)
	}
	// One missing is named alone.
	delete(full, "vendor/katex/katex.min.css")
	if logged := start(full); !strings.Contains(logged, "katex.min.css") || strings.Contains(logged, "katex.min.js") {
		t.Errorf("with only katex.min.css missing the server logs %q", logged)
	}
}

// TestVendorFilesAreWhatThePagesLoad: every /static/vendor/ file a
// template or a module names is one the start-up check looks for.
func TestVendorFilesAreWhatThePagesLoad(t *testing.T) {
	t.Parallel()
	var names []string
	for _, pattern := range []string{"../templates/*.templ", "../static/js/*.js"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", pattern, err)
		}
		names = append(names, files...)
	}
	re := regexp.MustCompile(`/static/(vendor/[A-Za-z0-9_./-]+)`)
	seen := 0
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			seen++
			if !slices.Contains(VendorFiles, string(m[1])) {
				t.Errorf("%s loads /static/%s, which VendorFiles (the start-up check) leaves out", name, m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal("no page loads anything from /static/vendor/: is the pattern stale?")
	}
}
