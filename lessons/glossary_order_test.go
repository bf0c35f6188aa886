package lessons_test

import (
	"fmt"
	"strings"
	"testing"

	"flashstep/kernels"
	"flashstep/lessons"
)

// TestGlossaryInTheOrderYouMeetIt: the glossary page promises its words
// "in the order you meet them, lesson by lesson", each beside the lesson
// that teaches it; so the entries run by their lesson's order, never back.
func TestGlossaryInTheOrderYouMeetIt(t *testing.T) {
	t.Parallel()
	c := course(t)
	last, lastID := 0, ""
	for _, term := range lessons.Glossary {
		l, ok := c.Lesson(term.Lesson)
		if !ok {
			t.Errorf("glossary %s: no lesson %q", term.ID, term.Lesson)
			continue
		}
		if l.Order < last {
			t.Errorf("glossary %s (lesson %d) comes after %s (lesson %d): the page promises the order you meet them, lesson by lesson", term.ID, l.Order, lastID, last)
		}
		last, lastID = l.Order, term.ID
	}
}

// TestGlossaryLadderIsTheWholeLadder: the "ladder" entry names the ladder
// as it stands: its top rung's number, the Hopper rungs and the backward.
func TestGlossaryLadderIsTheWholeLadder(t *testing.T) {
	t.Parallel()
	term, ok := lessons.GlossaryTerm("rung")
	if !ok {
		t.Fatal("the glossary has no rung entry")
	}
	top := 0
	for _, r := range kernels.Ladder {
		if r.Built {
			top = max(top, r.Number)
		}
	}
	for _, want := range []string{fmt.Sprintf("%d", top), "Hopper", "backward"} {
		if !strings.Contains(term.Meaning, want) {
			t.Errorf("the ladder's entry %q does not say %q: the ladder climbs to rung %d and has a backward pass", term.Meaning, want, top)
		}
	}
}
