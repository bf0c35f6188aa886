// Package recordings holds traces recorded on a GPU and shipped for replay
// on machines without one: the runs of the home page and the lessons, and a
// timeline of a whole grid. list.txt names each run; `gpuworker record`
// (docs/GPU.md) makes the files.
package recordings

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Entry is one line of list.txt: a recording's name and its run's URL form.
type Entry struct {
	Name  string
	Query string
}

// ParseList reads list.txt: lines of "name query", blank lines and lines
// starting with # aside.
func ParseList(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, query, ok := strings.Cut(line, " ")
		if !ok || name == "" {
			return nil, fmt.Errorf("list line %d: want a name and a query", n)
		}
		out = append(out, Entry{Name: name, Query: strings.TrimSpace(query)})
	}
	return out, sc.Err()
}
