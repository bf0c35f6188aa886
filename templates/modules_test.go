package templates

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"flashstep/static"
)

// TestModulesOfIsTheImportClosure: for every page's entry module, the list
// holds each module any listed module (or the entry) imports statically,
// once, and nothing the page loads only on demand (the lab's editor).
// Read from the files independently of ModulesOf's own pattern: every
// quoted './…js' or '../…js' after `from` or a bare `import`.
func TestModulesOfIsTheImportClosure(t *testing.T) {
	spec := regexp.MustCompile(`(?:\bfrom\s*|^\s*import\s*)'(\.{1,2}/[^']+\.js)'`)
	entries := []string{"/static/js/stepper.js", "/static/js/lesson.js", "/static/js/lab.js", "/static/js/compare.js", "/static/js/sweep.js",
		"/static/js/classroom.js", "/static/js/classroom_present.js", "/static/js/playground_page.js"}
	for _, entry := range entries {
		got := ModulesOf(entry)
		in := map[string]bool{entry: true}
		for _, m := range got {
			if in[m] {
				t.Errorf("%s: %s listed twice (or is the entry)", entry, m)
			}
			in[m] = true
		}
		for m := range in {
			src, err := fs.ReadFile(static.Files, strings.TrimPrefix(m, "/static/"))
			if err != nil {
				t.Fatalf("%s: %s: %v", entry, m, err)
			}
			for _, line := range strings.Split(string(src), "\n") {
				for _, s := range spec.FindAllStringSubmatch(line, -1) {
					if dep := path.Join(path.Dir(m), s[1]); !in[dep] {
						t.Errorf("%s: %s imports %s, which the list lacks", entry, m, dep)
					}
				}
			}
		}
	}
	// Spot checks a wrong closure would miss: a module four imports deep
	// under the stepper, and the editor the lab imports only when asked.
	if !slices.Contains(ModulesOf("/static/js/stepper.js"), "/static/js/trace_abi.js") {
		t.Error("the stepper's list lacks trace_abi.js")
	}
	if slices.Contains(ModulesOf("/static/js/lab.js"), "/static/js/lab_editor.js") {
		t.Error("the lab's list names lab_editor.js, which it imports only when the student reaches for the code")
	}
}
