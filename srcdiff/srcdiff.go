// Package srcdiff compares two texts line by line, as `diff -u` does: a
// longest common subsequence of the lines, the edits around it grouped into
// hunks with a few lines of context, each line numbered on both sides.
//
// It is meant for source files of a few hundred lines (the ladder page's
// kernels): the subsequence is found by the textbook O(n·m) table, after the
// lines both texts begin and end with are set aside.
package srcdiff

import (
	"fmt"
	"strings"
)

// Op is what a line of a diff does.
type Op byte

const (
	Equal  Op = ' ' // in both texts
	Delete Op = '-' // only in the old text, A
	Insert Op = '+' // only in the new text, B
)

// Line is one line of a hunk. A and B are its line numbers in the old and
// the new text, from 1; a line not in a text has 0 there.
type Line struct {
	Op   Op
	Text string
	A, B int
}

// Hunk is a run of edits with the unchanged lines around them.
type Hunk struct {
	// AStart, ALen and BStart, BLen are the header's ranges, as diff -u
	// writes them: the first line of the hunk in each text and how many of
	// its lines are in that text. A side with no lines in the hunk starts at
	// the line before it (0 at the top of the text).
	AStart, ALen int
	BStart, BLen int
	Lines        []Line
}

// Header is the hunk's "@@ -a,b +c,d @@" line.
func (h Hunk) Header() string {
	return fmt.Sprintf("@@ -%s +%s @@", hunkRange(h.AStart, h.ALen), hunkRange(h.BStart, h.BLen))
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// Edits is the whole edit script from a to b: every line of both, in
// order, each once; the deleted lines of a change come before the inserted.
// Its Equal lines are a longest common subsequence of a and b.
func Edits(a, b []string) []Line {
	// The lines both begin and end with match as they stand.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]Line, 0, len(a)+len(b)-pre-suf)
	for k := 0; k < pre; k++ {
		out = append(out, Line{Equal, a[k], k + 1, k + 1})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	// lcs[i*(m+1)+j] is the length of a longest common subsequence of
	// ma[i:] and mb[j:].
	w := m + 1
	lcs := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case ma[i] == mb[j]:
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
				lcs[i*w+j] = lcs[(i+1)*w+j]
			default:
				lcs[i*w+j] = lcs[i*w+j+1]
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && ma[i] == mb[j]:
			out = append(out, Line{Equal, ma[i], pre + i + 1, pre + j + 1})
			i++
			j++
		case j == m || (i < n && lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			// Deleting a[i] keeps the subsequence as long: delete first.
			out = append(out, Line{Delete, ma[i], pre + i + 1, 0})
			i++
		default:
			out = append(out, Line{Insert, mb[j], 0, pre + j + 1})
			j++
		}
	}
	for k := 0; k < suf; k++ {
		out = append(out, Line{Equal, a[len(a)-suf+k], len(a) - suf + k + 1, len(b) - suf + k + 1})
	}
	return out
}

// Hunks diffs a against b and groups the edits into hunks with context
// unchanged lines either side; edits closer than 2·context lines share a
// hunk. Identical texts give none.
func Hunks(a, b []string, context int) []Hunk {
	if context < 0 {
		context = 0
	}
	edits := Edits(a, b)
	var hunks []Hunk
	for k := 0; k < len(edits); {
		if edits[k].Op == Equal {
			k++
			continue
		}
		// A change at k: the hunk runs from context lines before it to
		// context lines after the last change no further than 2·context
		// unchanged lines from the one before.
		first := max(0, k-context)
		last := k // the last changed line of the hunk
		for e := k + 1; e < len(edits); e++ {
			if edits[e].Op != Equal {
				last = e
			} else if e-last > 2*context {
				break
			}
		}
		end := min(len(edits), last+context+1)
		hunks = append(hunks, makeHunk(edits, first, end))
		k = end
	}
	return hunks
}

// makeHunk builds the hunk of edits[first:end].
func makeHunk(edits []Line, first, end int) Hunk {
	h := Hunk{Lines: edits[first:end:end]}
	// The lines before the hunk in each text.
	for _, l := range edits[:first] {
		if l.Op != Insert {
			h.AStart++
		}
		if l.Op != Delete {
			h.BStart++
		}
	}
	for _, l := range h.Lines {
		if l.Op != Insert {
			h.ALen++
		}
		if l.Op != Delete {
			h.BLen++
		}
	}
	if h.ALen > 0 {
		h.AStart++
	}
	if h.BLen > 0 {
		h.BStart++
	}
	return h
}

// Count is how many lines the hunks add and remove.
func Count(hunks []Hunk) (added, removed int) {
	for _, h := range hunks {
		for _, l := range h.Lines {
			switch l.Op {
			case Insert:
				added++
			case Delete:
				removed++
			}
		}
	}
	return added, removed
}

// Unified writes the hunks as diff -u does, under "--- aName" and
// "+++ bName"; nothing when there are no hunks.
func Unified(aName, bName string, hunks []Hunk) string {
	if len(hunks) == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hunks {
		s.WriteString(h.Header())
		s.WriteByte('\n')
		for _, l := range h.Lines {
			s.WriteByte(byte(l.Op))
			s.WriteString(l.Text)
			s.WriteByte('\n')
		}
	}
	return s.String()
}
