package lab

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"flashstep/kernels"
)

// Every way a source can make the compiler read or name a file is
// refused, naming the line the student wrote it on.
func TestCheckSourceRefusesFileNaming(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line      int
		says      string
	}{
		{"include quoted", "#include \"/proc/self/environ\"\n", 1, "#include is not available in the lab: everything your kernel needs is already included"},
		{"include angled", "int a;\n#include </etc/passwd>\n", 2, "#include"},
		{"include after spaces", "   \t#   include \"x\"\n", 1, "#include"},
		{"include after a comment", "/* hi */ # /* there */ include \"x\"\n", 1, "#include"},
		{"comment spanning lines before #", "int a; /*\n*/ #include \"x\"\n", 2, "#include"},
		{"line splice in the name", "#inc\\\nlude \"x\"\n", 1, "#include"},
		{"backslash, spaces, newline", "#inc\\  \nlude \"x\"\n", 1, "a backslash followed by spaces"},
		{"backslash and spaces hiding a comment's end", "// see below \\ \n#include \"/proc/self/environ\"\n", 1, "a backslash followed by spaces"},
		{"backslash and spaces in a string", "const char *s = \"abc\\ \n#include \"x\"\n", 1, "a backslash followed by spaces"},
		{"raw string after a non-ASCII character", "auto s = ×R\"( \" /* )\";\n#include \"/proc/self/environ\"\n// */\n", 1, "the character '×'"},
		{"raw string after a dollar", "auto s = $R\"( \" /* )\";\n#include \"x\"\n// */\n", 1, "the character '$'"},
		{"raw string with a malformed delimiter", "auto s = R\"a b( \" /* )a b\";\n#include \"x\"\n// */\n", 1, "raw string literal"},
		{"raw string never closed", "auto s = R\"(\n#include \"x\"\n", 1, "raw string literal"},
		{"include in a comment", "// #include \"x\"\n", 1, "#include is not available in the lab (in a comment or a string too)"},
		{"include in a string", "const char *s = \"#include \\\"x\\\"\";\n", 1, "#include"},
		{"include in a raw string", "const char *r = R\"tag(\n#include \"x\"\n)tag\";\n", 2, "#include"},
		{"has_include in a comment", "/* __has_include */\n", 1, "__has_include"},
		{"pragma GCC dependency", "#pragma GCC dependency \"/etc/passwd\"\n", 1, "#pragma GCC dependency"},
		{"line splice before the name", "#\\\ninclude \"x\"\n", 1, "#include"},
		{"splice joins the # to a comment line", "// note \\\n\n#include \"x\"\n", 3, "#include"},
		{"CRLF line endings", "int a;\r\n#include \"x\"\r\n", 2, "#include"},
		{"lone carriage return", "int a;\r#include \"x\"\n", 1, "carriage return"},
		{"digraph", "%:include \"x\"\n", 1, "#include"},
		{"digraph with spaces", "  %:  include \"x\"\n", 1, "#include"},
		{"trigraph", "??=include \"x\"\n", 1, "#include"},
		{"include_next", "#include_next <cuda.h>\n", 1, "#include_next"},
		{"import", "#import \"x\"\n", 1, "#import"},
		{"line", "#line 5 \"/etc/passwd\"\n", 1, "#line"},
		{"line marker", "# 5 \"/etc/passwd\"\n", 1, "line marker"},
		{"embed", "#embed \"/etc/passwd\"\n", 1, "#embed"},
		{"ident", "#ident \"x\"\n", 1, "#ident"},
		{"pragma GCC system_header", "#pragma GCC system_header\n", 1, "#pragma GCC system_header"},
		{"pragma include_alias", "#pragma include_alias(\"a\", \"/etc/passwd\")\n", 1, "#pragma include_alias"},
		{"has_include in #if", "#if __has_include(\"/etc/passwd\")\n#endif\n", 1, "__has_include is not available"},
		{"has_include in a macro", "#define F __has_include\n", 1, "__has_include"},
		{"has_include_next", "#if __has_include_next(<x>)\n#endif\n", 1, "__has_include_next"},
		{"has_embed", "#if __has_embed(\"x\")\n#endif\n", 1, "__has_embed"},
		{"_Pragma", "_Pragma(\"GCC dependency \\\"/etc/passwd\\\"\")\n", 1, "_Pragma"},
		{"token pasting", "#define C(a, b) a##b\n#if C(__has_, include)(\"x\")\n#endif\n", 1, "token pasting"},
		{"token pasting as digraphs", "#define C(a, b) a %:%: b\n", 1, "token pasting"},
		{"universal character name", "#\\u0069nclude \"x\"\n", 1, "universal character name"},
		{"macro naming the file", "#define F \"/etc/passwd\"\n#include F\n", 2, "#include"},
		{"after a string on the line before", "const char *s = \"#\";\n#include \"x\"\n", 2, "#include"},
		{"after an unterminated string", "const char *s = \"abc\n#include \"x\"\n", 2, "#include"},
		{"after an unterminated char", "int c = 'a\n#include \"x\"\n", 2, "#include"},
		{"after a digit separator", "int n = 1'000;\n#include \"x\"\n", 2, "#include"},
		{"identifier ending in R is no raw string", "int fooR; const char *s = fooR\"(\n#include \"x\"\n)\";\n", 2, "#include"},
		{"raw string ended by trigraph reading", "const char *s = R\"(??)\";\n#include \"x\"\n// )\"\n", 2, "#include"},
		{"inside #if 0", "#if 0\n#include \"x\"\n#endif\n", 2, "#include"},
		{"NUL byte", "int a;\x00\n", 1, "NUL"},
		{"not UTF-8", "int a;\n\xff\n", 2, "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSource(c.src)
			var fe kernels.FieldErrors
			if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "source" {
				t.Fatalf("CheckSource(%q) = %v, want a refusal on field source", c.src, err)
			}
			want := "line " + strconv.Itoa(c.line) + ": "
			if !strings.HasPrefix(fe[0].Message, want) || !strings.Contains(fe[0].Message, c.says) {
				t.Errorf("CheckSource(%q) says %q, want it to start %q and say %q", c.src, fe[0].Message, want, c.says)
			}
		})
	}
}

// What kernels do write passes: the conditionals, macros (stringizing
// too), allowed pragmas, the file-naming words inside strings, comments
// and raw strings, and every exercise's starter, solution and slips.
func TestCheckSourceAllowsKernels(t *testing.T) {
	for _, src := range []string{
		"#define TILE 16\n#if TILE > 8\n#pragma unroll\n#endif\n",
		"#define STR(x) #x\nconst char *s = STR(include);\n",
		"// a comment may hold any character: × é 😀 $ @\n/* # see above */\n",
		"const char *s = \"a string: × # ok\";\n",
		"const char *r = R\"tag(\n# not a directive\n)tag\";\n",
		"#pragma unroll 4\n#pragma GCC unroll 8\n#pragma nv_diagnostic push\n#pragma nv_diag_suppress 177\n#pragma nv_diagnostic pop\n#pragma STDC FP_CONTRACT OFF\n",
		"#if defined(FS_BR) && FS_BR > 16\n#elif !defined(X)\n#endif\n",
		"int x = 1; // a line that ends in a backslash joins the next\\\nint y = 2;\n",
		"char c = '#'; int n = 0x1'000'000;\n",
		"#pragma nv_diag_suppress 177\n#ifdef FS_BR\n#undef X\n#else\n#error no\n#endif\n",
		"float x = 1e-5f + 2.5e+3;\n",
		"#\n",
	} {
		if err := CheckSource(src); err != nil {
			t.Errorf("CheckSource(%q) = %v, want nil", src, err)
		}
	}
	for _, e := range All() {
		if e.Track != TrackKernel {
			continue
		}
		for name, src := range map[string]string{"starter": e.Starter, "solution": e.Solution} {
			if err := CheckSource(src); err != nil {
				t.Errorf("%s's %s is refused: %v", e.ID, name, err)
			}
		}
		for name, src := range e.Slips {
			if err := CheckSource(src); err != nil {
				t.Errorf("%s's slip %s is refused: %v", e.ID, name, err)
			}
		}
	}
}

// FuzzCheckSource: no source makes the check panic, and a source it
// passes holds no file-naming word after a #, whatever it is inside.
func FuzzCheckSource(f *testing.F) {
	for _, seed := range []string{"#include \"x\"\n", "R\"(\n", "#/*", "/*#", "%:%:", "??=include", "a\\\nb", "'#'", "\"\\\"#\"", "R\"a(b)a\""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if CheckSource(src) == nil && strings.Contains(strings.ReplaceAll(strings.ReplaceAll(src, " ", ""), "\\\n", ""), "#include") {
			t.Errorf("passed a source holding #include: %q", src)
		}
	})
}
