package lessons_test

import "testing"

// TestClosingCheckAsksFromEveryLesson: the closing check asks at least one
// question from every lesson before it (its revisit names the lesson), and
// each of its questions is graded against a run, as the lessons' are.
func TestClosingCheckAsksFromEveryLesson(t *testing.T) {
	t.Parallel()
	c := course(t)
	check, ok := c.Lesson("check")
	if !ok {
		t.Fatal("the course has no closing check (slug check)")
	}
	asked := map[string]int{}
	for _, cp := range check.Checkpoints {
		if cp.Revisit == "" {
			t.Errorf("check/%s names no lesson to revisit", cp.ID)
		}
		asked[cp.Revisit]++
		if cp.Preset == "" && cp.NeedsTrace() {
			t.Errorf("check/%s reads a trace but names no run", cp.ID)
		}
	}
	for _, l := range c.Lessons {
		if l.Order < check.Order && asked[l.Slug] == 0 {
			t.Errorf("the closing check asks nothing from lesson %d (%s)", l.Order, l.Slug)
		}
	}
}
