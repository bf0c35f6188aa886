package ladder

import (
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/recordings"
)

// TestBackwardRecording: the shipped backward bench parses with its
// provenance, every row passed its check, has a positive time and speed on
// the table's N, and both SDPA backends' figures; each row's name says
// its backward rung and its shape.
func TestBackwardRecording(t *testing.T) {
	t.Parallel()
	tab, err := Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	rec := tab.Backward
	if rec == nil {
		t.Fatal("no backward recording ships (recordings/backward-*.json)")
	}
	if rec.GPU == "" || rec.Date == "" || rec.Command == "" || rec.KernelSha == "" || rec.PTXSha == "" || len(rec.Rows) == 0 {
		t.Fatalf("provenance missing: %+v", rec)
	}
	seen := map[string]bool{}
	for _, r := range rec.Rows {
		if seen[r.Kernel] {
			t.Errorf("%s recorded twice", r.Kernel)
		}
		seen[r.Kernel] = true
		if r.Check != "ok" || !(r.Ms > 0) || !(r.TFLOPs > 0) || r.N != N {
			t.Errorf("%s: check %q, %v ms, %v TFLOP/s, N=%d", r.Kernel, r.Check, r.Ms, r.TFLOPs, r.N)
		}
		if r.SDPAFlash == nil || !(*r.SDPAFlash > 0) || r.SDPACuDNN == nil || !(*r.SDPACuDNN > 0) {
			t.Errorf("%s: SDPA's figures flash %v, cuDNN %v", r.Kernel, r.SDPAFlash, r.SDPACuDNN)
		}
		shape := "_d" + map[int]string{64: "64", 128: "128"}[r.D]
		if r.Causal {
			shape += "_causal"
		}
		if !backwardRung(r.Kernel) || !strings.HasSuffix(r.Kernel, shape) {
			t.Errorf("%s is named for another shape than d=%d, causal %v", r.Kernel, r.D, r.Causal)
		}
		if got, err := rec.Row(r.Kernel); err != nil || got.Kernel != r.Kernel {
			t.Errorf("Row(%q) = %+v, %v", r.Kernel, got, err)
		}
	}
	if _, err := rec.Row("flash2_bwd_mma_bc32_d64"); err == nil || !strings.Contains(err.Error(), `no kernel "flash2_bwd_mma_bc32_d64"`) || !strings.Contains(err.Error(), rec.Rows[0].Kernel) {
		t.Errorf("a kernel the recording does not hold: %v", err)
	}
	var none *BackwardRecord
	if _, err := none.Row(rec.Rows[0].Kernel); err == nil || !strings.Contains(err.Error(), "no backward bench recording ships") {
		t.Errorf("no recording: %v", err)
	}
}

// backwardRung reports whether a bench row's kernel is a backward rung of
// the registry at one of its tiles (name_bcBC_…).
func backwardRung(kernel string) bool {
	for _, v := range instrument.Variants {
		if kernels.Info(v).Backward && strings.HasPrefix(kernel, v.String()+"_bc") {
			return true
		}
	}
	return false
}

// VsSDPA is the lowest and highest of the named rows' TFLOP/s over SDPA's
// in the same row, each backend its own; a name not recorded, a row
// without the backend's figure, no names or an unknown backend fail,
// saying which.
func TestBackwardVsSDPA(t *testing.T) {
	t.Parallel()
	tab, err := Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	rec := tab.Backward
	var names []string
	for _, r := range rec.Rows {
		names = append(names, r.Kernel)
		for _, backend := range []string{"flash", "cudnn"} {
			sdpa := *r.SDPAFlash
			if backend == "cudnn" {
				sdpa = *r.SDPACuDNN
			}
			lo, hi, err := rec.VsSDPA(backend, r.Kernel)
			if err != nil || lo != hi || lo != r.TFLOPs/sdpa {
				t.Errorf("%s over SDPA's %s: %v to %v (%v), want %v", r.Kernel, backend, lo, hi, err, r.TFLOPs/sdpa)
			}
		}
	}
	lo, hi, err := rec.VsSDPA("flash", names...)
	if err != nil || !(lo < hi) {
		t.Fatalf("over every row: %v to %v (%v)", lo, hi, err)
	}
	wantLo, wantHi := math.Inf(1), math.Inf(-1)
	for _, r := range rec.Rows {
		wantLo, wantHi = min(wantLo, r.TFLOPs / *r.SDPAFlash), max(wantHi, r.TFLOPs / *r.SDPAFlash)
	}
	if lo != wantLo || hi != wantHi {
		t.Errorf("over every row: %v to %v, the rows give %v to %v", lo, hi, wantLo, wantHi)
	}
	doctored := *rec
	doctored.Rows = append([]BackwardRow(nil), rec.Rows...)
	doctored.Rows[1].SDPACuDNN = nil
	if _, _, err := doctored.VsSDPA("flash", names...); err != nil {
		t.Errorf("a missing cuDNN figure failed the FlashAttention-2 ratio: %v", err)
	}
	for _, bad := range []struct {
		backend string
		names   []string
		says    string
	}{
		{"cudnn", names, "has no figure of SDPA's cuDNN backward"},
		{"flash", nil, "names at least one kernel"},
		{"flash", []string{names[0], "flash2_bwd_mma_bc64"}, `no kernel "flash2_bwd_mma_bc64"`},
		{"math", names, "flash and cudnn"},
	} {
		if _, _, err := doctored.VsSDPA(bad.backend, bad.names...); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s over %v: %v, want an error saying %q", bad.backend, bad.names, err, bad.says)
		}
	}
}

// A backward row that failed its check fails the table's build, naming it.
func TestBackwardFailedCheckIsNoFigure(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{}
	for _, name := range []string{"ladder-h100.json", "sweep-h100.json", "sdpa-h100.json", "backward-h200.json"} {
		b, err := recordings.Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = &fstest.MapFile{Data: b}
	}
	if tab, err := Build(files); err != nil || tab.Backward == nil {
		t.Fatalf("the shipped files: %v", err)
	}
	broken := strings.Replace(string(files["backward-h200.json"].Data), `"check": "ok"`, `"check": "FAIL"`, 1)
	files["backward-h200.json"] = &fstest.MapFile{Data: []byte(broken)}
	if _, err := Build(files); err == nil || !strings.Contains(err.Error(), "did not pass its check") || !strings.Contains(err.Error(), "backward-h200.json") {
		t.Fatalf("a failed backward kernel's figure was accepted: %v", err)
	}
	delete(files, "backward-h200.json")
	if tab, err := Build(files); err != nil || tab.Backward != nil {
		t.Fatalf("no backward recording: %v, %+v", err, tab.Backward)
	}
}

// TestBackwardLadder: each backward rung the recording holds, with its
// fastest checked tile on each shape (searched here row by row), its ratio
// to SDPA's FlashAttention-2 backward in that row; the rungs in registry
// order, a rung absent from the recording left out.
func TestBackwardLadder(t *testing.T) {
	t.Parallel()
	tab, err := Build(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	lad := tab.Backward.Ladder()
	var names []string
	for _, r := range lad {
		names = append(names, r.Variant.String())
	}
	if strings.Join(names, " ") != "flash2_bwd_mma flash3_bwd_wgmma flash3_bwd_tma flash3_bwd_bulk" {
		t.Fatalf("the backward ladder's rungs: %v", names)
	}
	for _, r := range lad {
		for k, sh := range Shapes {
			c := r.Cells[k]
			var best BackwardRow
			for _, row := range tab.Backward.Rows {
				if strings.HasPrefix(row.Kernel, r.Variant.String()+"_bc") && row.D == sh.D && row.Causal == sh.Causal && row.TFLOPs > best.TFLOPs {
					best = row
				}
			}
			if c.Missing || c.Kernel != best.Kernel || c.TFLOPs != best.TFLOPs || math.Abs(c.Ratio - best.TFLOPs / *best.SDPAFlash) > 1e-12 || c.SDPACuDNN != *best.SDPACuDNN {
				t.Errorf("%s at %+v: %+v, the fastest row is %+v", r.Variant, sh, c, best)
			}
		}
	}
	// A recording of one slow tile only: that tile is the cell; a shape
	// without rows is missing; a failed row never counts.
	one := &BackwardRecord{Rows: []BackwardRow{
		{Kernel: "flash2_bwd_mma_bc64_d64", D: 64, TFLOPs: 100, Check: "ok"},
		{Kernel: "flash2_bwd_mma_bc128_d64", D: 64, TFLOPs: 300, Check: "FAIL"},
	}}
	got := one.Ladder()
	if len(got) != 1 || got[0].Cells[0].Kernel != "flash2_bwd_mma_bc64_d64" || !got[0].Cells[1].Missing || got[0].Cells[0].Ratio != 0 {
		t.Errorf("one tile recorded: %+v", got)
	}
	var none *BackwardRecord
	if none.Ladder() != nil {
		t.Error("no recording has a ladder")
	}
}
