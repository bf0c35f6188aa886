package templates

import (
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"flashstep/static"
)

// A page's entry module imports others, which import more: a browser that
// meets them one level at a time waits a round trip and a parse per level
// (four levels under the stepper, 0.7 s of the first lesson's start on this
// machine). ModulesOf lists the whole static import closure so that the page
// names every module at once, as <link rel="modulepreload">.

// reImport finds the specifiers of static imports and re-exports, which may
// span lines: import { a,\n b } from './x.js'; import './y.js'; export … from.
// Dynamic import() is left out on purpose: what a page loads on demand (the
// lab's editor) stays on demand.
var reImport = regexp.MustCompile(`(?m)^\s*(?:import|export)\s(?:[^;'"]*?\sfrom\s*)?['"]([^'"]+)['"]`)

var (
	modulesMu   sync.Mutex
	modulesMemo = map[string][]string{}
)

// ModulesOf is the static import closure of the module at the URL entry
// ("/static/js/stepper.js"), entry itself excluded, as URLs in a stable
// order. A module the tree lacks is left out (the vendor libraries before
// `make assets`); the browser then reports it as it would without the list.
func ModulesOf(entry string) []string {
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if got, ok := modulesMemo[entry]; ok {
		return got
	}
	seen := map[string]bool{entry: true}
	var out []string
	var walk func(url string)
	walk = func(url string) {
		src, err := fs.ReadFile(static.Files, strings.TrimPrefix(url, "/static/"))
		if err != nil {
			return
		}
		for _, m := range reImport.FindAllStringSubmatch(string(src), -1) {
			spec := m[1]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				continue
			}
			dep := path.Join(path.Dir(url), spec)
			if seen[dep] {
				continue
			}
			seen[dep] = true
			if _, err := fs.Stat(static.Files, strings.TrimPrefix(dep, "/static/")); err != nil {
				continue
			}
			out = append(out, dep)
			walk(dep)
		}
	}
	walk(entry)
	sort.Strings(out)
	modulesMemo[entry] = out
	return out
}
