package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"flashstep/lab"
	"flashstep/labrun"
	"flashstep/labrun/labruntest"
	"flashstep/ladder"
	"flashstep/recordings"
	"flashstep/runner"
)

// TestMain makes this test binary the lab's stand-in worker when the
// kernel track starts it (labruntest).
func TestMain(m *testing.M) {
	if labruntest.IsFake() {
		os.Exit(labruntest.Fake())
	}
	os.Exit(m.Run())
}

// TestRecordedPlacementUsesTheLadder: a kernel exercise's recorded verdict
// keeps its solution's time, and sets it among the rungs' figures as
// /ladder shows them today, naming their source and why the float32 rungs
// trail a lab kernel.
func TestRecordedPlacementUsesTheLadder(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	tab, err := ladder.Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for k, shape := range tab.Shapes {
		if shape.D == 64 && !shape.Causal {
			for _, row := range tab.Rows {
				want[row.Rung.Name] = row.Cells[k].TFLOPs
			}
		}
	}
	for _, e := range lab.All() {
		if e.Recorded == nil || e.CausalFlag {
			continue
		}
		res, body := get(t, ts.URL+"/lab/"+e.ID+"/recorded.json")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", e.ID, res.StatusCode, body)
		}
		var rec labrun.Recording
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatal(err)
		}
		var stored labrun.Recording
		json.Unmarshal(e.Recorded, &stored)
		p := rec.Verdict.Placed
		if p == nil || p.TFLOPs != stored.Verdict.Placed.TFLOPs || !strings.Contains(p.Source, "ladder-h100.json") || !strings.Contains(p.FloatRungs, "FMA") {
			t.Fatalf("%s: placement %+v", e.ID, p)
		}
		seen := 0
		for _, r := range p.Rungs {
			if !r.Yours {
				seen++
				if r.TFLOPs != want[r.Name] {
					t.Errorf("%s: rung %s at %.1f, the ladder says %.1f", e.ID, r.Name, r.TFLOPs, want[r.Name])
				}
			}
		}
		measured := 0 // a rung newer than the bench's recording has no figure to place beside
		for _, row := range tab.Rows {
			if !row.Unmeasured {
				measured++
			}
		}
		if seen != measured || len(rec.Verdict.Steps) != len(stored.Verdict.Steps) {
			t.Errorf("%s: %d rungs of %d, %d steps of %d", e.ID, seen, measured, len(rec.Verdict.Steps), len(stored.Verdict.Steps))
		}
	}
}

// TestLabPagesCountTheExercises: each exercise's page says its place among
// all of them, and the index how many there are and which run where, from
// the exercises themselves (a seventh once read "7 of 6").
func TestLabPagesCountTheExercises(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	all := lab.All()
	for _, e := range all {
		_, body := get(t, ts.URL+"/lab/"+e.ID)
		if want := fmt.Sprintf("exercise %d of %d</p>", e.Number, len(all)); !strings.Contains(string(body), want) {
			t.Errorf("/lab/%s does not say %q", e.ID, want)
		}
	}
	_, body := get(t, ts.URL+"/lab")
	var js []string
	for _, e := range all {
		if e.Track == lab.TrackLoop {
			js = append(js, strconv.Itoa(e.Number))
		}
	}
	for _, want := range []string{"Seven exercises", "Exercises " + strings.Join(js[:len(js)-1], ", ") + " and " + js[len(js)-1] + " are JavaScript"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/lab does not say %q", want)
		}
	}
}
