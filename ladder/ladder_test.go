package ladder

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/kernels"
	"flashstep/recordings"
)

// TestBuildFromRecordings: every built rung has a figure on every shape, its
// ratio is its TFLOP/s over SDPA's from the same recording, and a rung
// slower than the one below says so exactly where it is.
func TestBuildFromRecordings(t *testing.T) {
	t.Parallel()
	tab, err := Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	var built []kernels.Rung
	for _, r := range kernels.Ladder {
		if r.Built {
			built = append(built, r)
		}
	}
	if len(tab.Rows) != len(built) || len(tab.Recordings) != 2 {
		t.Fatalf("%d rows for %d built rungs, %d recordings", len(tab.Rows), len(built), len(tab.Recordings))
	}
	for k, row := range tab.Rows {
		if row.Rung.Name != built[k].Name || len(row.Cells) != len(Shapes) || row.Source == "" || len(row.Kernels) == 0 {
			t.Fatalf("row %d: %+v", k, row)
		}
		if row.Unmeasured {
			// A rung newer than the recording: no cell, one note saying so.
			if benchHas(tab.Bench, row.Rung.Bench) || len(row.Notes) != 1 || !strings.Contains(row.Notes[0], "not measured yet") {
				t.Errorf("%s: unmeasured, but the recording has it or the note is %q", row.Rung.Name, row.Notes)
			}
			for s, c := range row.Cells {
				if !c.Missing {
					t.Errorf("%s on %+v: unmeasured but has %+v", row.Rung.Name, Shapes[s], c)
				}
			}
			continue
		}
		for s, c := range row.Cells {
			if c.Missing || !(c.TFLOPs > 0) || !(c.SDPAFlash > 0) || math.Abs(c.Ratio-c.TFLOPs/c.SDPAFlash) > 1e-12 {
				t.Errorf("%s on %+v: %+v", row.Rung.Name, Shapes[s], c)
			}
		}
		var want int
		if k > 0 {
			for s := range Shapes {
				if row.Cells[s].TFLOPs < tab.Rows[k-1].Cells[s].TFLOPs {
					want++
				}
			}
		}
		if len(row.Notes) != want {
			t.Errorf("%s: %d notes, %d shapes slower than the rung below: %v", row.Rung.Name, len(row.Notes), want, row.Notes)
		}
	}
	for s, c := range tab.Partner.Cells {
		if c.Missing || !(c.TFLOPs > 0) {
			t.Errorf("naive_mma on %+v: %+v", Shapes[s], c)
		}
	}
}

// TestSlowerRungIsNamed builds a table from a bench recording in which the
// fast rung loses to the float32 one on one shape: the note names it.
func TestSlowerRungIsNamed(t *testing.T) {
	t.Parallel()
	raw, err := recordings.Files.ReadFile("ladder-h100.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	json.Unmarshal(raw, &rec)
	for _, r := range rec["rows"].([]any) {
		row := r.(map[string]any)
		if strings.HasPrefix(row["kernel"].(string), "flash2_fast") && row["d"].(float64) == 128 && row["causal"] == true {
			row["tflops"] = 0.5
		}
	}
	doctored, _ := json.Marshal(rec)
	files := fstest.MapFS{"ladder-h100.json": {Data: doctored}}
	for _, name := range []string{"sweep-h100.json", "sdpa-h100.json"} {
		b, _ := recordings.Files.ReadFile(name)
		files[name] = &fstest.MapFile{Data: b}
	}
	tab, err := Build(files)
	if err != nil {
		t.Fatal(err)
	}
	var fast Row
	for _, r := range tab.Rows {
		if r.Rung.Name == "flash2_fast" {
			fast = r
		}
	}
	if fast.Rung.Name != "flash2_fast" || len(fast.Notes) != 1 || !strings.Contains(fast.Notes[0], "d=128, causal") || !strings.Contains(fast.Notes[0], "0.5 against") {
		t.Fatalf("notes: %v", fast.Notes)
	}
	// A kernel that failed its check is no figure.
	broken := strings.Replace(string(raw), `"check": "ok"`, `"check": "FAIL"`, 1)
	files["ladder-h100.json"] = &fstest.MapFile{Data: []byte(broken)}
	if _, err := Build(files); err == nil || !strings.Contains(err.Error(), "did not pass its check") {
		t.Fatalf("a failed kernel's figure was accepted: %v", err)
	}
}

// TestRungSixIdeas: the shipped bench recording measures each of rung 6's
// ideas apart; each cell is the control's figure and the rung's over it;
// skipping causal tiles has no plain shape; and no control is taken for the
// rung's own figure, even listed before it.
func TestRungSixIdeas(t *testing.T) {
	t.Parallel()
	tab, err := Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	if tab.IdeasOf.Name != "flash2_fast" || len(tab.Ideas) != len(rung6Ideas) {
		t.Fatalf("ideas of %q: %d, want flash2_fast's %d", tab.IdeasOf.Name, len(tab.Ideas), len(rung6Ideas))
	}
	var rung []Cell
	for _, r := range tab.Rows {
		if r.Rung.Name == "flash2_fast" {
			rung = r.Cells
		}
	}
	for k, idea := range tab.Ideas {
		for s, c := range idea.Without {
			noPlain := rung6Ideas[k].mark == "_noskip" && !Shapes[s].Causal
			if c.Missing != noPlain {
				t.Errorf("%s on %+v: missing %v", idea.What, Shapes[s], c.Missing)
				continue
			}
			if c.Missing {
				continue
			}
			if !strings.Contains(c.Kernel, rung6Ideas[k].mark) || math.Abs(idea.Worth[s]-rung[s].TFLOPs/c.TFLOPs) > 1e-12 || !(idea.Worth[s] > 1) {
				t.Errorf("%s on %+v: %+v, worth %v (rung %v)", idea.What, Shapes[s], c, idea.Worth[s], rung[s].TFLOPs)
			}
		}
	}
	for _, c := range rung {
		if withoutIdea(c.Kernel) {
			t.Errorf("rung 6's figure is a control's: %s", c.Kernel)
		}
	}
	// A recording that lists the controls first.
	rec := *tab.Bench
	rec.Rows = append(rec.Rows[:0:0], rec.Rows...)
	for i, j := 0, len(rec.Rows)-1; i < j; i, j = i+1, j-1 {
		rec.Rows[i], rec.Rows[j] = rec.Rows[j], rec.Rows[i]
	}
	cells, _ := benchCells(&rec, "flash2_fast")
	for s, c := range cells {
		if c.Kernel != rung[s].Kernel {
			t.Errorf("reversed recording, %+v: rung 6's figure from %s, want %s", Shapes[s], c.Kernel, rung[s].Kernel)
		}
	}
}
