package srcdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"flashstep/internal/testrand"
)

// apply plays the hunks' edits on a, checking every context and deleted
// line against a, every header against the lines, and every line number.
func apply(a []string, hunks []Hunk) ([]string, error) {
	var out []string
	i := 0 // the next line of a to copy
	for k, h := range hunks {
		start := h.AStart // lines of a before the hunk
		if h.ALen > 0 {
			start--
		}
		if start < i || start > len(a) {
			return nil, fmt.Errorf("hunk %d (%s) starts at line %d of a, after line %d", k, h.Header(), start, i)
		}
		out = append(out, a[i:start]...)
		i = start
		bBefore := h.BStart
		if h.BLen > 0 {
			bBefore--
		}
		if bBefore != len(out) {
			return nil, fmt.Errorf("hunk %d (%s) starts after line %d of b, not %d", k, h.Header(), bBefore, len(out))
		}
		var na, nb int
		for _, l := range h.Lines {
			switch l.Op {
			case Equal, Delete:
				if i >= len(a) || a[i] != l.Text || l.A != i+1 {
					return nil, fmt.Errorf("hunk %d: %c%q numbered %d is not line %d of a", k, l.Op, l.Text, l.A, i+1)
				}
				if l.Op == Equal {
					out = append(out, l.Text)
					if l.B != len(out) {
						return nil, fmt.Errorf("hunk %d: %q numbered %d in b, is line %d", k, l.Text, l.B, len(out))
					}
					nb++
				} else if l.B != 0 {
					return nil, fmt.Errorf("hunk %d: deleted %q has b line %d", k, l.Text, l.B)
				}
				i++
				na++
			case Insert:
				out = append(out, l.Text)
				if l.B != len(out) || l.A != 0 {
					return nil, fmt.Errorf("hunk %d: inserted %q numbered %d/%d, is line %d of b", k, l.Text, l.A, l.B, len(out))
				}
				nb++
			default:
				return nil, fmt.Errorf("hunk %d: op %q", k, l.Op)
			}
		}
		if na != h.ALen || nb != h.BLen {
			return nil, fmt.Errorf("hunk %d (%s) has %d lines of a and %d of b", k, h.Header(), na, nb)
		}
	}
	return append(out, a[i:]...), nil
}

// lcsLen is the length of a longest common subsequence, the slow way.
func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

func randomLines(r *rand.Rand, n, alphabet int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = string(rune('a' + r.IntN(alphabet)))
	}
	return out
}

// mutate edits a copy of a: lines deleted, inserted and changed.
func mutate(r *rand.Rand, a []string, alphabet int) []string {
	b := slices.Clone(a)
	for range r.IntN(6) {
		switch k := r.IntN(len(b) + 1); r.IntN(3) {
		case 0:
			if k < len(b) {
				b = slices.Delete(b, k, min(len(b), k+1+r.IntN(3)))
			}
		case 1:
			b = slices.Insert(b, k, randomLines(r, 1+r.IntN(4), alphabet)...)
		default:
			if k < len(b) {
				b[k] = "changed"
			}
		}
	}
	return b
}

// TestHunksApply: on random texts, related and not, applying the hunks to
// a gives b exactly, the edit script is a longest common subsequence, and
// hunks are apart by more than twice the context.
func TestHunksApply(t *testing.T) {
	t.Parallel()
	r := testrand.New(t)
	for trial := range 3000 {
		alphabet := 2 + r.IntN(6)
		a := randomLines(r, r.IntN(40), alphabet)
		var b []string
		if trial%2 == 0 {
			b = mutate(r, a, alphabet)
		} else {
			b = randomLines(r, r.IntN(40), alphabet)
		}
		context := r.IntN(5)
		hunks := Hunks(a, b, context)
		got, err := apply(a, hunks)
		if err != nil || !slices.Equal(got, b) {
			t.Fatalf("trial %d, context %d: a %q, b %q: got %q, %v\n%s", trial, context, a, b, got, err, Unified("a", "b", hunks))
		}
		equal := 0
		for _, l := range Edits(a, b) {
			if l.Op == Equal {
				equal++
			}
		}
		if want := lcsLen(a, b); equal != want {
			t.Fatalf("trial %d: %d lines kept, a longest common subsequence has %d: a %q, b %q", trial, equal, want, a, b)
		}
		added, removed := Count(hunks)
		if added != len(b)-equal || removed != len(a)-equal {
			t.Fatalf("trial %d: +%d -%d for %d, %d lines and %d kept", trial, added, removed, len(a), len(b), equal)
		}
		for k, h := range hunks {
			// Exactly context unchanged lines each side, fewer only at an
			// end of the texts.
			lead, trail := 0, 0
			for lead < len(h.Lines) && h.Lines[lead].Op == Equal {
				lead++
			}
			for trail < len(h.Lines) && h.Lines[len(h.Lines)-1-trail].Op == Equal {
				trail++
			}
			lastLine := func(start, n int) int { return start + max(n-1, 0) }
			atTop := h.AStart <= 1 && h.BStart <= 1
			atEnd := lastLine(h.AStart, h.ALen) == len(a) && lastLine(h.BStart, h.BLen) == len(b)
			if lead == len(h.Lines) || lead > context || trail > context || (lead < context && !atTop) || (trail < context && !atEnd) {
				t.Fatalf("trial %d, context %d: hunk %d has %d lines of context before and %d after:\n%s", trial, context, k, lead, trail, Unified("a", "b", hunks))
			}
			if k > 0 {
				prevEnd := hunks[k-1].AStart + hunks[k-1].ALen // the line after the previous hunk
				if hunks[k-1].ALen == 0 {
					prevEnd++
				}
				start := h.AStart
				if h.ALen == 0 {
					start++
				}
				if start-prevEnd < 1 {
					t.Fatalf("trial %d: hunks %d and %d touch (%s, %s)", trial, k-1, k, hunks[k-1].Header(), h.Header())
				}
			}
		}
	}
}

func TestIdenticalHaveNoHunks(t *testing.T) {
	t.Parallel()
	for _, a := range [][]string{nil, {""}, {"x"}, strings.Split("a\nb\nc\nb\na", "\n")} {
		if h := Hunks(a, slices.Clone(a), 3); len(h) != 0 {
			t.Errorf("%q against itself: %v", a, h)
		}
		if Unified("a", "b", nil) != "" {
			t.Errorf("no hunks write something")
		}
	}
}

// TestKnownCase is what GNU diff -u writes for the same two files.
func TestKnownCase(t *testing.T) {
	t.Parallel()
	a := strings.Fields("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20")
	b := strings.Fields("0 1 2 3 4 5 6 7 8 9 ten 11 12 13 14 15 16 17 18 20 21")
	want := `--- a
+++ b
@@ -1,3 +1,4 @@
+0
 1
 2
 3
@@ -7,7 +8,7 @@
 7
 8
 9
-10
+ten
 11
 12
 13
@@ -16,5 +17,5 @@
 16
 17
 18
-19
 20
+21
`
	if got := Unified("a", "b", Hunks(a, b, 3)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if h := Hunks(a, b, 2); len(h) != 3 || h[0].Header() != "@@ -1,2 +1,3 @@" || h[1].Header() != "@@ -8,5 +9,5 @@" || h[2].Header() != "@@ -17,4 +18,4 @@" {
		t.Errorf("context 2: %s", Unified("a", "b", h))
	}
	// Eight unchanged lines between the last two changes: four lines of
	// context join them, five join all three.
	if h := Hunks(a, b, 4); len(h) != 2 {
		t.Errorf("context 4: %s", Unified("a", "b", h))
	}
	if h := Hunks(a, b, 5); len(h) != 1 || h[0].Header() != "@@ -1,20 +1,21 @@" {
		t.Errorf("context 5: %s", Unified("a", "b", h))
	}
	// From nothing, and to nothing.
	if got := Unified("a", "b", Hunks(nil, []string{"x", "y"}, 3)); got != "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n" {
		t.Errorf("from nothing:\n%s", got)
	}
	if got := Unified("a", "b", Hunks([]string{"x"}, nil, 3)); got != "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n" {
		t.Errorf("to nothing:\n%s", got)
	}
}
