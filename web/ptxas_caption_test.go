package web

import (
	"strings"
	"testing"

	"flashstep/runner"
)

// TestPtxasCaptionNamesTheTarget: a lesson's table of ptxas figures says
// what the kernels were compiled for: sm_90a for the Hopper rungs (lesson
// 12's table), sm_90 for the ladder below them (lesson 9's), never sm_90
// alone over sm_90a kernels.
func TestPtxasCaptionNamesTheTarget(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	for _, c := range []struct {
		lesson, widget string
		want, not      string
	}{
		{"hopper", "hopper-kernels", "compiled for sm_90a", "sm_90 (the H100)"},
		{"registers", "kernel-figures", "compiled for sm_90 (the H100)", "sm_90a"},
	} {
		res, body := get(t, ts.URL+"/lessons/"+c.lesson)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", c.lesson, res.StatusCode)
		}
		fig := findNode(parse(t, body), "id", c.widget)
		if fig == nil {
			t.Fatalf("%s: no widget %s", c.lesson, c.widget)
		}
		note := findNode(fig, "data-testid", "ptxas-target")
		if note == nil {
			t.Fatalf("%s: widget %s has no ptxas caption", c.lesson, c.widget)
		}
		s := strings.Join(strings.Fields(text(note)), " ")
		if !strings.Contains(s, c.want) || strings.Contains(s, c.not) {
			t.Errorf("%s's ptxas caption reads %q; want %q and not %q", c.lesson, s, c.want, c.not)
		}
	}
}
