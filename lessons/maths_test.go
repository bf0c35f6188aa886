package lessons

import (
	"bytes"
	"encoding/json"
	"flag"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateMaths = flag.Bool("update", false, "rewrite maths_gen.json (make generate)")

// TestGeneratedMaths holds maths_gen.json to the course: every formula of
// every lesson typeset, no entry for a formula no lesson holds. With
// -update (make generate) it has KaTeX typeset them (node, the repository's
// katex from package.json). jstest/maths.test.mjs checks each entry is
// KaTeX's HTML for its key.
func TestGeneratedMaths(t *testing.T) {
	// The formulas met so far include other tests' made-up lessons: start
	// afresh. Not parallel, so no other test of the package parses meanwhile.
	formulasMu.Lock()
	clear(formulas)
	formulasMu.Unlock()
	if _, err := Load(CourseFiles); err != nil {
		t.Fatal(err)
	}
	all := Formulas()
	if len(all) < 250 {
		t.Fatalf("the course holds %d formulas; parsing found too few to be the whole course", len(all))
	}
	if *updateMaths {
		in, err := json.Marshal(all)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("node", filepath.Join("..", "scripts", "katex-typeset.mjs"))
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scripts/katex-typeset.mjs: %v\n%s", err, stderr.String())
		}
		if err := os.WriteFile("maths_gen.json", out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	typeset := typesetMaths()
	want := map[string]bool{}
	var missing []string
	for _, f := range all {
		k := mathKey(f.TeX, f.Display)
		want[k] = true
		if typeset[k] == "" {
			missing = append(missing, k)
		}
	}
	var stale []string
	for k := range typeset {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if len(missing) > 0 || len(stale) > 0 {
		t.Errorf("lessons/maths_gen.json is stale against the course: run make generate (%d formulas not typeset, first %q; %d entries no lesson holds, first %q)",
			len(missing), first(missing), len(stale), first(stale))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestLessonPagesCarryTypesetMath: a page's formulas arrive typeset, each
// keeping nothing of its TeX as raw text, and a formula the file lacks is
// left as TeX for the browser.
func TestLessonPagesCarryTypesetMath(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	untypeset := regexp.MustCompile(`class="math( display)?"`)
	n := 0
	for _, l := range c.Lessons {
		for _, p := range l.Parts {
			for _, h := range partHTML(p) {
				if m := untypeset.FindStringIndex(h); m != nil {
					t.Errorf("lesson %s: a formula is still TeX: %.80s", l.Slug, h[m[0]:])
				}
				n += strings.Count(h, `class="math`)
			}
		}
	}
	if n < 500 {
		t.Errorf("%d typeset formulas in the course's parts; want the course's 500 or more", n)
	}
	got := typesetMath(`<span class="math">x_{\text{not in the course}}</span>`)
	if got != `<span class="math">x_{\text{not in the course}}</span>` {
		t.Errorf("a formula maths_gen.json lacks became %q; want it left as TeX", got)
	}
	for _, f := range Formulas() {
		if f.Display {
			h := typesetMath(`<div class="math display">` + html.EscapeString(f.TeX) + `</div>`)
			if !strings.HasPrefix(h, `<div class="math display typeset"><span class="katex-display">`) || !strings.Contains(h, "<math") {
				t.Errorf("display formula %q became %.120q…; want KaTeX's display HTML with its MathML", f.TeX, h)
			}
			return
		}
	}
	t.Error("the course holds no display formula")
}

// partHTML is every piece of HTML a part carries: its text, a reveal's,
// a widget's caption, a checkpoint's question.
func partHTML(p Part) []string {
	h := []string{p.HTML}
	if p.Reveal != nil {
		h = append(h, p.Reveal.HTML)
	}
	if p.Widget != nil {
		h = append(h, p.Widget.Caption)
	}
	if p.Checkpoint != nil {
		h = append(h, p.Checkpoint.Question)
	}
	return h
}
