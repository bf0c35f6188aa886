// Package ladder owns the kernel ladder's table: for each rung of
// kernels.Ladder its recorded speed on the FlashAttention benchmark shapes
// (N = 4096, B·N = 16384, H·d = 2048) beside PyTorch's SDPA backends measured
// in the same run, its ratio to SDPA's FlashAttention-2, what ptxas reports of
// its kernels, and a note wherever a rung is slower than the one below it;
// and each rung's CUDA source with its diff from the rung below (code.go).
//
// The figures come from two recordings made on an H100: the ladder bench
// (ladder-*.json, scripts/bench-gpu: the bf16 rungs and naive_mma) and the
// sweep (sweep-*.json with sdpa-*.json: the float32 rungs). Each ratio is
// taken within one recording, never across two. Beside the table, the
// backward bench (backward-*.json, scripts/bench-backward) times the
// backward rungs (flash2_bwd_mma, flash3_bwd_wgmma) at each of their tiles
// beside PyTorch's SDPA backward.
package ladder

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/sweep"
)

// Shape is one column of the table.
type Shape struct {
	D      int
	Causal bool
}

// Shapes are the table's columns, at N = 4096.
var Shapes = []Shape{{64, false}, {64, true}, {128, false}, {128, true}}

// N is the sequence length of every figure in the table.
const N = 4096

// Cell is one rung on one shape.
type Cell struct {
	Ms, TFLOPs float64
	SDPAFlash  float64 // TFLOP/s of SDPA's FlashAttention-2 backend, same run
	SDPACuDNN  float64
	Ratio      float64 // TFLOPs / SDPAFlash
	Kernel     string  // what ran: the bench's variant or the sweep's kernels
	Missing    bool    // no figure recorded for this shape
}

// Row is one rung, or the naive_mma partner.
type Row struct {
	Rung  kernels.Rung
	Cells []Cell // one per Shape
	// Unmeasured: the ladder bench's recording predates the rung (it has
	// no row of it at all), so its cells are missing and a note says how
	// to measure it; a rung the recording holds must have every shape.
	Unmeasured bool
	Source     string // which recording the figures come from
	Notes      []string
	Kernels    []KernelFigures // ptxas, sm_90, for the rung's compiled kernels
	Code       *Code           // its CUDA source and the diff from the rung below
}

// Recording is where a set of the table's figures comes from.
type Recording struct {
	What    string // the rows it times, the GPU, compiler and date
	Command string // the command that recorded them; empty if none is named
}

// String is the recording in words, the command after "by": no Markdown,
// for a line of plain text.
func (r Recording) String() string {
	if r.Command == "" {
		return r.What
	}
	return r.What + ", by " + r.Command
}

// Table is the ladder as the page shows it.
type Table struct {
	Rows    []Row
	Partner Row // naive_mma
	Shapes  []Shape
	// Sources are the recordings used: which rows, GPU, date, command.
	// Recordings are the same in words, for a line of plain text (a
	// checkpoint's "Numbers from"): Sources[k].String().
	Sources    []Recording
	Recordings []string
	// Bench is the ladder bench's recording whole, controls included (the
	// kernels without one idea each, such as flash2_fast's _noswizzle);
	// Sweep is the recorded sweep. Either is nil if none ships.
	Bench *BenchRecord
	Sweep *sweep.Record
	// Backward is the backward bench's recording, nil if none ships.
	Backward *BackwardRecord
	// Ideas are the top rung's ideas measured apart (ideas.go), from the
	// bench's controls; IdeasOf names that rung.
	Ideas   []Idea
	IdeasOf kernels.Rung
}

// BenchRecord is the ladder bench's JSON (scripts/ladder-table.py).
type BenchRecord struct {
	GPU     string `json:"gpu"`
	NVCC    string `json:"nvcc"`
	Date    string `json:"date"`
	Command string `json:"command"`
	Rows    []struct {
		Kernel     string   `json:"kernel"`
		D          int      `json:"d"`
		Causal     bool     `json:"causal"`
		Ms         float64  `json:"ms"`
		TFLOPs     float64  `json:"tflops"`
		Check      string   `json:"check"`
		N          int      `json:"N"`
		SDPAFlash  *float64 `json:"sdpa_flash_tflops"`
		SDPACuDNN  *float64 `json:"sdpa_cudnn_tflops"`
		TorchNaive *float64 `json:"pytorch_naive_tflops"`
		B          int      `json:"B"`
		H          int      `json:"H"`
	} `json:"rows"`
	Flash2FastSha string `json:"flash2_fast_sha256"`
	NaiveMMASha   string `json:"naive_mma_sha256"`
	N             string `json:"n"`
}

// BackwardRecord is the backward bench's JSON (scripts/bench-backward):
// the backward rungs at each of their tiles on the table's shapes, each row
// beside PyTorch's SDPA backward on the same shape, timed in the same run.
type BackwardRecord struct {
	GPU       string        `json:"gpu"`
	NVCC      string        `json:"nvcc"`
	Date      string        `json:"date"`
	N         string        `json:"n"`
	Command   string        `json:"command"`
	KernelSha string        `json:"flash2_bwd_mma_sha256"` // kernels/cuda/backward/flash2_bwd_mma.cu, as benched
	PTXSha    string        `json:"ptx_sha256"`            // the shipped PTX at the time
	Rows      []BackwardRow `json:"rows"`
	// Hopper is each Hopper backward rung's source and PTX as benched, in
	// registry order, from the keys "<rung>_sha256" and "<rung>_ptx_sha256"
	// (scripts/bench-backward writes one pair a rung); a rung benched
	// after the recording was made is absent.
	Hopper []SourceHash `json:"-"`
}

// SourceHash is a rung's .cu and PTX hash (sha256, 16 hex digits) as
// benched.
type SourceHash struct {
	File, Sha, PTXSha string
}

// UnmarshalJSON reads the record and each Hopper backward rung's hashes.
func (r *BackwardRecord) UnmarshalJSON(b []byte) error {
	type plain BackwardRecord
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	r.Hopper = nil
	for _, info := range kernels.Variants() {
		if !info.Backward || info.Arch != kernels.ArchHopper {
			continue
		}
		name := info.Variant.String()
		sha, _ := keys[name+"_sha256"].(string)
		ptx, _ := keys[name+"_ptx_sha256"].(string)
		if sha != "" {
			r.Hopper = append(r.Hopper, SourceHash{File: kernels.SourcePath(info.Variant), Sha: sha, PTXSha: ptx})
		}
	}
	return nil
}

// BackwardRow is one kernel on one shape. Kernel names the rung, the tile
// and the shape, as flash2_bwd_mma_bc128_d128_causal: bc is the kv-tile's
// rows.
type BackwardRow struct {
	Kernel string  `json:"kernel"`
	D      int     `json:"d"`
	Causal bool    `json:"causal"`
	Ms     float64 `json:"ms"`
	TFLOPs float64 `json:"tflops"`
	Check  string  `json:"check"`
	// Errors is each gradient's largest difference, element by element,
	// from a float32 reference backward on the same bf16 inputs (the first
	// and last batch-head; bench/backward/bench.cu).
	Errors struct {
		DQ float64 `json:"dq"`
		DK float64 `json:"dk"`
		DV float64 `json:"dv"`
	} `json:"errors"`
	B int `json:"B"`
	H int `json:"H"`
	N int `json:"N"`
	// SDPA's backward in TFLOP/s on the row's shape, by backend; nil where
	// the backend did not run.
	SDPAFlash *float64 `json:"sdpa_flash_tflops"`
	SDPACuDNN *float64 `json:"sdpa_cudnn_tflops"`
}

// Row is the row of the named kernel; r may be nil (no recording ships).
func (r *BackwardRecord) Row(kernel string) (BackwardRow, error) {
	if r == nil {
		return BackwardRow{}, fmt.Errorf("no backward bench recording ships (recordings/backward-*.json)")
	}
	var names []string
	for _, row := range r.Rows {
		if row.Kernel == kernel {
			return row, nil
		}
		names = append(names, row.Kernel)
	}
	return BackwardRow{}, fmt.Errorf("the backward bench recorded no kernel %q; it holds %s", kernel, strings.Join(names, ", "))
}

// VsSDPA is the lowest and highest, over the named kernels, of a row's
// TFLOP/s over SDPA's backward in the same row, on backend "flash"
// (FlashAttention-2) or "cudnn". It fails on no names, a name not
// recorded, or a row without that backend's figure.
func (r *BackwardRecord) VsSDPA(backend string, kernels ...string) (lo, hi float64, err error) {
	if backend != "flash" && backend != "cudnn" {
		return 0, 0, fmt.Errorf("SDPA's backends are flash and cudnn, got %q", backend)
	}
	if len(kernels) == 0 {
		return 0, 0, fmt.Errorf("a ratio to SDPA's backward names at least one kernel")
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, k := range kernels {
		row, err := r.Row(k)
		if err != nil {
			return 0, 0, err
		}
		sdpa, what := row.SDPAFlash, "FlashAttention-2"
		if backend == "cudnn" {
			sdpa, what = row.SDPACuDNN, "cuDNN"
		}
		if sdpa == nil || !(*sdpa > 0) {
			return 0, 0, fmt.Errorf("the backward bench's %s has no figure of SDPA's %s backward", k, what)
		}
		lo, hi = min(lo, row.TFLOPs / *sdpa), max(hi, row.TFLOPs / *sdpa)
	}
	return lo, hi, nil
}

type sdpaRow struct {
	N      int  `json:"N"`
	D      int  `json:"d"`
	Causal bool `json:"causal"`
	Flash  struct {
		TFLOPs float64 `json:"tflops"`
	} `json:"flash"`
	CuDNN struct {
		TFLOPs float64 `json:"tflops"`
	} `json:"cudnn"`
}

// Build reads the recordings in files and lays out the table.
func Build(files fs.FS) (*Table, error) {
	t := &Table{Shapes: Shapes}
	bench, err := readBench(files)
	if err != nil {
		return nil, err
	}
	if t.Backward, err = readBackward(files); err != nil {
		return nil, err
	}
	rec, sdpaJSON, err := sweep.LoadRecorded(files)
	if err != nil {
		return nil, err
	}
	var sdpa []sdpaRow
	if sdpaJSON != nil {
		if err := json.Unmarshal(sdpaJSON, &sdpa); err != nil {
			return nil, fmt.Errorf("sdpa recording: %w", err)
		}
	}
	t.Bench, t.Sweep = bench, rec
	if bench != nil {
		t.Sources = append(t.Sources, Recording{What: fmt.Sprintf("bf16 rungs and naive_mma: %s, %s, %s", bench.GPU, bench.NVCC, bench.Date), Command: bench.Command})
	}
	if rec != nil {
		t.Sources = append(t.Sources, Recording{What: fmt.Sprintf("float32 rungs: the sweep recorded on %s, %s, with SDPA measured on the same GPU right after it", rec.Source, rec.Recorded.Format("2006-01-02"))})
	}
	for _, s := range t.Sources {
		t.Recordings = append(t.Recordings, s.String())
	}
	ptxas := kernels.Ptxas()
	for _, r := range kernels.Ladder {
		if !r.Built {
			continue
		}
		row := Row{Rung: r, Kernels: kernelFigures(r, ptxas), Code: Codes()[r.Name]}
		if r.Bench != "" {
			row.Cells, row.Source = benchCells(bench, r.Bench)
			if bench != nil && !benchHas(bench, r.Bench) {
				row.Unmeasured = true
				row.Notes = append(row.Notes, fmt.Sprintf("not measured yet: the ladder bench's recording (%s) predates it; scripts/bench-gpu on the GPU machine times it", bench.Date))
			}
		} else {
			row.Cells, row.Source = sweepCells(rec, sdpa, r.Variant)
		}
		t.Rows = append(t.Rows, row)
	}
	for _, row := range t.Rows {
		if row.Rung.Bench != "" {
			if found := ideas(bench, row.Rung.Bench, row.Cells); found != nil {
				t.Ideas, t.IdeasOf = found, row.Rung // the highest bench rung with controls
			}
		}
	}
	t.Partner = Row{Rung: kernels.NaiveMMA, Kernels: kernelFigures(kernels.NaiveMMA, ptxas), Code: Codes()[kernels.NaiveMMA.Name]}
	t.Partner.Cells, t.Partner.Source = benchCells(bench, kernels.NaiveMMA.Bench)
	// A rung slower than the one below it on some shape says so.
	for k := 1; k < len(t.Rows); k++ {
		below, here := t.Rows[k-1], &t.Rows[k]
		for s, sh := range Shapes {
			a, b := below.Cells[s], here.Cells[s]
			if !a.Missing && !b.Missing && b.TFLOPs < a.TFLOPs {
				here.Notes = append(here.Notes, fmt.Sprintf("slower than rung %d (%s) at d=%d%s: %.1f against %.1f TFLOP/s",
					below.Rung.Number, below.Rung.Name, sh.D, causalWord(sh.Causal), b.TFLOPs, a.TFLOPs))
			}
		}
	}
	return t, nil
}

func causalWord(c bool) string {
	if c {
		return ", causal"
	}
	return ""
}

func readBench(files fs.FS) (*BenchRecord, error) {
	return readChecked(files, "ladder-*.json", func(rec *BenchRecord) (kernels, checks []string) {
		for _, r := range rec.Rows {
			kernels, checks = append(kernels, r.Kernel), append(checks, r.Check)
		}
		return kernels, checks
	})
}

func readBackward(files fs.FS) (*BackwardRecord, error) {
	return readChecked(files, "backward-*.json", func(rec *BackwardRecord) (kernels, checks []string) {
		for _, r := range rec.Rows {
			kernels, checks = append(kernels, r.Kernel), append(checks, r.Check)
		}
		return kernels, checks
	})
}

// readChecked reads the first recording that pattern matches (nil if none
// ships) and refuses it if any of its kernels failed its check: a failed
// kernel's speed is no figure.
func readChecked[T any](files fs.FS, pattern string, rows func(*T) (kernels, checks []string)) (*T, error) {
	names, _ := fs.Glob(files, pattern)
	if len(names) == 0 {
		return nil, nil
	}
	b, err := fs.ReadFile(files, names[0])
	if err != nil {
		return nil, err
	}
	var rec T
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", names[0], err)
	}
	kernels, checks := rows(&rec)
	for k, c := range checks {
		if c != "ok" {
			return nil, fmt.Errorf("%s: %s did not pass its check (%q): a failed kernel's speed is no figure", names[0], kernels[k], c)
		}
	}
	return &rec, nil
}

// benchCells picks the bench's figures for a kernel family: its plain
// variant on each shape (not the controls, such as _noswizzle).
func benchCells(rec *BenchRecord, family string) ([]Cell, string) {
	cells := make([]Cell, len(Shapes))
	for s := range cells {
		cells[s].Missing = true
	}
	if rec == nil {
		return cells, ""
	}
	for _, r := range rec.Rows {
		name := strings.TrimSuffix(r.Kernel, "_causal")
		if !strings.HasPrefix(name, family) || withoutIdea(r.Kernel) || (r.N != 0 && r.N != N) {
			continue
		}
		for s, sh := range Shapes {
			if sh.D == r.D && sh.Causal == r.Causal && cells[s].Missing {
				c := Cell{Ms: r.Ms, TFLOPs: r.TFLOPs, Kernel: r.Kernel}
				if r.SDPAFlash != nil {
					c.SDPAFlash = *r.SDPAFlash
					c.Ratio = r.TFLOPs / *r.SDPAFlash
				}
				if r.SDPACuDNN != nil {
					c.SDPACuDNN = *r.SDPACuDNN
				}
				cells[s] = c
			}
		}
	}
	return cells, fmt.Sprintf("ladder bench, %s", rec.Date)
}

// benchHas says whether the bench's recording holds any row of a family.
func benchHas(rec *BenchRecord, family string) bool {
	for _, r := range rec.Rows {
		if strings.HasPrefix(r.Kernel, family+"_") {
			return true
		}
	}
	return false
}

// sweepCells picks the recorded sweep's figures for a float32 variant at N,
// and SDPA's, measured on the same GPU right after the sweep. The sweep ran
// the float32 rungs with 64×64 tiles.
func sweepCells(rec *sweep.Record, sdpa []sdpaRow, v instrument.Variant) ([]Cell, string) {
	cells := make([]Cell, len(Shapes))
	for s := range cells {
		cells[s].Missing = true
	}
	if rec == nil {
		return cells, ""
	}
	for _, r := range rec.Results {
		if r.N != N || r.VariantName != v.String() || r.OutOfMem || r.Error != "" || r.Ms <= 0 {
			continue
		}
		for s, sh := range Shapes {
			if sh.D != r.D || sh.Causal != r.Causal || !cells[s].Missing {
				continue
			}
			c := Cell{Ms: r.Ms, TFLOPs: r.TFLOPs, Kernel: r.Kernel}
			for _, p := range sdpa {
				if p.N == N && p.D == sh.D && p.Causal == sh.Causal && p.Flash.TFLOPs > 0 {
					c.SDPAFlash, c.SDPACuDNN = p.Flash.TFLOPs, p.CuDNN.TFLOPs
					c.Ratio = c.TFLOPs / c.SDPAFlash
				}
			}
			cells[s] = c
		}
	}
	return cells, fmt.Sprintf("recorded sweep, %s", rec.Recorded.Format("2006-01-02"))
}

// KernelFigures is one compiled kernel of a rung: what ptxas said of it,
// and the dynamic shared memory it is launched with (Shared −1: set by the
// run's tiles, naive's).
type KernelFigures struct {
	kernels.PtxasFigures
	Shared int
}

// kernelFigures is what ptxas said of the untraced kernels that run a rung,
// at the 64×64 tiles the sweep runs the float32 rungs at.
func kernelFigures(r kernels.Rung, all []kernels.PtxasFigures) []KernelFigures {
	var out []KernelFigures
	shared := launch.DynamicShared()
	info := kernels.Info(r.Variant)
	module := info.Module()
	for _, f := range all {
		if f.Module != module || f.Kernel == "fs_probe" {
			continue
		}
		// The float32 rungs are compiled at teaching tiles too; the table is
		// about 64×64.
		if info.TeachingTiles && !strings.Contains(f.Kernel, "br64_bc64") {
			continue
		}
		smem, ok := shared[f.Kernel]
		if !ok {
			smem = -1
		}
		out = append(out, KernelFigures{f, smem})
	}
	return out
}

// BackwardRung is one backward kernel of the registry on the backward
// bench's shapes: in each, its fastest recorded tile.
type BackwardRung struct {
	Variant instrument.Variant
	Cells   []Cell // one per Shape; Ratio is TFLOP/s over SDPA's FlashAttention-2
}

// Ladder is the backward bench as a ladder: each backward kernel of the
// registry the recording holds, in registry order, with its fastest tile
// on each of Shapes beside SDPA's two backends on that shape (a shape it
// has no row for is Missing).
func (r *BackwardRecord) Ladder() []BackwardRung {
	if r == nil {
		return nil
	}
	var out []BackwardRung
	for _, v := range instrument.Variants {
		if !kernels.Info(v).Backward {
			continue
		}
		rung := BackwardRung{Variant: v, Cells: make([]Cell, len(Shapes))}
		recorded := false
		for k, sh := range Shapes {
			cell := Cell{Missing: true}
			for _, row := range r.Rows {
				if !strings.HasPrefix(row.Kernel, v.String()+"_bc") || row.D != sh.D || row.Causal != sh.Causal || row.Check != "ok" {
					continue
				}
				if cell.Missing || row.TFLOPs > cell.TFLOPs {
					cell = Cell{Ms: row.Ms, TFLOPs: row.TFLOPs, Kernel: row.Kernel}
					if row.SDPAFlash != nil {
						cell.SDPAFlash, cell.Ratio = *row.SDPAFlash, row.TFLOPs / *row.SDPAFlash
					}
					if row.SDPACuDNN != nil {
						cell.SDPACuDNN = *row.SDPACuDNN
					}
				}
			}
			recorded = recorded || !cell.Missing
			rung.Cells[k] = cell
		}
		if recorded {
			out = append(out, rung)
		}
	}
	return out
}
