package launch

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"flashstep/kernels"
	"flashstep/kernels/ptx"
)

// reParam is one parameter of a PTX entry: its alignment, type and, for an
// array, its length in bytes.
var reParam = regexp.MustCompile(`\.param\s+(?:\.align (\d+)\s+)?\.(\w+)\s+\w+(?:\[(\d+)\])?`)

// entryParams is the parameter list of kernel name in a module's PTX, each
// as "u64", "f32", "b8[128]/64" and so on.
func entryParams(text, name string) ([]string, error) {
	i := strings.Index(text, ".entry "+name+"(")
	if i < 0 {
		return nil, fmt.Errorf("no entry %s", name)
	}
	end := strings.Index(text[i:], ")")
	var out []string
	for _, m := range reParam.FindAllStringSubmatch(text[i:i+end], -1) {
		p := m[2]
		if m[3] != "" {
			p += "[" + m[3] + "]/" + m[1]
		}
		out = append(out, p)
	}
	return out, nil
}

// Every launch's arguments are what its kernel declares, in order, in both
// builds: a buffer's address a 64-bit parameter, a value a scalar of at most
// 8 bytes (the worker passes 8-byte slots, of which the driver copies the
// parameter's size), a tensor map a 128-byte parameter aligned to 64, and a
// traced build's three trace arguments last. A map where the kernel wants an
// address, or the reverse, would have the driver read past a slot.
func TestLaunchArgsMatchPTXParams(t *testing.T) {
	t.Parallel()
	checked := 0
	everyLaunch(func(info *kernels.VariantInfo, _ int, k kernels.Launch) {
		for _, module := range []string{info.Module(), info.Module() + "_traced"} {
			text, err := moduleText(module)
			if err != nil {
				t.Fatal(err)
			}
			params, err := entryParams(text, k.Name)
			if err != nil {
				t.Errorf("%s: %v", module, err)
				continue
			}
			want := len(k.Args)
			if strings.HasSuffix(module, "_traced") {
				want += 3
			}
			if len(params) != want {
				t.Errorf("%s/%s declares %d parameters %v, its launch passes %d", module, k.Name, len(params), params, want)
				continue
			}
			for i, a := range k.Args {
				p := params[i]
				switch {
				case a.Map != nil:
					if p != "b8[128]/64" {
						t.Errorf("%s/%s parameter %d is %s, its launch passes a tensor map (128 bytes, aligned to 64)", module, k.Name, i, p)
					}
				case a.IsBuf:
					if p != "u64" {
						t.Errorf("%s/%s parameter %d is %s, its launch passes a buffer's address", module, k.Name, i, p)
					}
				default:
					if !regexp.MustCompile(`^[usfb](8|16|32|64)$`).MatchString(p) {
						t.Errorf("%s/%s parameter %d is %s, its launch passes an 8-byte value", module, k.Name, i, p)
					}
				}
			}
			for _, p := range params[len(k.Args):] {
				if p != "u64" {
					t.Errorf("%s/%s: a trace parameter is %s, the worker passes 8 bytes", module, k.Name, p)
				}
			}
			checked++
		}
	})
	if checked == 0 {
		t.Fatal("no launch checked")
	}
	t.Logf("%d launches checked against their PTX", checked)
}

// moduleText is a module's PTX, read (and unzipped) once for all the tests:
// the launch tests look a module up for every launch of every tile.
func moduleText(module string) (string, error) {
	type result struct {
		text string
		err  error
	}
	if r, ok := moduleTexts.Load(module); ok {
		return r.(result).text, r.(result).err
	}
	text, err := ptx.Text(module)
	moduleTexts.Store(module, result{text, err})
	return text, err
}

var moduleTexts sync.Map
