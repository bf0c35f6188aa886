package instrument

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The variant enum (variants.go) is generated from the kernels' registry
// entries, so that a new rung is its .cu, its .go and a line in the
// registry's list: each kernels/<name>.go that declares a VariantInfo with
// `Variant: instrument.VariantX` gives the enum VariantX named "<name>".
// The registry's Go is read as source, not compiled: a new entry names a
// constant that does not exist until this test has written it.
//
// A wire number, once issued, is the trace format's for good: existing
// names keep theirs (read back from variants.go), a new name takes the
// next after variantsIssued, and a removed name's number is never reused.

const variantsFile = "variants.go"

type variantDecl struct {
	ident, name, title string
	wire               int
	roles              bool
}

func TestGeneratedVariants(t *testing.T) {
	t.Parallel()
	decls, err := registryVariants(filepath.Join("..", "kernels"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(variantsFile)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := numberVariants(decls, old)
	if err != nil {
		t.Fatal(err)
	}
	want, err := variantsSource(decls, issued)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(variantsFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(old, want) {
		t.Errorf("instrument/%s is stale against the kernels' registry entries: run make generate", variantsFile)
	}
}

// registryVariants reads every kernels/<name>.go (tests aside) for
// composite literals of VariantInfo and returns their variants, sorted by
// name. Two entries in one file, or one naming another file's variant, are
// errors: a rung's name is its files' name.
func registryVariants(dir string) ([]variantDecl, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []variantDecl
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(path), ".go")
		var found []variantDecl
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "VariantInfo" {
				return true
			}
			d := variantDecl{name: name}
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch key := kv.Key.(*ast.Ident).Name; key {
				case "Variant":
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok {
						if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "instrument" {
							d.ident = sel.Sel.Name
						}
					}
				case "Title":
					if s, ok := kv.Value.(*ast.BasicLit); ok && s.Kind == token.STRING {
						d.title, _ = strconv.Unquote(s.Value)
					}
				case "Roles":
					d.roles = true
				}
			}
			if d.ident == "" {
				err = fmt.Errorf("%s: a VariantInfo without `Variant: instrument.Variant…`", fset.Position(lit.Pos()))
				return false
			}
			found = append(found, d)
			return false
		})
		if err != nil {
			return nil, err
		}
		switch {
		case len(found) > 1:
			return nil, fmt.Errorf("%s declares %d kernels: one file, one rung (its name is the file's)", path, len(found))
		case len(found) == 1:
			if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(name) || !strings.HasPrefix(found[0].ident, "Variant") {
				return nil, fmt.Errorf("%s: the file's name %q and the constant %q must be a lower-case wire name and Variant…", path, name, found[0].ident)
			}
			out = append(out, found[0])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

var wireLine = regexp.MustCompile(`(?m)^\t(Variant\w+) Variant = (\d+) // "([a-z0-9_]+)"`)
var issuedLine = regexp.MustCompile(`(?m)^const variantsIssued = (\d+)`)

// numberVariants gives each declaration its wire number from the current
// variants.go, or the next unissued one, and returns the new highest issued.
func numberVariants(decls []variantDecl, current []byte) (int, error) {
	had := map[string]int{}
	for _, m := range wireLine.FindAllSubmatch(current, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		had[string(m[3])] = n
	}
	issued := 0
	if m := issuedLine.FindSubmatch(current); m != nil {
		issued, _ = strconv.Atoi(string(m[1]))
	}
	for _, n := range had {
		issued = max(issued, n)
	}
	for i := range decls {
		if n, ok := had[decls[i].name]; ok {
			decls[i].wire = n
		}
	}
	for i := range decls { // new names, in name order: deterministic
		if decls[i].wire == 0 {
			issued++
			decls[i].wire = issued
		}
	}
	if issued > 255 {
		return 0, fmt.Errorf("the trace header holds a variant in one byte: %d issued", issued)
	}
	return issued, nil
}

func variantsSource(decls []variantDecl, issued int) ([]byte, error) {
	byWire := append([]variantDecl(nil), decls...)
	sort.Slice(byWire, func(i, j int) bool { return byWire[i].wire < byWire[j].wire })
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("// Code generated by flashstep/instrument from the kernels' registry entries (make generate); DO NOT EDIT.\n\n")
	p("package instrument\n\n")
	p("// The variants, one per kernels/<name>.go entry, by wire number: a\n// number once issued stays its kernel's (variants_gen_test.go).\nconst (\n")
	for _, d := range byWire {
		if d.title != "" {
			p("\t// %s is kernels/%s.go: %s.\n", d.ident, d.name, d.title)
		}
		p("\t%s Variant = %d // %q\n", d.ident, d.wire, d.name)
	}
	p(")\n\n")
	p("// variantsIssued is the highest wire number ever issued; the next kernel\n// takes the one after.\nconst variantsIssued = %d\n\n", issued)
	p("var variantNames = map[Variant]string{\n")
	for _, d := range byWire {
		p("\t%s: %q,\n", d.ident, d.name)
	}
	p("}\n\n")
	p("// Variants lists the valid variants by wire number, for forms and tests.\nvar Variants = []Variant{\n")
	for _, d := range byWire {
		p("\t%s,\n", d.ident)
	}
	p("}\n\n")
	p("// rolesVariants are the kernels whose entry has a role table: their traced\n// build records warp roles, and only their traces may carry FlagRoles.\nvar rolesVariants = map[Variant]bool{\n")
	for _, d := range byWire {
		if d.roles {
			p("\t%s: true,\n", d.ident)
		}
	}
	p("}\n")
	return format.Source(b.Bytes())
}
