package lab

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"flashstep/kernels"
)

// A student's kernel is compiled by NVRTC, which reads any file a
// preprocessing directive names: `#include "/proc/self/environ"` quotes
// the compiling process's environment in its error messages. The harness
// already includes what a kernel needs, so a source that could name a
// file is refused before it reaches the GPU machine, however it is
// spelled. The check reads the source as the preprocessor's first phases
// do (line splices joined, comments as spaces, string and character
// literals skipped, digraphs and trigraphs as the punctuators they spell)
// and refuses, naming the line:
//
//   - a directive other than define, undef, the conditionals, error,
//     warning and an allowed pragma (include, include_next, import, line,
//     embed, ident, a pragma such as GCC dependency, …);
//   - the operators that test for a file (__has_include, __has_embed) and
//     _Pragma, anywhere;
//   - token pasting (##), which could assemble one of those names where no
//     reader sees it whole;
//   - universal character names outside literals, which could spell one;
//   - a NUL byte or bytes that are not UTF-8.
//
// Where the reading is in doubt the check errs towards refusing: a `#`
// in the middle of a line followed by a file-naming name is refused too.
// It is the first wall, not the only one: the process that compiles the
// kernel is confined as well (package sandbox).

// allowedDirectives are the directives a kernel may use.
var allowedDirectives = map[string]bool{
	"define": true, "undef": true, "if": true, "ifdef": true, "ifndef": true, "elif": true,
	"elifdef": true, "elifndef": true, "else": true, "endif": true, "error": true, "warning": true,
	"pragma": true,
}

// allowedPragmas are the pragmas a kernel may use: loop unrolling, and
// the compiler's diagnostics switched on or off.
var allowedPragmas = map[string]bool{
	"unroll": true, "nounroll": true, "once": true, "GCC unroll": true, "GCC ivdep": true, "message": true,
	"STDC FP_CONTRACT": true, "STDC FENV_ACCESS": true, "STDC CX_LIMITED_RANGE": true,
	"nv_diagnostic": true, "hd_warning_disable": true, "nv_exec_check_disable": true,
	"nv_diag_suppress": true, "nv_diag_warning": true, "nv_diag_error": true, "nv_diag_default": true,
	"nv_diag_once": true, "diag_suppress": true, "diag_warning": true, "diag_error": true, "diag_default": true,
}

// fileNamingNames are refused after a `#` wherever it stands, and the
// operators among them (those starting __ or _P) anywhere.
var fileNamingNames = map[string]bool{
	"include": true, "include_next": true, "import": true, "line": true, "embed": true,
	"ident": true, "sccs": true, "assert": true, "unassert": true,
}

var fileOperators = map[string]bool{
	"__has_include": true, "__has_include_next": true, "__has_embed": true, "_Pragma": true, "__pragma": true,
}

// noFilesHint is what every refusal adds, in the student's words.
const noFilesHint = "everything your kernel needs is already included"

// CheckSource refuses a kernel-track source holding anything that could
// make the compiler read or name a file: a *kernels.FieldErrors on field
// "source" that names the line, or nil.
func CheckSource(src string) error {
	if line, what := findFileNaming(src); what != "" {
		return kernels.FieldErrors{{Field: "source", Message: fmt.Sprintf("line %d: %s", line, what)}}
	}
	return nil
}

// srcChar is one character of the source after line splices are joined,
// with the physical line it stood on.
type srcChar struct {
	c    rune
	line int
}

// spliced reads src as translation phases 1 and 2 do: CRLF as a newline,
// each backslash-newline removed and, with trigraphs, ??= as # and so on.
// C++17 dropped trigraphs, but a compiler may still honour them, and a
// reading with them and one without can each hide what the other sees
// (??) may close a raw string for one and not the other): the check reads
// the source both ways.
func spliced(src string, trigraphs bool) []srcChar {
	var out []srcChar
	line := 1
	for k := 0; k < len(src); {
		r, size := utf8.DecodeRuneInString(src[k:])
		if trigraphs && r == '?' && k+2 < len(src) && src[k+1] == '?' {
			if t, ok := trigraphOf[src[k+2]]; ok {
				r, size = t, 3
			}
		}
		if r == '\r' && k+1 < len(src) && src[k+1] == '\n' {
			r, size = '\n', 2
		}
		out = append(out, srcChar{r, line})
		if r == '\n' {
			line++
		}
		k += size
	}
	// Remove backslash-newline pairs. (A backslash, spaces, then a
	// newline is a splice to GCC and not to NVRTC: such a source is
	// refused before it gets here.)
	joined := out[:0:0]
	for k := 0; k < len(out); k++ {
		if out[k].c == '\\' && k+1 < len(out) && out[k+1].c == '\n' {
			k++
			continue
		}
		joined = append(joined, out[k])
	}
	return joined
}

var trigraphOf = map[byte]rune{'=': '#', '/': '\\', '\'': '^', '(': '[', ')': ']', '!': '|', '<': '{', '>': '}', '-': '~'}

// findFileNaming is the first thing in src that could name a file: its
// line and what to tell the student, or "" when there is none.
func findFileNaming(src string) (int, string) {
	if !utf8.ValidString(src) {
		return firstBadByteLine(src), "the source must be UTF-8 text"
	}
	// A carriage return alone is a newline to some compilers and a space
	// to others, which would let a literal end where this check does not
	// see it end.
	if k := strings.IndexByte(strings.ReplaceAll(src, "\r\n", "\n\n"), '\r'); k >= 0 {
		return strings.Count(src[:k], "\n") + 1, "a carriage return outside a line ending: save the file with ordinary line endings"
	}
	if m := spaceSplice.FindStringIndex(src); m != nil {
		return strings.Count(src[:m[0]], "\n") + 1, "a backslash followed by spaces at the end of a line: delete the spaces (one compiler joins the lines, another does not)"
	}
	readings := [][]srcChar{spliced(src, false), spliced(src, true)}
	for _, s := range readings {
		if line, what := scanForFiles(s); what != "" {
			return line, what
		}
	}
	// The backstop: whatever the scan took for a comment or a literal, a
	// directive's name after a # anywhere, in the text as written and as
	// each reading joins it, is refused.
	for _, s := range append(readings, plain(src)) {
		if line, what := anywhere(s); what != "" {
			return line, what
		}
	}
	return 0, ""
}

// spaceSplice is a backslash, then spaces or tabs, then a line's end
// (trigraph ??/ as well).
var spaceSplice = regexp.MustCompile(`(\\|\?\?/)[ \t\f\v]+\r?\n`)

// plain is src as written, each character with its line.
func plain(src string) []srcChar {
	out := make([]srcChar, 0, len(src))
	line := 1
	for _, r := range src {
		out = append(out, srcChar{r, line})
		if r == '\n' {
			line++
		}
	}
	return out
}

// anywhere finds, ignoring comments and literals, a # (or %:) followed,
// past spaces, block comments and line splices, by a file-naming
// directive's name or a pragma not allowed; the operators that test for a
// file or make a pragma; and token pasting. It reads each character once.
func anywhere(s []srcChar) (int, string) {
	at := func(k int) rune {
		if k < len(s) {
			return s[k].c
		}
		return 0
	}
	word := func(k int) (string, int) {
		j := k
		for j < len(s) && isIdentChar(s[j].c) {
			j++
		}
		var b strings.Builder
		for _, c := range s[k:j] {
			b.WriteRune(c.c)
		}
		return b.String(), j
	}
	// closeAfter[k] is where the first */ at or after k starts (len(s)
	// if none): a comment is skipped in one step, so a source of many
	// unclosed comments costs no more than one.
	closeAfter := make([]int, len(s)+2)
	closeAfter[len(s)], closeAfter[len(s)+1] = len(s), len(s)
	for k := len(s) - 1; k >= 0; k-- {
		closeAfter[k] = closeAfter[k+1]
		if s[k].c == '*' && at(k+1) == '/' {
			closeAfter[k] = k
		}
	}
	gap := func(k int) int {
		for k < len(s) {
			switch {
			case s[k].c == ' ' || s[k].c == '\t' || s[k].c == '\f' || s[k].c == '\v':
				k++
			case s[k].c == '\\' && at(k+1) == '\n':
				k += 2
			case s[k].c == '/' && at(k+1) == '*':
				k = min(closeAfter[k+2]+2, len(s))
			default:
				return k
			}
		}
		return k
	}
	for k := 0; k < len(s); k++ {
		c := s[k].c
		switch {
		case c == '#' && at(k+1) == '#', c == '%' && at(k+1) == ':' && at(k+2) == '%' && at(k+3) == ':':
			return s[k].line, "## (token pasting) is not available in the lab: it can build a name this check cannot read; write the name whole"
		case c == '#' || c == '%' && at(k+1) == ':':
			j := k + 1
			if c == '%' {
				j++
			}
			name, end := word(gap(j))
			if fileNamingNames[name] {
				return s[k].line, fmt.Sprintf("#%s is not available in the lab (in a comment or a string too): %s", name, noFilesHint)
			}
			if name == "pragma" {
				if p := pragmaName(word, gap, end); !allowedPragmas[p] {
					return s[k].line, fmt.Sprintf("#pragma %s is not available in the lab: only #pragma unroll (and the compiler's diagnostic pragmas) are; %s", p, noFilesHint)
				}
			}
		case isIdentChar(c) && (k == 0 || !isIdentChar(s[k-1].c)):
			name, end := word(k)
			if fileOperators[name] {
				return s[k].line, fmt.Sprintf("%s is not available in the lab (in a comment or a string too): %s", name, noFilesHint)
			}
			k = end - 1
		}
	}
	return 0, ""
}

// pragmaName is the pragma after "#pragma" (ending at end): its first
// word, or its first two for the families of GCC and STDC.
func pragmaName(word func(int) (string, int), gap func(int) int, end int) string {
	p, pend := word(gap(end))
	if p == "GCC" || p == "STDC" {
		q, _ := word(gap(pend))
		return p + " " + q
	}
	return p
}

// isIdentChar is a character of an identifier as this check reads one:
// ASCII letters, digits and the underscore. Any other character outside
// comments and literals is refused, so no compiler can read a longer
// identifier than the check does.
func isIdentChar(r rune) bool {
	return r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
}

// scanForFiles reads one spliced reading of a source for file-naming
// directives and operators.
func scanForFiles(s []srcChar) (int, string) {
	at := func(k int) rune {
		if k < len(s) {
			return s[k].c
		}
		return 0
	}
	isIdent := isIdentChar
	// skipSpace moves past spaces and comments on the same logical line;
	// a block comment may span lines (and so may hide a line start).
	skipSpace := func(k int) int {
		for k < len(s) {
			switch {
			case s[k].c == ' ' || s[k].c == '\t' || s[k].c == '\f' || s[k].c == '\v':
				k++
			case s[k].c == '/' && at(k+1) == '*':
				k += 2
				for k < len(s) && !(s[k].c == '*' && at(k+1) == '/') {
					k++
				}
				k = min(k+2, len(s))
			case s[k].c == '/' && at(k+1) == '/':
				for k < len(s) && s[k].c != '\n' {
					k++
				}
			default:
				return k
			}
		}
		return k
	}
	ident := func(k int) (string, int) {
		j := k
		for j < len(s) && isIdent(s[j].c) {
			j++
		}
		var b strings.Builder
		for _, c := range s[k:j] {
			b.WriteRune(c.c)
		}
		return b.String(), j
	}
	lineStart := true
	for k := 0; k < len(s); {
		c := s[k]
		switch {
		case c.c == 0:
			return c.line, "the source holds a NUL byte"
		case c.c == '\n':
			lineStart = true
			k++
		case c.c == ' ' || c.c == '\t' || c.c == '\f' || c.c == '\v' || (c.c == '/' && (at(k+1) == '*' || at(k+1) == '/')):
			k = skipSpace(k)
		case c.c == '#' && at(k+1) == '#', c.c == '%' && at(k+1) == ':' && at(k+2) == '%' && at(k+3) == ':':
			return c.line, "## (token pasting) is not available in the lab: it can build a name this check cannot read; write the name whole"
		case c.c == '#' || (c.c == '%' && at(k+1) == ':'):
			if c.c == '%' {
				k++
			}
			j := skipSpace(k + 1)
			name, end := ident(j)
			if lineStart {
				switch {
				case name == "" || allowedDirectives[name] && name != "pragma":
				case name == "pragma":
					if p := pragmaName(ident, skipSpace, end); !allowedPragmas[p] {
						return c.line, fmt.Sprintf("#pragma %s is not available in the lab: only #pragma unroll (and the compiler's diagnostic pragmas) are; %s", p, noFilesHint)
					}
				case '0' <= rune(name[0]) && rune(name[0]) <= '9':
					return c.line, fmt.Sprintf("# %s is a line marker, which names a file: it is not available in the lab; %s", name, noFilesHint)
				default:
					return c.line, fmt.Sprintf("#%s is not available in the lab: %s", name, noFilesHint)
				}
			} else if fileNamingNames[name] {
				return c.line, fmt.Sprintf("#%s is not available in the lab: %s", name, noFilesHint)
			} else if name == "pragma" {
				// Not a directive where it stands, unless a compiler counts a
				// block comment's newline as a line start: held to the same list.
				if p := pragmaName(ident, skipSpace, end); !allowedPragmas[p] {
					return c.line, fmt.Sprintf("#pragma %s is not available in the lab: only #pragma unroll (and the compiler's diagnostic pragmas) are; %s", p, noFilesHint)
				}
			}
			lineStart = false
			k = max(end, k+1)
		case c.c == '\\' && (at(k+1) == 'u' || at(k+1) == 'U'):
			return c.line, "a universal character name (\\u or \\U) outside a string is not available in the lab: write the name in plain letters"
		case isIdent(c.c) && !('0' <= c.c && c.c <= '9'):
			name, end := ident(k)
			if fileOperators[name] {
				return c.line, fmt.Sprintf("%s is not available in the lab: %s", name, noFilesHint)
			}
			lineStart = false
			// A raw string's prefix is a whole token: R, LR, uR, UR, u8R.
			if at(end) == '"' && (name == "R" || name == "LR" || name == "uR" || name == "UR" || name == "u8R") {
				skip, ok := rawStringEnd(s, end)
				if !ok {
					return c.line, "a raw string literal whose delimiter is malformed or that never closes: write it as R\"(…)\" with a plain delimiter"
				}
				k = skip
				continue
			}
			k = end
		case '0' <= c.c && c.c <= '9':
			// A number, digit separators (1'000) and exponents (1e+5) too.
			j := k + 1
			for j < len(s) && (isIdent(s[j].c) || s[j].c == '.' || s[j].c == '\'' && isIdent(at(j+1)) ||
				(s[j].c == '+' || s[j].c == '-') && strings.ContainsRune("eEpP", s[j-1].c)) {
				j++
			}
			lineStart = false
			k = j
		case c.c == '"' || c.c == '\'':
			// A literal ends at its closing quote or, unterminated, at the
			// line's end, as the compiler reads it.
			j := k + 1
			for j < len(s) && s[j].c != c.c && s[j].c != '\n' {
				if s[j].c == '\\' {
					j++
				}
				j++
			}
			lineStart = false
			k = min(j+1, len(s))
			if j < len(s) && s[j].c == '\n' {
				k = j
			}
		case c.c >= 0x80 || c.c == '$' || c.c == '@' || c.c == '`':
			return c.line, fmt.Sprintf("the character %q is only available in comments and strings in the lab", c.c)
		default:
			lineStart = false
			k++
		}
	}
	return 0, ""
}

// rawStringEnd is the index past the raw string literal whose opening
// quote is at q (R"delim( … )delim"), and whether it is one: a delimiter
// of at most 16 characters without spaces, parentheses or backslashes. A
// malformed one is not skipped: its text is read as code, which can only
// refuse more.
func rawStringEnd(s []srcChar, q int) (int, bool) {
	j := q + 1
	var delim []rune
	for j < len(s) && s[j].c != '(' {
		if c := s[j].c; c == ' ' || c == ')' || c == '\\' || c == '\n' || c == '\t' || len(delim) >= 16 {
			return 0, false
		}
		delim = append(delim, s[j].c)
		j++
	}
	if j >= len(s) {
		return 0, false
	}
	close := append(append([]rune{')'}, delim...), '"')
	for k := j + 1; k+len(close) <= len(s); k++ {
		match := true
		for n, c := range close {
			if s[k+n].c != c {
				match = false
				break
			}
		}
		if match {
			return k + len(close), true
		}
	}
	return 0, false
}

func firstBadByteLine(src string) int {
	line := 1
	for k := 0; k < len(src); {
		r, size := utf8.DecodeRuneInString(src[k:])
		if r == utf8.RuneError && size == 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		k += size
	}
	return line
}
