package kernels

import (
	"fmt"

	"flashstep/instrument"
)

// VariantInfo is one rung of the ladder (or naive_mma, the partner), with
// everything the rest of the program knows of it: what pages say about it,
// the records its trace holds per q-tile and its CPU mirror, its traffic,
// its compiled tiles and launches, and how the sweep and the stepper show it.
// Each rung's entry sits in its own file beside its mirror (flash2.go beside
// flash2.cu); rungs, below, is the one list that orders them. The ladder
// page, the launch planner, the traffic model, the worker, the sweep and the
// stepper read these entries and name no rung.
type VariantInfo struct {
	Variant instrument.Variant
	Title   string
	Summary string
	// DType is what the kernel computes in, as its trace header says: bf16
	// variants take Q, K and V rounded to bf16 (InputsFor).
	DType instrument.DType

	// Backward: the kernel is attention's backward pass. Its inputs add dO
	// and the forward's O and L (Inputs), its trace holds the backward's
	// record kinds, and it is no rung of the forward's ladder.
	Backward bool

	// Shapes are the runs beyond square ones the rung takes, kernel and
	// mirror alike; Config.Validate refuses the rest, naming the rungs
	// that take them.
	Shapes Shapes

	// Decode: the kernel is inference's, a few queries against a long
	// cache (docs/DECODE.md); it climbs no forward ladder and a sweep of
	// square runs leaves it out.
	Decode bool
	// Paged: the rung reads K and V from a paged cache through a block
	// table (decode_paged.go): the worker uploads them as PagedPool's pools
	// and the table as BufPageTable.
	Paged bool

	// Materialised: S and P go through device memory (naive's three phases),
	// rather than living one tile at a time on chip.
	Materialised bool
	// Loop is the loop order, which the traffic model reads.
	Loop LoopOrder
	// HeaviestFirst: under a causal mask the kernel launches its q-tiles
	// last to first, the ones with the most kv-tiles first.
	HeaviestFirst bool

	// The ladder. Rung is its number, from 1 (0 for naive_mma, the
	// partner, not a rung); DiffsAgainst, for the partner, the rung whose
	// code the ladder page shows its code against;
	// Idea the one idea it adds; Bench whether the ladder bench
	// (bench/ladder) times it, rather than the recorded sweep; StepRun the
	// small run the ladder page offers to step through.
	Rung         int
	DiffsAgainst instrument.Variant
	Idea         string
	// Gist is the idea in a few words, as a list of the rungs names it
	// (the glossary's ladder: "wgmma, TMA copies, warp specialisation").
	Gist    string
	Bench   bool
	StepRun string

	// Colour is its line in the sweep's charts; BytesNote what the
	// stepper says of the bytes a step reads and writes; Words what the
	// stepper says of its steps where the words all rungs share
	// (static/js/steps.js) do not fit it.
	Colour    string
	BytesNote string
	Words     Words

	// The sweep: how fast it runs, for the estimate (FLOP/s on the GPU and
	// on the CPU mirror), the longest N it is timed at (0: no limit) and
	// whether a CPU sweep times it by default.
	GPURate, CPURate float64
	MaxSweptN        int
	SweptOnCPU       bool

	// The GPU. Tiles are the compiled instantiations (nil: any tile
	// GPULimits allows); TeachingTiles says they include small ones for
	// the stepper, so that tables of figures show the 64×64 ones. Launches
	// is what a run at tile t (TileFor; the zero Tile for a rung without
	// Tiles) launches, TraceSlots where its records go (nil: one
	// slot per block of its one kernel), GPULimits what a run must meet
	// beyond its tiles.
	Tiles         []Tile
	TeachingTiles bool
	// Arch is the GPU architecture the kernels need beyond the ladder's
	// baseline (sm_80's instructions, which every rung's PTX targets):
	// ArchHopper for the rungs built on wgmma, whose PTX comes from a newer
	// nvcc (scripts/ptx-hopper). Empty for the rest.
	Arch Arch
	// Roles is the role records of a warp-specialised rung in roles mode
	// (nil: the rung has no warp roles to record).
	Roles *RoleTable
	// Instance is the line of the rung's .cu that compiles tile t
	// (TestInstancesMatchSource holds the two to each other).
	Instance   func(t Tile) string
	Launches   func(c *Config, t Tile) Launches
	TraceSlots *TraceSlots
	GPULimits  func(c *Config) error

	// Family is the arithmetic it shares with other kernels (Family).
	// Traffic, the device-memory bytes a record's step loads and stores,
	// and block, the mirror's walk, are its family's.
	Family  *Family
	Traffic func(c *Config, r *instrument.Record) (read, written uint64)

	// phases is how many phases the variant's records leave in: the trace
	// holds phase 0 of every block, then phase 1 of every block, and so on
	// (naive's three kernels; flash1's kv-tiles, one after the other).
	phases  func(c *Config) int
	records func(c *Config, i int) []kindCount
	// block emits the records block (bh, i) writes, in its order.
	block func(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record))
}

// Shapes says which runs beyond N queries against N keys, a K and V per
// head, a rung takes.
type Shapes struct {
	// Queries: fewer queries than keys (nq < N), the last nq positions,
	// a causal mask aligned to the end: decoding and chunked prefill.
	Queries bool
	// GroupedHeads: fewer heads of K and V than of queries (kv_heads <
	// heads), each read once for its group.
	GroupedHeads bool
}

// Words is what the stepper says of one rung in its own terms; every field
// left empty takes the words all rungs share.
type Words struct {
	// Steps tell a kind of step: its title and explanation.
	Steps map[instrument.Kind]StepWords
	// TileStates name the states of the tile grid where this rung's
	// differ (its legend and tooltips), or add its own ("scanned"), in the
	// order the kernel reaches them.
	TileStates []TileState
	// OCaption is the O panel's caption on a step before the epilogue;
	// RowsCaption the caption of the table of rows, once the online
	// softmax is taught.
	OCaption, RowsCaption string
}

// TileState names one state of a tile in the grid's legend.
type TileState struct {
	State string `json:"state"` // as static/js/model.js's tileStates says it
	Words string `json:"words"`
}

// StepWords tell one kind of step. The page fills in {i} and {j} (the
// q-tile and kv-tile), {rows} and {keys} (their ranges, "4–7"), {head} (the
// batch-head in words) and the subscripted tiles {Q_i}, {K_j}, {V_j},
// {O_i}, and the backward's {dO_i}, {L_i}, {D_i}, {dQ_i}, {dK_j}, {dV_j}. First ends Body on the kv-tile 0 step, Later on every other.
type StepWords struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	First string `json:"first,omitempty"`
	Later string `json:"later,omitempty"`
}

// Arch names a GPU architecture a rung's kernels need.
type Arch string

// ArchHopper is sm_90a: Hopper's warpgroup products (wgmma), TMA and
// setmaxnreg, which only compute capability 9.0 runs.
const ArchHopper Arch = "sm_90a"

// Runs says whether a GPU of compute capability major.minor runs kernels
// built for a, and if not, why not in words a page can show.
func (a Arch) Runs(major, minor int) error {
	if a == ArchHopper && (major != 9 || minor != 0) {
		return fmt.Errorf("needs a Hopper GPU (sm_90a, such as the H100); this GPU is compute capability %d.%d", major, minor)
	}
	return nil
}

// ModuleArch is the architecture a PTX module (a rung's, traced or not)
// was built for: empty for the baseline.
func ModuleArch(module string) Arch {
	for _, v := range rungs {
		if module == v.Module() || module == v.Module()+"_traced" {
			return v.Arch
		}
	}
	return ""
}

// ModuleUsesTMA says whether a PTX module's kernels take tensor maps
// (Arg.Map): the worker runs them only where the driver can encode one.
func ModuleUsesTMA(module string) bool {
	for _, v := range rungs {
		if module != v.Module() && module != v.Module()+"_traced" {
			continue
		}
		for _, t := range v.Tiles {
			c := Config{Variant: v.Variant, N: t.Br, D: t.D, Br: t.Br, Bc: t.Bc, Batch: 1, Heads: 1}
			for _, k := range v.Launches(&c, t).Kernels {
				for _, a := range k.Args {
					if a.Map != nil {
						return true
					}
				}
			}
		}
	}
	return false
}

// LoopOrder is how a kernel walks the tiles, as the traffic model needs it.
type LoopOrder int

const (
	LoopFused        LoopOrder = iota // one block per q-tile walks the kv-tiles, S and P on chip
	LoopMaterialised                  // S and P through device memory, a kernel per phase
	LoopRowThreads                    // a thread per query row walks every key
	LoopKVOuter                       // kv-tiles outer, the state through device memory
)

// Name is the rung's name: its URL value, its .cu file and PTX module.
func (v *VariantInfo) Name() string { return v.Variant.String() }

// Module is the PTX module of the rung's untraced kernels; a traced run
// loads Module() + "_traced".
func (v *VariantInfo) Module() string { return v.Name() }

// TileFor finds the compiled tile that runs c, if any.
func (v *VariantInfo) TileFor(c *Config) (Tile, bool) {
	for _, t := range v.Tiles {
		if t.Fits(c) {
			return t, true
		}
	}
	return Tile{}, false
}

// SweepTile is the tile the sweep and the benchmarks run head dim d at: the
// 64×64 one for a rung compiled at teaching tiles too, else its compiled
// tile for d. A rung without compiled tiles, or none for d, has none (ok
// false): the sweep then runs it at 64×64.
func (v *VariantInfo) SweepTile(d int) (t Tile, ok bool) {
	for _, t := range v.Tiles {
		if t.D == d && (!v.TeachingTiles || t.Br == 64 && t.Bc == 64) {
			return t, true
		}
	}
	return Tile{}, false
}

// kindCount says that a q-tile's trace holds n records of a kind, emitted in
// the given phase of the variant, for kv-tiles j0, j0+1, ... (kinds with a
// kv-tile).
type kindCount struct {
	kind  instrument.Kind
	n     int
	phase int
	j0    int
	// A role record's role and event; noTile: it belongs to no kv-tile
	// (a block's closing group).
	role   instrument.Role
	event  instrument.Event
	noTile bool
	// noCols: its j is no kv-tile (a split's index), so it has no columns.
	noCols bool
}

// onePhase is the phases of a variant whose blocks each run once, start to end.
func onePhase(*Config) int { return 1 }

// rungs is the one list of the kernels, in ladder order, naive_mma, the
// tensor-core naive partner, last. Adding a rung: its files (kernels/README.md)
// and a line here.
var rungs = fromFamilies([]*VariantInfo{
	naiveRowRung,
	naiveRung,
	flash1Rung,
	flash2Rung,
	flash2MMARung,
	flash2FastRung,
	flash3WGMMARung,
	flash3TMARung,
	flash3WSRung,
	flash3PingPongRung,
	flash3OverlapRung,
	naiveMMARung,
	flash2BwdKernel,
	naiveBwdKernel,
	flash2BwdMMAKernel,
	flash3BwdWGMMAKernel,
	flash3BwdTMAKernel,
	flash3BwdBulkKernel,
	decodeGroupRung,
	decodeSplitRung,
	decodePagedRung,
})

// fromFamilies gives each entry its family's walk and, unless it has its
// own, its family's traffic model.
func fromFamilies(vs []*VariantInfo) []*VariantInfo {
	for _, v := range vs {
		v.block = v.Family.block
		if v.Traffic == nil { // a rung may read its family's operands its own way
			v.Traffic = v.Family.Traffic
		}
	}
	return vs
}

// trafficOf is a rung's traffic model, looked up when a run needs it: a
// family's walk, which the entries name, cannot name the registry they
// make up (an initialisation cycle), and a rung in a family may count its
// bytes its own way (a grouped head's shared K and V).
var trafficOf func(instrument.Variant) func(*Config, *instrument.Record) (read, written uint64)

func init() {
	trafficOf = func(v instrument.Variant) func(*Config, *instrument.Record) (uint64, uint64) {
		return variantInfo[v].Traffic
	}
}

var variantInfo = func() map[instrument.Variant]*VariantInfo {
	m := map[instrument.Variant]*VariantInfo{}
	for _, v := range rungs {
		m[v.Variant] = v
	}
	return m
}()

// Family is a set of kernels that compute the same arithmetic in the same
// order, whatever instructions and schedule carry it out. It decides what
// would otherwise be looked up rung by rung: the mirror's walk and the
// traffic model here, and, through the family, the bound a GPU trace is
// held to (kernelstest) and the tests' worked figures. A rung that changes
// only how operands arrive or when work runs (TMA, warp roles, ping-pong,
// a softmax under a product) joins its family and needs none of those
// anew; one whose arithmetic differs founds a family, in its own file,
// with its own bound and tests.
type Family struct {
	Name    string
	Traffic func(c *Config, r *instrument.Record) (read, written uint64)
	block   func(c *Config, in *Inputs, bh, i int, emit func(phase int, r *instrument.Record))
}

// ElementBytes is the size of one element of Q, K, V and O in device
// memory: 2 for bf16, 4 for float32.
func (v *VariantInfo) ElementBytes() int {
	if v.DType == instrument.DTypeBF16 {
		return 2
	}
	return 4
}

// Variants lists the kernel variants in the order pages show them.
func Variants() []*VariantInfo { return rungs }

// Info describes variant v, or nil.
func Info(v instrument.Variant) *VariantInfo { return variantInfo[v] }

func variantNames() []string {
	var n []string
	for _, v := range rungs {
		n = append(n, v.Variant.String())
	}
	return n
}

// Header is the trace header of a run of c: its shape, its selection and the
// exact count of records the trace will hold.
func (c *Config) Header(source instrument.Source, label string) instrument.Header {
	return instrument.Header{
		Variant: c.Variant, DType: c.dtype(), Source: source, Causal: c.Causal, Timing: c.Timing, Roles: c.Roles, Pattern: c.Pattern,
		N: c.N, D: c.D, Br: c.Br, Bc: c.Bc, Batch: c.Batch, Heads: c.Heads,
		Nq: c.shapeNq(), KVHeads: c.shapeKVHeads(),
		TracedBH: c.TracedBH(), TracedQ: c.TracedQ(),
		Seed: c.Seed, Scale: c.Scale(),
		Records: c.recordCount(),
		Label:   label,
	}
}

// shapeNq and shapeKVHeads are Nq and KVHeads as a header writes them:
// zero for the defaults, however the config spells them.
func (c *Config) shapeNq() int {
	if c.Nq == c.N {
		return 0
	}
	return c.Nq
}

func (c *Config) shapeKVHeads() int {
	if c.KVHeads == c.Heads {
		return 0
	}
	return c.KVHeads
}

// dtype is the element type of c's kernel; float32 for an unknown variant,
// which Validate refuses anyway.
func (c *Config) dtype() instrument.DType {
	if v := variantInfo[c.Variant]; v != nil {
		return v.DType
	}
	return instrument.DTypeF32
}

// recordCount and TraceBytes add up the records of every traced q-tile. A
// timing trace holds one timing record per step of every block, no inputs.
func (c *Config) recordCount() int {
	perBH := 1 // the inputs record
	if c.Timing {
		perBH = 0
	}
	q := c.TracedQ()
	for i := q.Lo; i < q.Hi; i++ {
		perBH += c.QTileRecords(i)
	}
	return perBH * c.TracedBH().Len()
}

// QTileRecords is how many records q-tile i leaves in one batch-head's
// trace (its steps; the inputs record is the batch-head's, not the tile's).
func (c *Config) QTileRecords(i int) int {
	n := 0
	for _, kc := range variantInfo[c.Variant].records(c, i) {
		n += kc.n
	}
	return n
}

// TraceBytes is the exact size of the trace of c with an empty source label
// (a label adds its length, rounded up to 8).
func (c *Config) TraceBytes() int64 {
	sizes := c.recordSizes()
	if c.Timing {
		return int64(sizes.h.HeaderBytes()) + int64(c.recordCount())*sizes.of(instrument.KindTiming)
	}
	perBH := sizes.of(instrument.KindInputs)
	q := c.TracedQ()
	for i := q.Lo; i < q.Hi; i++ {
		perBH += c.qTileBytes(sizes, i)
	}
	return int64(sizes.h.HeaderBytes()) + perBH*int64(c.TracedBH().Len())
}

// qTileBytes is the size of q-tile i's records in one batch-head's trace.
func (c *Config) qTileBytes(sizes *recordSizes, i int) int64 {
	var n int64
	for _, kc := range variantInfo[c.Variant].records(c, i) {
		n += int64(kc.n) * sizes.of(kc.kind)
	}
	return n
}

// recordSizes remembers each kind's record size in a trace of one run: the
// size depends on the kind alone, and a run of 1×1 tiles has millions of
// records to add up.
type recordSizes struct {
	h    instrument.Header
	size [256]int64
}

func (c *Config) recordSizes() *recordSizes {
	return &recordSizes{h: instrument.Header{N: c.N, Nq: c.shapeNq(), D: c.D, Br: c.Br, Bc: c.Bc}}
}

func (r *recordSizes) of(k instrument.Kind) int64 {
	if r.size[k] == 0 {
		r.size[k] = int64(r.h.RecordBytes(k))
	}
	return r.size[k]
}

// GPUElementBytes is the size of one element of Q, K, V and O on the GPU:
// the variant's (2 for the bf16 kernels, 4 for the float32 ones).
func (c *Config) GPUElementBytes() int {
	if v := Info(c.Variant); v != nil {
		return v.ElementBytes()
	}
	return 4
}

// ConfigFromHeader is the run a trace header describes, selection included.
func ConfigFromHeader(h *instrument.Header) Config {
	c := Config{Variant: h.Variant, N: h.N, D: h.D, Br: h.Br, Bc: h.Bc, Batch: h.Batch, Heads: h.Heads, Nq: h.Nq, KVHeads: h.KVHeads,
		Causal: h.Causal, Pattern: h.Pattern, Seed: h.Seed, Timing: h.Timing, Roles: h.Roles}
	if h.TracedBH != c.TracedBH() {
		c.TraceBH = h.TracedBH
	}
	if h.TracedQ != c.TracedQ() {
		c.TraceQ = h.TracedQ
	}
	return c
}

// PageRung is what the browser's scripts know of a rung (each page carries
// the list, as JSON): how to name it, colour it and describe its traffic.
type PageRung struct {
	Name      string `json:"name"`
	Title     string `json:"title"`
	DType     string `json:"dtype"`
	Colour    string `json:"colour"`
	BytesNote string `json:"bytes_note,omitempty"`
	// Materialised, as VariantInfo's: S and P through device memory.
	Materialised bool `json:"materialised"`
	// Backward: the kernel is attention's backward pass (static/js/backward.js
	// draws its steps).
	Backward bool `json:"backward,omitempty"`
	// Splits: the rung cuts the keys into splits by DecodeSplits' rule
	// (static/js/splits.js); Paged: it reads them through a block table
	// (PageOf; static/js/pages.js).
	Splits bool `json:"splits,omitempty"`
	Paged  bool `json:"paged,omitempty"`
	// The rung's own words (Words), steps by the record kind's name.
	Steps       map[string]StepWords `json:"steps,omitempty"`
	TileStates  []TileState          `json:"tile_states,omitempty"`
	OCaption    string               `json:"o_caption,omitempty"`
	RowsCaption string               `json:"rows_caption,omitempty"`
}

// RungsForPages is every rung as the pages' scripts read it, in ladder
// order.
func RungsForPages() []PageRung {
	var out []PageRung
	for _, v := range rungs {
		steps := map[string]StepWords{}
		for k, w := range v.Words.Steps {
			steps[k.String()] = w
		}
		out = append(out, PageRung{Name: v.Name(), Title: v.Title, DType: v.DType.String(), Colour: v.Colour, BytesNote: v.BytesNote, Materialised: v.Materialised, Backward: v.Backward,
			Splits: v.Family == FamilyDecodeSplit, Paged: v.Paged,
			Steps: steps, TileStates: v.Words.TileStates, OCaption: v.Words.OCaption, RowsCaption: v.Words.RowsCaption})
	}
	return out
}
