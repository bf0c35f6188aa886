package lessons

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CourseFiles are the lesson texts, one Markdown file per lesson.
//
//go:embed course/*.md
var CourseFiles embed.FS

// Lesson is one lesson of the course, parsed and rendered.
type Lesson struct {
	Slug          string
	Title         string
	Order         int
	Summary       string
	Learn         []string // "what you will learn"
	Recap         []string // "in short": what the lesson established, closing it
	Prerequisites []string
	TryNext       []TryLink

	Parts       []Part    // the body in order: HTML between widgets and checkpoints
	Sections    []Section // the table of contents: every second-level heading
	Widgets     []*Widget
	Checkpoints []*Checkpoint
}

// TryLink is one "try this next" link into the stepper at the end of a lesson.
type TryLink struct {
	Text   string
	Preset string
	Href   string
}

// Section is a second-level heading and its anchor.
type Section struct {
	ID, Title string
}

// Part is one piece of a lesson's body: exactly one field is set.
type Part struct {
	HTML       string
	Widget     *Widget
	Checkpoint *Checkpoint
	Reveal     *Reveal
}

// Reveal is text about a checkpoint's answer, shown once the checkpoint is
// answered or given up: before, it would give the answer away.
type Reveal struct {
	After string // the checkpoint's id
	HTML  string
}

// Number is a checkpoint's place among the lesson's checkpoints, from 1.
func (l *Lesson) Number(c *Checkpoint) int {
	for k, x := range l.Checkpoints {
		if x == c {
			return k + 1
		}
	}
	return 0
}

// Checkpoint finds a lesson's checkpoint by id.
func (l *Lesson) Checkpoint(id string) (*Checkpoint, bool) {
	for _, c := range l.Checkpoints {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

// Course is every lesson in order.
type Course struct {
	Lessons []*Lesson
	bySlug  map[string]*Lesson
}

// Lesson finds a lesson by its slug.
func (c *Course) Lesson(slug string) (*Lesson, bool) {
	l, ok := c.bySlug[slug]
	return l, ok
}

// Neighbours are the lessons before and after l (nil at either end).
func (c *Course) Neighbours(l *Lesson) (prev, next *Lesson) {
	for i, x := range c.Lessons {
		if x == l {
			if i > 0 {
				prev = c.Lessons[i-1]
			}
			if i+1 < len(c.Lessons) {
				next = c.Lessons[i+1]
			}
		}
	}
	return prev, next
}

// Default is the embedded course, parsed once. An error here is a broken
// lesson file, which the package's tests catch before any student sees it.
var Default = sync.OnceValues(func() (*Course, error) { return Load(CourseFiles) })

// Load parses every course/*.md of fsys into a course ordered by each
// lesson's order field. Every problem of every file is reported.
func Load(fsys fs.FS) (*Course, error) {
	names, err := fs.Glob(fsys, "course/*.md")
	if err != nil {
		return nil, err
	}
	c := &Course{bySlug: map[string]*Lesson{}}
	var errs []string
	orders := map[int]string{}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		l, err := parseLesson(string(src))
		if err != nil {
			errs = append(errs, path.Base(name)+": "+err.Error())
			continue
		}
		if other, dup := c.bySlug[l.Slug]; dup {
			errs = append(errs, fmt.Sprintf("%s: slug %q is also lesson %q's", path.Base(name), l.Slug, other.Title))
			continue
		}
		if other, dup := orders[l.Order]; dup {
			errs = append(errs, fmt.Sprintf("%s: order %d is also %q's", path.Base(name), l.Order, other))
			continue
		}
		orders[l.Order] = l.Title
		for _, w := range l.Widgets {
			w.Taught = l.Order
		}
		c.bySlug[l.Slug] = l
		c.Lessons = append(c.Lessons, l)
	}
	for _, l := range c.Lessons {
		for _, cp := range l.Checkpoints {
			if r, ok := c.bySlug[cp.Revisit]; cp.Revisit != "" && (!ok || r.Order >= l.Order) {
				errs = append(errs, fmt.Sprintf("%s: checkpoint %s: revisit=%q names no earlier lesson", l.Slug, cp.ID, cp.Revisit))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("lessons: %s", strings.Join(errs, "\n"))
	}
	sort.Slice(c.Lessons, func(i, j int) bool { return c.Lessons[i].Order < c.Lessons[j].Order })
	return c, nil
}

// LoadLesson parses the one lesson of fsys (course/*.md) whose slug is
// slug, reading of the others only their front matter: how the static
// site's WebAssembly grades a checkpoint without rendering every lesson
// and reading every figure's recording. It checks nothing across lessons;
// Load, which the tests run, does.
func LoadLesson(fsys fs.FS, slug string) (*Lesson, error) {
	names, err := fs.Glob(fsys, "course/*.md")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		fm, _, err := splitFrontMatter(string(src))
		if err != nil || len(fm["slug"]) == 0 || strings.TrimSpace(fm["slug"][0]) != slug {
			continue
		}
		l, err := parseLesson(string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(name), err)
		}
		for _, w := range l.Widgets {
			w.Taught = l.Order
		}
		return l, nil
	}
	return nil, fmt.Errorf("no lesson %q", slug)
}

// parseLesson reads the front matter, then renders the body.
func parseLesson(src string) (*Lesson, error) {
	fm, body, err := splitFrontMatter(src)
	if err != nil {
		return nil, err
	}
	l := &Lesson{}
	for key, vals := range fm {
		one := func() (string, error) {
			if len(vals) != 1 || vals[0] == "" {
				return "", fmt.Errorf("front matter %q needs one value", key)
			}
			return vals[0], nil
		}
		var v string
		switch key {
		case "title":
			v, err = one()
			l.Title = v
		case "slug":
			v, err = one()
			l.Slug = v
		case "summary":
			v, err = one()
			l.Summary = v
		case "order":
			if v, err = one(); err == nil {
				l.Order, err = strconv.Atoi(v)
			}
		case "learn":
			l.Learn = vals
		case "recap":
			l.Recap = vals
		case "prerequisites":
			l.Prerequisites = vals
		case "try":
			for _, t := range vals {
				name, text, ok := strings.Cut(t, "|")
				name, text = strings.TrimSpace(name), strings.TrimSpace(text)
				p, known := Runs[name]
				if !ok || text == "" || !known {
					return nil, fmt.Errorf("try %q: want `preset | text` with a known preset (%s)", t, strings.Join(RunNames(), ", "))
				}
				l.TryNext = append(l.TryNext, TryLink{Text: text, Preset: name, Href: "/step?" + p.Query})
			}
		default:
			err = fmt.Errorf("unknown front matter field %q (title, slug, order, summary, learn, recap, prerequisites, try)", key)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case l.Title == "" || l.Slug == "" || l.Summary == "":
		return nil, fmt.Errorf("front matter needs title, slug and summary")
	case l.Order < 1:
		return nil, fmt.Errorf("front matter order must be a positive whole number")
	case !validID(l.Slug):
		return nil, fmt.Errorf("slug %q: use lower-case letters, digits and hyphens", l.Slug)
	case len(l.Learn) == 0:
		return nil, fmt.Errorf("front matter needs a learn list")
	case len(l.TryNext) == 0:
		return nil, fmt.Errorf("front matter needs at least one try link")
	}
	if body, err = fillFigures(body); err != nil {
		return nil, err
	}
	if err := render(l, body); err != nil {
		return nil, err
	}
	return l, nil
}

// splitFrontMatter reads the block between the first two "---" lines: lines
// "key: value", or "key:" followed by "  - item" lines. It is the small
// subset of YAML the lessons use, no more.
func splitFrontMatter(src string) (map[string][]string, string, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	if !strings.HasPrefix(src, "---\n") {
		return nil, "", fmt.Errorf("no front matter: the file must start with a line ---")
	}
	head, body, ok := strings.Cut(src[4:], "\n---\n")
	if !ok {
		return nil, "", fmt.Errorf("front matter is not closed by a line ---")
	}
	fm := map[string][]string{}
	var list string
	for n, line := range strings.Split(head, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case strings.HasPrefix(trimmed, "- "):
			if list == "" {
				return nil, "", fmt.Errorf("front matter line %d: a list item outside a list", n+2)
			}
			fm[list] = append(fm[list], strings.TrimSpace(trimmed[2:]))
		default:
			key, val, ok := strings.Cut(trimmed, ":")
			if !ok {
				return nil, "", fmt.Errorf("front matter line %d: want key: value", n+2)
			}
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			if _, dup := fm[key]; dup {
				return nil, "", fmt.Errorf("front matter line %d: %q given twice", n+2, key)
			}
			if val == "" {
				list = key
				fm[key] = nil
			} else {
				list = ""
				fm[key] = []string{val}
			}
		}
	}
	return fm, body, nil
}

func validID(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
