package lessons

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// The Markdown dialect: CommonMark with GitHub's tables, plus two things
// goldmark does not know, handled around it:
//
//   - math: $…$ inline and $$…$$ as a paragraph of its own, typeset by
//     KaTeX. Math is lifted out before goldmark sees it (so that _ and *
//     inside a formula stay TeX), put back as <span class="math"> holding
//     the TeX as text, and last replaced by KaTeX's HTML (maths.go).
//   - directives: a line "::: kind key=value …" opens a block that a line
//     ":::" closes; the lines between are Markdown (a widget's caption, a
//     checkpoint's question, a reveal's text). Each becomes a Part of its
//     own. "::: reveal after=ID" holds text that discusses checkpoint ID's
//     answer: the page shows it once the checkpoint is answered or given up.
//
// Placeholders are plain letters and digits so that no Markdown rule touches
// them.
var md = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Typographer),
	goldmark.WithParserOptions(parser.WithAutoHeadingID()),
)

var (
	reMathToken  = regexp.MustCompile(`FSMATH(\d+)Z`)
	reBlockToken = regexp.MustCompile(`<p>FSBLOCK(\d+)Z</p>\n?`)
	reDirective  = regexp.MustCompile(`^:::\s+([a-z-]+)\s*(.*)$`)
)

// render fills l's body, table of contents, widgets and checkpoints.
func render(l *Lesson, body string) error {
	type block struct {
		kind, attrs, body string
		line              int
	}
	var blocks []block
	var out strings.Builder
	lines := strings.Split(body, "\n")
	fence := ""
	for n := 0; n < len(lines); n++ {
		line := lines[n]
		if f := fenceOf(line); f != "" && (fence == "" || strings.HasPrefix(strings.TrimSpace(line), fence)) {
			if fence == "" {
				fence = f
			} else {
				fence = ""
			}
		}
		m := reDirective.FindStringSubmatch(line)
		if fence != "" || m == nil {
			out.WriteString(line + "\n")
			continue
		}
		start := n
		var inner []string
		for n++; n < len(lines) && strings.TrimSpace(lines[n]) != ":::"; n++ {
			inner = append(inner, lines[n])
		}
		if n == len(lines) {
			return fmt.Errorf("line %d: directive %q is not closed by a line :::", start+1, m[1])
		}
		fmt.Fprintf(&out, "\nFSBLOCK%dZ\n\n", len(blocks))
		blocks = append(blocks, block{m[1], m[2], strings.Join(inner, "\n"), start + 1})
	}
	if fence != "" {
		return fmt.Errorf("a code fence %s is not closed", fence)
	}

	doc, sections, err := markdownToHTML(out.String(), true)
	if err != nil {
		return err
	}
	l.Sections = sections
	ids := map[string]string{}
	for _, s := range sections {
		ids[s.ID] = "section"
	}
	// Split the page at each block's placeholder paragraph.
	var reveals []string
	rest := doc
	for {
		loc := reBlockToken.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		if loc[0] > 0 {
			l.Parts = append(l.Parts, Part{HTML: rest[:loc[0]]})
		}
		k, _ := strconv.Atoi(rest[loc[2]:loc[3]])
		b := blocks[k]
		inner, _, err := markdownToHTML(b.body, false)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", b.line, b.kind, err)
		}
		attrs, err := parseAttrs(b.attrs)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", b.line, b.kind, err)
		}
		var id string
		if b.kind == "reveal" {
			after := attrs["after"]
			if len(attrs) != 1 || after == "" {
				return fmt.Errorf("line %d: reveal: needs after=CHECKPOINT and nothing else", b.line)
			}
			l.Parts = append(l.Parts, Part{Reveal: &Reveal{After: after, HTML: inner}})
			reveals = append(reveals, after)
			rest = rest[loc[1]:]
			continue
		} else if b.kind == "checkpoint" {
			c, err := newCheckpoint(l, attrs, inner)
			if err != nil {
				return fmt.Errorf("line %d: checkpoint: %w", b.line, err)
			}
			l.Checkpoints = append(l.Checkpoints, c)
			l.Parts = append(l.Parts, Part{Checkpoint: c})
			id = c.ID
		} else {
			w, err := newWidget(b.kind, attrs, inner)
			if err != nil {
				return fmt.Errorf("line %d: %w", b.line, err)
			}
			l.Widgets = append(l.Widgets, w)
			l.Parts = append(l.Parts, Part{Widget: w})
			id = w.ID
		}
		if what, dup := ids[id]; dup {
			return fmt.Errorf("line %d: id %q is already a %s's", b.line, id, what)
		}
		ids[id] = b.kind
		rest = rest[loc[1]:]
	}
	if strings.TrimSpace(rest) != "" {
		l.Parts = append(l.Parts, Part{HTML: rest})
	}
	// A checkpoint about a widget must name one on this page; a reveal, a
	// checkpoint before it.
	for _, c := range l.Checkpoints {
		if c.Widget != "" && ids[c.Widget] == "" {
			return fmt.Errorf("checkpoint %s: widget %q is not on this page", c.ID, c.Widget)
		}
		for _, w := range l.Widgets {
			if w.ID == c.Widget {
				w.AskedBy = append(w.AskedBy, c.ID)
				if h, ok := holdFor(w, c); ok {
					w.Holds = append(w.Holds, h)
				}
			} else if h, ok := holdFor(w, c); ok && h.Of != "" {
				// A backward run's answer is a few steps on in every
				// stepper of that run on the page: each holds it.
				w.AskedBy = append(w.AskedBy, c.ID)
				w.Holds = append(w.Holds, h)
			}
		}
	}
	for _, after := range reveals {
		if ids[after] != "checkpoint" {
			return fmt.Errorf("reveal after=%q: no checkpoint of that id comes before it", after)
		}
	}
	// The first mention of each glossary term in the prose links to it.
	seen := map[string]bool{}
	for k := range l.Parts {
		if l.Parts[k].HTML != "" {
			l.Parts[k].HTML = linkTerms(l.Parts[k].HTML, seen)
		}
	}
	for k := range l.Parts {
		p := &l.Parts[k]
		p.HTML = typesetMath(p.HTML)
		if p.Reveal != nil {
			p.Reveal.HTML = typesetMath(p.Reveal.HTML)
		}
		if p.Widget != nil {
			p.Widget.Caption = typesetMath(p.Widget.Caption)
		}
		if p.Checkpoint != nil {
			p.Checkpoint.Question = typesetMath(p.Checkpoint.Question)
		}
	}
	return nil
}

// RenderDocument renders a plain Markdown document (a worklog of docs/,
// with tables, no math, no directives) to HTML.
func RenderDocument(src []byte) (string, error) {
	var out bytes.Buffer
	if err := md.Convert(src, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

// fenceOf is the fence a line opens or closes (``` or ~~~), or "".
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, f) {
			return f
		}
	}
	return ""
}

// markdownToHTML renders Markdown with math. With toc it lists the
// second-level headings; headings may not hold math (their anchors and the
// table of contents are plain text).
func markdownToHTML(src string, toc bool) (string, []Section, error) {
	protected, maths, err := liftMath(src)
	if err != nil {
		return "", nil, err
	}
	source := []byte(protected)
	doc := md.Parser().Parse(text.NewReader(source))
	var sections []Section
	var walkErr error
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if h, ok := n.(*ast.Heading); ok {
			title := plainText(h, source)
			if reMathToken.MatchString(title) {
				walkErr = fmt.Errorf("heading %q holds math; keep headings plain", title)
			}
			if h.Level == 1 {
				walkErr = fmt.Errorf("heading %q: the page's title is the lesson's; start at ##", title)
			}
			if toc && h.Level == 2 {
				id, _ := h.AttributeString("id")
				idb, _ := id.([]byte)
				sections = append(sections, Section{ID: string(idb), Title: title})
			}
		}
		return ast.WalkContinue, nil
	})
	if walkErr != nil {
		return "", nil, walkErr
	}
	var buf bytes.Buffer
	if err := md.Renderer().Render(&buf, source, doc); err != nil {
		return "", nil, err
	}
	out := buf.String()
	// Display math sits in a paragraph of its own.
	out = regexp.MustCompile(`<p>(FSMATH\d+Z)</p>`).ReplaceAllStringFunc(out, func(s string) string {
		k, _ := strconv.Atoi(reMathToken.FindStringSubmatch(s)[1])
		if maths[k].display {
			return `<div class="math display">` + html.EscapeString(maths[k].tex) + `</div>`
		}
		return s
	})
	var missing error
	out = reMathToken.ReplaceAllStringFunc(out, func(s string) string {
		k, _ := strconv.Atoi(reMathToken.FindStringSubmatch(s)[1])
		if maths[k].display {
			missing = fmt.Errorf("$$%s$$ must be a paragraph of its own", maths[k].tex)
		}
		return `<span class="math">` + html.EscapeString(maths[k].tex) + `</span>`
	})
	return out, sections, missing
}

func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch t := c.(type) {
			case *ast.Text:
				b.Write(t.Segment.Value(src))
			case *ast.String:
				// The typographer's quotes and dashes arrive as HTML entities.
				b.WriteString(html.UnescapeString(string(t.Value)))
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

type mathSpan struct {
	tex     string
	display bool
}

// liftMath replaces each formula outside code by a placeholder. A $ that
// is not math is written \$. A formula must close on its line, except
// $$ … $$, which may span lines.
func liftMath(src string) (string, []mathSpan, error) {
	var out strings.Builder
	var maths []mathSpan
	fence := ""
	lines := strings.Split(src, "\n")
	for n := 0; n < len(lines); n++ {
		line := lines[n]
		if f := fenceOf(line); f != "" && (fence == "" || strings.HasPrefix(strings.TrimSpace(line), fence)) {
			if fence == "" {
				fence = f
			} else {
				fence = ""
			}
		}
		if fence != "" || fenceOf(line) != "" {
			out.WriteString(line + "\n")
			continue
		}
		// Display math opening a line may run over several lines.
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "$$") {
			joined := t[2:]
			for !strings.Contains(joined, "$$") && n+1 < len(lines) {
				n++
				joined += "\n" + lines[n]
			}
			tex, after, ok := strings.Cut(joined, "$$")
			if !ok {
				return "", nil, fmt.Errorf("$$ is not closed")
			}
			if strings.TrimSpace(after) != "" {
				return "", nil, fmt.Errorf("text after $$…$$ on its line: %q", after)
			}
			fmt.Fprintf(&out, "FSMATH%dZ\n", len(maths))
			maths = append(maths, mathSpan{strings.TrimSpace(tex), true})
			continue
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case c == '\\' && i+1 < len(line):
				out.WriteByte(c)
				out.WriteByte(line[i+1])
				i++
			case c == '`':
				// A code span: copy it whole, up to the same run of backticks.
				run := 1
				for i+run < len(line) && line[i+run] == '`' {
					run++
				}
				ticks := strings.Repeat("`", run)
				end := strings.Index(line[i+run:], ticks)
				if end < 0 {
					out.WriteString(line[i:])
					i = len(line)
					break
				}
				out.WriteString(line[i : i+run+end+run])
				i += run + end + run - 1
			case c == '$':
				if strings.HasPrefix(line[i:], "$$") {
					return "", nil, fmt.Errorf("$$ inside a line: display math is a paragraph of its own")
				}
				end := strings.IndexByte(line[i+1:], '$')
				if end <= 0 {
					return "", nil, fmt.Errorf("unclosed $ in %q (write \\$ for a dollar sign)", line)
				}
				fmt.Fprintf(&out, "FSMATH%dZ", len(maths))
				maths = append(maths, mathSpan{line[i+1 : i+1+end], false})
				i += end + 1
			default:
				out.WriteByte(c)
			}
		}
		out.WriteByte('\n')
	}
	return out.String(), maths, nil
}

// parseAttrs reads key=value pairs, a value quoted with "" when it holds
// spaces.
func parseAttrs(s string) (map[string]string, error) {
	attrs := map[string]string{}
	s = strings.TrimSpace(s)
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("want key=value, got %q", s)
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("%s: unclosed quote", key)
			}
			val, rest = rest[1:1+end], rest[2+end:]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
		}
		if _, dup := attrs[key]; dup {
			return nil, fmt.Errorf("%s given twice", key)
		}
		attrs[key] = val
		s = strings.TrimSpace(rest)
	}
	return attrs, nil
}
