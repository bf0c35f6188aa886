package web

import (
	"net/url"
	"strings"
	"testing"

	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/runner"
)

// TestLadderRunsAreRecorded: the ladder page offers every built rung, and
// naive_mma, a run to step through, and each is a recording made on the GPU
// (so it steps without one), of that rung's kernel.
func TestLadderRunsAreRecorded(t *testing.T) {
	t.Parallel()
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	unmeasured := map[string]bool{} // newer than the GPU's recordings: stepped on the mirror until then
	for _, row := range tab.Rows {
		unmeasured[row.Rung.Name] = row.Unmeasured
	}
	rungs := append([]kernels.Rung{kernels.NaiveMMA}, kernels.Ladder...)
	for _, r := range rungs {
		if !r.Built || unmeasured[r.Name] {
			continue
		}
		link, ok := ladderRuns()[r.Name]
		if !ok {
			t.Errorf("rung %s has no run to step through", r.Name)
			continue
		}
		q, _ := strings.CutPrefix(link, "/step?")
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kernels.ParseConfig(v)
		if err != nil {
			t.Fatalf("%s: %v", link, err)
		}
		if c.Variant != r.Variant {
			t.Errorf("%s: the run is of %s", r.Name, c.Variant)
		}
		if _, ok := recs.Find(&c); !ok {
			t.Errorf("%s: %s is not recorded", r.Name, link)
		}
	}
}
