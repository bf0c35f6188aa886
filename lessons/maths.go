package lessons

import (
	_ "embed"
	"encoding/json"
	"html"
	"regexp"
	"sort"
	"sync"
)

// The lessons' formulas are typeset before any page is served: `make
// generate` hands every formula of the course to KaTeX once
// (scripts/katex-typeset.mjs) and maths_gen.json keeps its HTML, which the
// pages carry in place of the TeX. A lesson page then loads no KaTeX
// script (270 KiB, parsed before the page could answer a click) and spends
// none of its first tasks typesetting. A formula the file lacks (a lesson
// edited since the last `make generate`; TestGeneratedMaths fails on it)
// stays TeX, and lesson.js typesets it in the browser as before.
//
//go:embed maths_gen.json
var mathsGen []byte

var typesetMaths = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	if err := json.Unmarshal(mathsGen, &m); err != nil {
		panic("lessons/maths_gen.json: " + err.Error() + " (make generate writes it)")
	}
	return m
})

// mathKey is a formula's key in maths_gen.json: display and inline
// formulas of the same TeX are typeset differently.
func mathKey(tex string, display bool) string {
	if display {
		return "D " + tex
	}
	return "I " + tex
}

// Formula is one formula of the course.
type Formula struct {
	TeX     string `json:"tex"`
	Display bool   `json:"display"`
}

var (
	formulasMu sync.Mutex
	formulas   = map[Formula]bool{}
)

// Formulas is every formula the lessons parsed so far have held, sorted
// (TestGeneratedMaths loads the whole course first).
func Formulas() []Formula {
	formulasMu.Lock()
	defer formulasMu.Unlock()
	out := make([]Formula, 0, len(formulas))
	for f := range formulas {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		return mathKey(out[i].TeX, out[i].Display) < mathKey(out[j].TeX, out[j].Display)
	})
	return out
}

// reMathElement is a formula as markdownToHTML writes it: its TeX, escaped,
// the element's only content.
var reMathElement = regexp.MustCompile(`<(span|div) class="math( display)?">([^<]*)</(?:span|div)>`)

// typesetMath puts the typeset HTML in place of each formula's TeX. It runs
// last, after the glossary's links are placed, so that no link lands
// inside a formula's markup.
func typesetMath(h string) string {
	typeset := typesetMaths()
	return reMathElement.ReplaceAllStringFunc(h, func(s string) string {
		m := reMathElement.FindStringSubmatch(s)
		f := Formula{TeX: html.UnescapeString(m[3]), Display: m[2] != ""}
		formulasMu.Lock()
		formulas[f] = true
		formulasMu.Unlock()
		out, ok := typeset[mathKey(f.TeX, f.Display)]
		if !ok {
			return s
		}
		return `<` + m[1] + ` class="math` + m[2] + ` typeset">` + out + `</` + m[1] + `>`
	})
}
