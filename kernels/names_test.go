package kernels

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// namedOnPurpose are the places outside the kernels, the lessons and the
// docs whose code names a rung, and why: each is a choice of one kernel for
// a page's purpose, not a list of rungs that a new rung would have to join.
var namedOnPurpose = map[string]string{
	"api/compare.go":    "the side by side's three pairs: naive and flash2, their bf16 and their backward twins",
	"traffic/memory.go": "the memory calculator's pairs and the flash tiles its plan assumes",
	"classroom/poll.go": "a poll asks about flash2's online softmax",
	"labrun/labrun.go":  "the lab places a student's kernel against flash2, the rung it rewrites",
	"ladder/tried.go":   "a record of ideas tried on two backward rungs and left out, each naming the rung it changed, as docs/LADDER.md does",
}

// TestRungNamesStayInTheirFiles: a new rung is its .cu, its .go and a line
// of the registry (kernels/README.md), so the Go code elsewhere never lists
// rungs: it reads the registry. It fails on a variant constant
// (instrument.Variant…) or a string that is exactly a rung's name, in any
// Go file but the tests, the kernels (this package and kernelstest), the
// lessons, the generated enum and the places namedOnPurpose.
func TestRungNamesStayInTheirFiles(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, v := range rungs {
		names[v.Name()] = true
	}
	constant := regexp.MustCompile(`^Variant[A-Z]`)
	root := ".."
	fset := token.NewFileSet()
	// The enum's constants, as instrument's own files would name them.
	idents := map[string]bool{}
	gen, err := parser.ParseFile(fset, "../instrument/variants.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range gen.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					idents[n.Name] = constant.MatchString(n.Name)
				}
			}
		}
	}
	used := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case "kernels", "lessons", "node_modules", "site", "bin", ".git", "docs", "recordings":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(rel, "_templ.go") || rel == "instrument/variants.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "instrument" && constant.MatchString(x.Sel.Name) {
					what = "instrument." + x.Sel.Name
				}
			case *ast.Ident:
				if strings.HasPrefix(rel, "instrument/") && idents[x.Name] {
					what = x.Name
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					if s, err := strconv.Unquote(x.Value); err == nil && names[s] {
						what = x.Value
					}
				}
			}
			if what == "" {
				return true
			}
			if _, ok := namedOnPurpose[rel]; ok {
				used[rel] = true
				return true
			}
			t.Errorf("%s: names a rung (%s): read the registry (kernels.Variants, an entry's fields) instead, or say in namedOnPurpose why this place chooses one", fset.Position(n.Pos()), what)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range namedOnPurpose {
		if !used[rel] {
			t.Errorf("namedOnPurpose lists %s, which names no rung any more: take it off", rel)
		}
	}
}
