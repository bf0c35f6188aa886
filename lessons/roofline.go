package lessons

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"flashstep/grading"
	"flashstep/kernels"
	"flashstep/ladder"
	"flashstep/recordings"
)

// The ladder's checkpoints: questions about the kernel ladder's recorded
// figures (the /ladder page's table, ladder.Build of the recordings) read
// against the two floors of each benchmark shape. The answer is never in
// the lesson: it is worked out from the table the page shows.
//
//	::: checkpoint id=fast-vs-naive ask=ladder-speedup rung=flash2_fast against=naive_mma d=128
//	By how many times is flash2_fast faster than naive_mma at d = 128?
//	:::

// The H100 SXM5's published rates (NVIDIA's H100 datasheet), the ones
// docs/LADDER.md's floors use.
const (
	TensorPeakFLOPs = 989.4e12 // dense bf16 on the tensor cores, FLOP/s
	HBMBytesPerSec  = 3.35e12  // HBM3 bandwidth, bytes/s
)

// The benchmark shapes are FlashAttention's: B·N tokens and H·d channels.
const (
	benchTokens = 16384
	benchWidth  = 2048
)

// Floor kinds a ladder-floor checkpoint names.
const (
	FloorCompute = "compute" // FLOPs at the tensor cores' peak
	FloorMemory  = "memory"  // the bytes the kernel must move at HBM bandwidth
)

// LadderTable is the ladder's table as the /ladder page builds it from the
// recordings, built once.
var LadderTable = sync.OnceValues(func() (*ladder.Table, error) { return ladder.Build(recordings.Files) })

// LadderQuestion is what a ladder checkpoint asks about: one row of the
// table (a rung or naive_mma) on one shape, against another row or a floor.
type LadderQuestion struct {
	Rung    string
	Against string // ladder-speedup: the row it is compared with
	Shape   ladder.Shape
	Floor   string // ladder-floor: compute or memory
}

// Floors are one benchmark shape's sizes and the least time its work and
// its traffic can take on an H100 SXM5.
type Floors struct {
	B, H         int
	FLOPs        float64 // 4·B·H·N²·d, halved under a causal mask
	Bytes        float64 // Q, K, V read once and O written once, bf16
	SPBytes      float64 // naive's S and P round trips, B·H·N² elements each
	ComputeMs    float64 // FLOPs at TensorPeakFLOPs
	MemoryMs     float64 // Bytes at HBMBytesPerSec
	SPMemoryMs   float64 // (Bytes + SPBytes) at HBMBytesPerSec
	ScoreCount   float64 // B·H·N², the elements of one N×N matrix over every head
	flopsFormula string
}

// FloorsOf works out a shape's floors at N = ladder.N. naive_mma's S/P
// traffic follows docs/LADDER.md: S (float32) written once and read three
// times by the softmax (max, sum, write P), P (bf16) written once and read
// once by P·V: 4·4 + 2·2 = 20 bytes per element.
func FloorsOf(sh ladder.Shape) Floors {
	n := float64(ladder.N)
	f := Floors{B: benchTokens / ladder.N, H: benchWidth / sh.D}
	bh := float64(f.B * f.H)
	f.ScoreCount = bh * n * n
	f.FLOPs = 4 * f.ScoreCount * float64(sh.D)
	f.flopsFormula = fmt.Sprintf("4·B·H·N²·d = 4·%d·%d·%d²·%d", f.B, f.H, ladder.N, sh.D)
	if sh.Causal {
		f.FLOPs /= 2
		f.flopsFormula += "/2"
	}
	f.Bytes = 4 * bh * n * float64(sh.D) * 2
	f.SPBytes = f.ScoreCount * (4*4 + 2*2)
	f.ComputeMs = f.FLOPs / TensorPeakFLOPs * 1e3
	f.MemoryMs = f.Bytes / HBMBytesPerSec * 1e3
	f.SPMemoryMs = (f.Bytes + f.SPBytes) / HBMBytesPerSec * 1e3
	return f
}

// ladderRows are the names a ladder checkpoint may name: the built rungs
// and naive_mma.
func ladderRows() []string {
	var names []string
	for _, r := range kernels.Ladder {
		if r.Built {
			names = append(names, r.Name)
		}
	}
	return append(names, kernels.NaiveMMA.Name)
}

// tensorRow says whether a row runs on the tensor cores in bf16, where the
// floors of this file apply.
func tensorRow(name string) bool {
	if name == kernels.NaiveMMA.Name {
		return true
	}
	for _, r := range kernels.Ladder {
		if r.Name == name {
			return r.DType == "bf16"
		}
	}
	return false
}

// onTheLadder is what the ladder's asks share: no preset (their input is
// the ladder's recorded figures), the attributes naming a row and a shape
// (rung, d, causal), and their source.
type onTheLadder struct{}

func (onTheLadder) ownInput() {}

func (onTheLadder) source(*Checkpoint) string { return ladderSource() }

// parseRow reads the row and shape a ladder checkpoint asks about; it
// returns the names of the ladder's rows.
func (onTheLadder) parseRow(c *Checkpoint, d *directive) (rows []string) {
	if c.Preset != "" {
		d.failf("ask=%s reads the ladder's recorded figures, not a preset's run", c.Ask)
	}
	q := &c.Ladder
	q.Rung = ladderRow(d, "rung")
	parseShape(c, d)
	return ladderRows()
}

// parseShape reads the shape (d=, causal=) a ladder checkpoint asks about.
func parseShape(c *Checkpoint, d *directive) {
	q := &c.Ladder
	d.allow("d", "causal")
	var ds []string
	for _, sh := range ladder.Shapes {
		if !sh.Causal {
			ds = append(ds, strconv.Itoa(sh.D))
		}
	}
	dim, err := strconv.Atoi(d.attrs["d"])
	if err != nil || !slices.Contains(ds, d.attrs["d"]) {
		d.failf("d= must be a head dim of the ladder's shapes (%s), got %q", strings.Join(ds, ", "), d.attrs["d"])
	}
	q.Shape.D = dim
	switch d.attrs["causal"] {
	case "", "0":
	case "1":
		q.Shape.Causal = true
	default:
		d.failf("causal= must be 0 or 1, got %q", d.attrs["causal"])
	}
}

// ladderRow reads attribute key, which names a row of the ladder.
func ladderRow(d *directive, key string) string {
	rows := ladderRows()
	v := d.text(key)
	if !slices.Contains(rows, v) {
		d.failf("%s= must name a row of the ladder (%s), got %q", key, strings.Join(rows, ", "), v)
	}
	return v
}

// ladderAsk is a ladder ask: it is answered from a table of the ladder's
// figures.
type ladderAsk interface {
	computedAsk
	solveFrom(c *Checkpoint, tab *ladder.Table) (grading.Solution, error)
}

// solveLadder answers a ladder checkpoint from the recorded figures.
func solveLadder(c *Checkpoint) (grading.Solution, error) {
	tab, err := LadderTable()
	if err != nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: the ladder's figures: %w", c.ID, err)
	}
	return c.SolveLadder(tab)
}

// ladderCell finds a row's figure on a shape, and the recording it is from.
func ladderCell(tab *ladder.Table, name string, sh ladder.Shape) (ladder.Cell, string, error) {
	rows := append(slices.Clone(tab.Rows), tab.Partner)
	s := slices.Index(tab.Shapes, sh)
	for _, r := range rows {
		if r.Rung.Name != name {
			continue
		}
		if s < 0 || r.Cells[s].Missing || !(r.Cells[s].Ms > 0) {
			return ladder.Cell{}, "", fmt.Errorf("%s has no recorded figure at %s", name, shapeWords(sh))
		}
		return r.Cells[s], r.Source, nil
	}
	return ladder.Cell{}, "", fmt.Errorf("the ladder's table has no row %s", name)
}

func shapeWords(sh ladder.Shape) string {
	s := fmt.Sprintf("d = %d", sh.D)
	if sh.Causal {
		s += ", causal"
	}
	return s
}

func ladderSource() string {
	tab, err := LadderTable()
	if err != nil {
		return "the ladder's recorded figures"
	}
	return "the ladder's recorded figures (" + strings.Join(tab.Recordings, "; ") + ")"
}

// SolveLadder answers a ladder checkpoint from a table of figures: the
// recorded one (LadderTable) when a student asks, a doctored one in tests.
func (c *Checkpoint) SolveLadder(tab *ladder.Table) (grading.Solution, error) {
	a, ok := c.kind().(ladderAsk)
	if !ok {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: ask %q is not a ladder question", c.ID, c.Ask)
	}
	return a.solveFrom(c, tab)
}

// ladderFigures are what a ladder answer is worked out from: its row's
// figure on its shape, the recording that holds it, and the shape's floors.
type ladderFigures struct {
	cell   ladder.Cell
	source string
	floors Floors
	shape  string // the shape, as an explanation names it
}

func (c *Checkpoint) ladderFigures(tab *ladder.Table) (ladderFigures, error) {
	q := c.Ladder
	cell, source, err := ladderCell(tab, q.Rung, q.Shape)
	if err != nil {
		return ladderFigures{}, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	f := FloorsOf(q.Shape)
	return ladderFigures{cell: cell, source: source, floors: f,
		shape: fmt.Sprintf("%s (N = %d, B = %d, H = %d)", shapeWords(q.Shape), ladder.N, f.B, f.H)}, nil
}

// ms writes a time in milliseconds as the ladder's table does.
func ms(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// ladderAt is the shape a ladder hint names.
func (c *Checkpoint) ladderAt() string {
	at := shapeWords(c.Ladder.Shape)
	if !c.Ladder.Shape.Causal {
		at += ", no mask"
	}
	return at
}

// ladderSpeedup asks how many times faster one row of the ladder is than
// another on a shape. Its tolerance is relative (tol, 2%): it is a ratio.
type ladderSpeedup struct{ onTheLadder }

func (l ladderSpeedup) parse(c *Checkpoint, d *directive) {
	l.parseRow(c, d)
	q := &c.Ladder
	q.Against = ladderRow(d, "against")
	if q.Against == q.Rung && q.Rung != "" {
		d.failf("rung= and against= name the same row")
	}
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.02)
}

func (ladderSpeedup) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) { return solveLadder(c) }

func (ladderSpeedup) solveFrom(c *Checkpoint, tab *ladder.Table) (grading.Solution, error) {
	q := c.Ladder
	fig, err := c.ladderFigures(tab)
	if err != nil {
		return grading.Solution{}, err
	}
	cell, f := fig.cell, fig.floors
	other, otherSource, err := ladderCell(tab, q.Against, q.Shape)
	if err != nil {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	if otherSource != fig.source {
		return grading.Solution{}, fmt.Errorf("checkpoint %s: %s (%s) and %s (%s) come from two recordings; a ratio is taken within one", c.ID, q.Rung, fig.source, q.Against, otherSource)
	}
	x := other.Ms / cell.Ms
	hi := other.Ms / f.ComputeMs
	shown := strconv.FormatFloat(x, 'f', 2, 64)
	if x < 1 { // a slowdown: three significant digits, as its tolerance needs
		shown = c.shown(x)
	}
	return grading.Solution{Number: x, Display: shown + "×", Lo: 0, Hi: hi,
		// In µs: a time in ms can sit near the ratio itself (0.928 ms
		// beside a 0.93× slowdown) and give it away.
		Why: fmt.Sprintf("a ratio of two times is positive, and %s cannot finish in less than the compute floor of %s, %.0f µs, so it is at most %.0f / %.0f = %.1f times faster than %s",
			q.Rung, shapeWords(q.Shape), 1000*f.ComputeMs, 1000*other.Ms, 1000*f.ComputeMs, hi, q.Against),
		Explain: fmt.Sprintf("At %s, %s (%s) took %s ms and %s (%s) %s ms in the %s: %s / %s = %s. Both are counted as %.1f GFLOP, so %s ran at %.1f TFLOP/s and %s at %.1f.",
			fig.shape, q.Against, other.Kernel, ms(other.Ms), q.Rung, cell.Kernel, ms(cell.Ms), fig.source, ms(other.Ms), ms(cell.Ms), shown,
			f.FLOPs/1e9, q.Rung, cell.TFLOPs, q.Against, other.TFLOPs)}, nil
}

// pose's hint says which figures of the ladder page to take and what to
// do with them, never the result.
func (ladderSpeedup) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Times, func(float64) string {
		q := c.Ladder
		return fmt.Sprintf("Not quite. A speed-up is a ratio of times: in the ladder page's table at %s, divide %s's time in ms by %s's (both from the same recording).", c.ladderAt(), q.Against, q.Rung)
	})
}

// ladderFloor asks what percentage of a floor (compute or memory) a row of
// the ladder reaches on a shape. Its tolerance is relative (tol, 2%): a
// fraction of the percentage, not percentage points.
type ladderFloor struct{ onTheLadder }

func (l ladderFloor) parse(c *Checkpoint, d *directive) {
	rows := l.parseRow(c, d)
	q := &c.Ladder
	q.Floor = d.text("floor")
	if q.Floor != FloorCompute && q.Floor != FloorMemory {
		d.failf("floor= must be compute or memory, got %q", q.Floor)
	}
	if q.Rung != "" && slices.Contains(rows, q.Rung) && !tensorRow(q.Rung) {
		d.failf("rung %s is float32 on the CUDA cores: the floors are the tensor cores' bf16 peak and bf16 traffic", q.Rung)
	}
	c.Format = grading.FormatNumber
	c.Tol = d.tol(0.02)
}

func (ladderFloor) solve(c *Checkpoint, _ *Trace) (grading.Solution, error) { return solveLadder(c) }

func (ladderFloor) solveFrom(c *Checkpoint, tab *ladder.Table) (grading.Solution, error) {
	q := c.Ladder
	fig, err := c.ladderFigures(tab)
	if err != nil {
		return grading.Solution{}, err
	}
	cell, f, shape, source := fig.cell, fig.floors, fig.shape, fig.source
	s := grading.Solution{Lo: 0, Hi: 100, Why: fmt.Sprintf("no kernel finishes in less than its floor, so %s reaches at most 100%% of it", q.Rung)}
	var floor float64
	switch q.Floor {
	case FloorCompute:
		floor = f.ComputeMs
		s.Explain = fmt.Sprintf("At %s attention does %s = %.1f GFLOP; at the tensor cores' %.1f TFLOP/s (dense bf16, NVIDIA's H100 SXM5 datasheet) that takes at least %s ms. In the %s, %s took %s ms, so it reaches %s / %s = %.1f%% of the compute floor: %.1f of %.1f TFLOP/s.",
			shape, f.flopsFormula, f.FLOPs/1e9, TensorPeakFLOPs/1e12, ms(floor), source, q.Rung, ms(cell.Ms), ms(floor), ms(cell.Ms), 100*floor/cell.Ms, f.FLOPs/cell.Ms/1e9, TensorPeakFLOPs/1e12)
	case FloorMemory:
		bytes := f.Bytes
		what := fmt.Sprintf("Q, K and V read once and O written once in bf16, %.1f MB", f.Bytes/1e6)
		if q.Rung == kernels.NaiveMMA.Name {
			bytes += f.SPBytes
			what = fmt.Sprintf("S and P through device memory: B·H·N² = %.3g elements each, S in float32 written once and read three times, P in bf16 written once and read once, 20 bytes an element, %.1f GB; with Q, K, V and O (%.2f GB), %.2f GB",
				f.ScoreCount, f.SPBytes/1e9, f.Bytes/1e9, bytes/1e9)
		}
		floor = bytes / HBMBytesPerSec * 1e3
		s.Explain = fmt.Sprintf("At %s %s moves at least %s. At %.2f TB/s (HBM3, NVIDIA's H100 SXM5 datasheet) that takes %s ms. In the %s it took %s ms: %s / %s = %.1f%% of its memory floor.",
			shape, q.Rung, what, HBMBytesPerSec/1e12, ms(floor), source, ms(cell.Ms), ms(floor), ms(cell.Ms), 100*floor/cell.Ms)
	}
	s.Number = 100 * floor / cell.Ms
	s.Display = strconv.FormatFloat(s.Number, 'f', 1, 64) + "%"
	return s, nil
}

// pose's hint says which floor to work out and what to divide it by,
// never the result.
func (ladderFloor) pose(c *Checkpoint, key grading.Solution) grading.Question {
	return c.number(key, grading.Relative(c.Tol), grading.Percent, func(float64) string {
		q := c.Ladder
		at := c.ladderAt()
		if q.Floor == FloorCompute {
			return fmt.Sprintf("Not quite. The compute floor is the time the work takes at the tensor cores' peak: 4·B·H·N²·d FLOPs (half of them under a causal mask) at %.1f TFLOP/s. Divide that floor by %s's measured time at %s, or its TFLOP/s by the peak, and write it as a percentage.", TensorPeakFLOPs/1e12, q.Rung, at)
		}
		what := "Q, K and V read once and O written once, in bf16"
		if q.Rung == kernels.NaiveMMA.Name {
			what += ", and S and P through device memory: S in float32 written once and read three times, P in bf16 written once and read once, B·H·N² elements each"
		}
		return fmt.Sprintf("Not quite. The memory floor is the least time %s's compulsory bytes take at the HBM's %.2f TB/s: %s. Divide that floor by its measured time at %s, and write it as a percentage.", q.Rung, HBMBytesPerSec/1e12, what, at)
	})
}
