// Package lab owns the lab's exercises: what each asks a student to write,
// the code the student starts from, the hints, a solution held back until
// asked for, the classic slips its tests hold it to, and the kernel run a
// student's work is compared with. The pages (package web) serve them; the
// loop track grades in the browser against the kernel's trace
// (static/js/lab.js).
//
// An exercise is a folder of exercises/, numbered for its place in the
// sequence ("03-naive-kernel"): exercise.md (a header of "key: value"
// lines, a line "---", then the statement in Markdown, and a "## Hints"
// section whose paragraphs are the hints, in order), starter.<ext>,
// solution.<ext>, for the loop track grade.js (its grader, an ES module
// the page imports), for the kernel track recorded.json (its solution's
// verdict from a GPU) and, for the tests, slips/*.<ext>. Adding an exercise
// adds a folder.
package lab

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"flashstep/kernels"
)

//go:embed exercises
var files embed.FS

// Tracks: the loop track runs in the browser (JavaScript, in a Web Worker),
// the kernel track on the GPU (CUDA C, compiled at run time).
const (
	TrackLoop   = "loop"
	TrackKernel = "kernel"
)

// Exercise is one step of the lab.
type Exercise struct {
	Number int
	ID     string // the folder's name without its number: the URL's
	Title  string
	Track  string
	Lang   string // "js" or "cuda": the editor's language, the files' extension
	// Entry is the function the student writes (the loop track calls it).
	Entry string
	// Run is the kernel run the student's work is compared with, tile by
	// tile. A passing answer is then held to a float64 reference on random
	// shapes the page draws (ragged, causal, several heads), not shown
	// before the verdict.
	Run kernels.Config
	// CausalFlag: the kernel track's kernel takes the causal flag (its
	// signature ends with int causal), and hidden runs mask and don't.
	CausalFlag bool
	// Practises names the lesson (its slug) the exercise practises.
	Practises string
	// Statement and Hints are HTML, rendered from the Markdown.
	Statement string
	Hints     []string
	Starter   string
	Solution  string
	// Slips are wrong answers the tests hold the grader to, by name
	// ("no-alpha-on-o"): each a classic mistake.
	Slips map[string]string
	// Grader is the loop track's grade.js: the module the page imports to
	// build its calls from the kernel's trace and hold the answers to it.
	Grader string
	// Recorded is a kernel exercise's recorded.json: its solution's
	// verdict as the server answered it on a GPU (where, when, how, and
	// the verdict with every record), which a page without the kernel
	// track steps instead. Raw JSON; package labrun's tests hold its
	// records to the reference kernel's.
	Recorded []byte
}

// All is every exercise, in order.
func All() []*Exercise { return exercises }

// ByID finds an exercise.
func ByID(id string) (*Exercise, bool) {
	for _, e := range exercises {
		if e.ID == id {
			return e, true
		}
	}
	return nil, false
}

// Next is the exercise after e, if any.
func (e *Exercise) Next() *Exercise {
	if e.Number < len(exercises) {
		return exercises[e.Number]
	}
	return nil
}

var exercises = mustLoad()

//go:embed harness.md
var harnessDoc string

// HarnessDoc is, in HTML, what a kernel-track exercise's kernel gets from
// the harness: its signature, grid, constants and record functions.
var HarnessDoc = func() string {
	h, err := render(harnessDoc)
	if err != nil {
		panic(err)
	}
	return h
}()

func mustLoad() []*Exercise {
	out, err := load(files)
	if err != nil {
		panic(err)
	}
	return out
}

var md = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Typographer))

func load(fsys fs.FS) ([]*Exercise, error) {
	dirs, err := fs.ReadDir(fsys, "exercises")
	if err != nil {
		return nil, err
	}
	var out []*Exercise
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		e, err := loadOne(fsys, path.Join("exercises", d.Name()))
		if err != nil {
			return nil, fmt.Errorf("lab exercise %s: %w", d.Name(), err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Number < out[b].Number })
	for k, e := range out {
		if e.Number != k+1 {
			return nil, fmt.Errorf("lab exercise %s is number %d, want %d: the folders number the sequence", e.ID, e.Number, k+1)
		}
	}
	return out, nil
}

func loadOne(fsys fs.FS, dir string) (*Exercise, error) {
	num, id, ok := strings.Cut(path.Base(dir), "-")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("the folder's name must be NN-id")
	}
	e := &Exercise{Number: n, ID: id, Slips: map[string]string{}}
	text, err := fs.ReadFile(fsys, path.Join(dir, "exercise.md"))
	if err != nil {
		return nil, err
	}
	head, body, ok := strings.Cut(string(text), "\n---\n")
	if !ok {
		return nil, fmt.Errorf("exercise.md has no header (key: value lines, then ---)")
	}
	for _, line := range strings.Split(head, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("header line %q is not key: value", line)
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "title":
			e.Title = v
		case "track":
			e.Track = v
		case "lang":
			e.Lang = v
		case "entry":
			e.Entry = v
		case "run":
			if e.Run, err = parseRun(v); err != nil {
				return nil, fmt.Errorf("run: %w", err)
			}
		case "practises":
			e.Practises = v
		case "causal-flag":
			e.CausalFlag = v == "yes"
		default:
			return nil, fmt.Errorf("unknown header key %q", k)
		}
	}
	switch {
	case e.Title == "":
		return nil, fmt.Errorf("no title")
	case e.Track != TrackLoop && e.Track != TrackKernel:
		return nil, fmt.Errorf("track must be %s or %s", TrackLoop, TrackKernel)
	case e.Lang != "js" && e.Lang != "cuda":
		return nil, fmt.Errorf("lang must be js or cuda")
	case e.Entry == "":
		return nil, fmt.Errorf("no entry: the function the student writes")
	}
	statement, hints, _ := strings.Cut(body, "\n## Hints\n")
	if e.Statement, err = render(statement); err != nil {
		return nil, err
	}
	for _, p := range strings.Split(strings.TrimSpace(hints), "\n\n") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		h, err := render(p)
		if err != nil {
			return nil, err
		}
		e.Hints = append(e.Hints, h)
	}
	if len(e.Hints) == 0 {
		return nil, fmt.Errorf("no hints")
	}
	ext := map[string]string{"js": ".js", "cuda": ".cu"}[e.Lang]
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(fsys, path.Join(dir, name+ext))
		return string(b), err
	}
	if e.Starter, err = read("starter"); err != nil {
		return nil, err
	}
	if e.Solution, err = read("solution"); err != nil {
		return nil, err
	}
	if e.Track == TrackLoop {
		g, err := fs.ReadFile(fsys, path.Join(dir, "grade.js"))
		if err != nil {
			return nil, fmt.Errorf("a loop exercise needs its grade.js: %w", err)
		}
		e.Grader = string(g)
	}
	if e.Track == TrackKernel {
		if e.Recorded, err = fs.ReadFile(fsys, path.Join(dir, "recorded.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	slips, _ := fs.ReadDir(fsys, path.Join(dir, "slips"))
	for _, s := range slips {
		if name, ok := strings.CutSuffix(s.Name(), ext); ok {
			if e.Slips[name], err = read(path.Join("slips", name)); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// parseRun reads a run in the stepper's URL form; it must be valid.
func parseRun(q string) (kernels.Config, error) {
	v, err := url.ParseQuery(q)
	if err != nil {
		return kernels.Config{}, err
	}
	return kernels.ParseConfig(v)
}

func render(src string) (string, error) {
	var b bytes.Buffer
	if err := md.Convert([]byte(src), &b); err != nil {
		return "", err
	}
	return b.String(), nil
}
