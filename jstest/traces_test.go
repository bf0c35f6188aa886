package jstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The trace fixtures (testdata/traces/): each NAME.fstrace is a trace the
// Go encoder wrote, NAME.json what it holds, every field of its header and
// of each record and every element of each array (a float32 as its bits),
// as the page's decoder (static/js/trace.js) names them. index.json lists
// them, and the rejected ones: traces Go's decoder refuses, which the
// page's must refuse too.

type traceSummary struct {
	Header  headerSummary   `json:"header"`
	Records []recordSummary `json:"records"`
}

type headerSummary struct {
	Variant         string `json:"variant"`
	DType           string `json:"dtype"`
	Source          string `json:"source"`
	Pattern         string `json:"pattern"`
	Causal          bool   `json:"causal"`
	Timing          bool   `json:"timing"`
	Roles           bool   `json:"roles"`
	N               int    `json:"N"`
	D               int    `json:"D"`
	Br              int    `json:"Br"`
	Bc              int    `json:"Bc"`
	Batch           int    `json:"batch"`
	Heads           int    `json:"heads"`
	Nq              int    `json:"Nq"`      // the query rows, N before format version 4
	KVHeads         int    `json:"kvHeads"` // the heads of K and V, heads before version 4
	TracedBH        [2]int `json:"tracedBH"`
	TracedQ         [2]int `json:"tracedQ"`
	Seed            string `json:"seed"`
	ScaleBits       uint32 `json:"scaleBits"`
	NumSMs          int    `json:"numSMs"`
	TimerTickNsBits uint32 `json:"timerTickNsBits"`
	Records         int    `json:"records"`
	RecordedUnix    int64  `json:"recordedUnix"`
	Label           string `json:"label"`
	Bytes           int    `json:"bytes"`
	Version         int    `json:"version"`
	Tr              int    `json:"Tr"`
	Tc              int    `json:"Tc"`
}

type recordSummary struct {
	Kind         string      `json:"kind"`
	BH           int         `json:"bh"`
	I            int         `json:"i"`
	J            int         `json:"j"`
	RowsValid    int         `json:"rowsValid"`
	ColsValid    int         `json:"colsValid"`
	SM           int         `json:"sm"`
	BytesRead    uint64      `json:"bytesRead"`
	BytesWritten uint64      `json:"bytesWritten"`
	TStart       string      `json:"tStart"` // decimal: a u64 the page reads as a BigInt
	TEnd         string      `json:"tEnd"`
	Size         int         `json:"size"`
	Role         string      `json:"role,omitempty"`
	Event        string      `json:"event,omitempty"`
	Arrays       []arrayBits `json:"arrays"`
}

type arrayBits struct {
	Name string   `json:"name"`
	Bits []uint32 `json:"bits"`
}

type traceIndex struct {
	Traces   []traceEntry   `json:"traces"`
	Rejected []rejectedFile `json:"rejected"`
}

// traceEntry is a trace (File.fstrace), what it holds (Summary.json) and
// its format version, which the summary's header holds for the version it
// was written in.
type traceEntry struct {
	File    string `json:"file"`
	Summary string `json:"summary"`
	Version int    `json:"version"`
}

// sameRecords says whether a and b hold the same header (its version
// aside) and records.
func sameRecords(a, b traceSummary) bool {
	a.Header.Version, b.Header.Version = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// rejectedFile is a trace Go's decoder refuses, and why.
type rejectedFile struct {
	File string `json:"file"`
	Why  string `json:"why"`
	Go   string `json:"go"` // Go's error
}

// arrayOf is the array of r the wire calls name.
func arrayOf(r *instrument.Record, name string) (*[]float32, bool) {
	m := map[string]*[]float32{
		"q": &r.Q, "k": &r.K, "v": &r.V, "m_old": &r.MOld, "m_new": &r.MNew, "m": &r.MNew, "alpha": &r.Alpha, "l": &r.L,
		"s": &r.S, "p": &r.P, "o": &r.O, "lse": &r.LSE, "do": &r.DO, "delta": &r.Delta, "dp": &r.DP, "ds": &r.DS,
		"dv": &r.DV, "dk": &r.DK, "dq": &r.DQ, "w": &r.Alpha,
	}
	a, ok := m[name]
	return a, ok
}

func spec(t *testing.T, k instrument.Kind) *instrument.KindSpec {
	t.Helper()
	s, ok := instrument.Spec(k)
	if !ok {
		t.Fatalf("no kind %d", k)
	}
	return s
}

func variant(t *testing.T, name string) instrument.Variant {
	t.Helper()
	v, ok := instrument.ParseVariant(name)
	if !ok {
		t.Fatalf("no variant %q", name)
	}
	return v
}

// summarise is what a trace holds, from Go's decoder, as the page's
// decoder names it; version is the header's.
func summarise(t *testing.T, raw []byte, version int) traceSummary {
	t.Helper()
	h, recs, err := instrument.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	s := traceSummary{Header: headerSummary{
		Variant: h.Variant.String(), DType: h.DType.String(), Source: h.Source.String(), Pattern: h.Pattern.String(),
		Causal: h.Causal, Timing: h.Timing, Roles: h.Roles,
		N: h.N, D: h.D, Br: h.Br, Bc: h.Bc, Batch: h.Batch, Heads: h.Heads, Nq: h.Queries(), KVHeads: h.KVHeadCount(),
		TracedBH: [2]int{h.TracedBH.Lo, h.TracedBH.Hi}, TracedQ: [2]int{h.TracedQ.Lo, h.TracedQ.Hi},
		Seed: strconv.FormatUint(h.Seed, 10), ScaleBits: math.Float32bits(h.Scale), NumSMs: h.NumSMs,
		TimerTickNsBits: math.Float32bits(h.TimerTickNs), Records: h.Records, RecordedUnix: h.RecordedUnix,
		Label: h.Label, Bytes: h.HeaderBytes(), Version: version, Tr: h.Tr(), Tc: h.Tc(),
	}}
	for _, r := range recs {
		sp := spec(t, r.Kind)
		rs := recordSummary{
			Kind: sp.Name, BH: r.BH, I: r.I, J: r.J, RowsValid: r.RowsValid, ColsValid: r.ColsValid, SM: r.SM,
			BytesRead: r.BytesRead, BytesWritten: r.BytesWritten,
			TStart: strconv.FormatUint(r.TStart, 10), TEnd: strconv.FormatUint(r.TEnd, 10),
			Size: h.RecordBytes(r.Kind), Arrays: []arrayBits{},
		}
		if r.Kind == instrument.KindRole {
			rs.Role, rs.Event = r.Role.String(), r.Event.String()
		}
		for _, a := range sp.Arrays {
			vals, ok := arrayOf(r, a.Name)
			if !ok {
				t.Fatalf("the %s record's array %q is new here: add it to arrayOf", sp.Name, a.Name)
			}
			bits := make([]uint32, len(*vals))
			for k, v := range *vals {
				bits[k] = math.Float32bits(v)
			}
			rs.Arrays = append(rs.Arrays, arrayBits{a.Name, bits})
		}
		s.Records = append(s.Records, rs)
	}
	return s
}

// encode writes h and recs with the Go encoder, and checks that Go's
// decoder reads back every field and every bit of every array.
func encode(t *testing.T, h *instrument.Header, recs []*instrument.Record) []byte {
	t.Helper()
	h.Records = len(recs)
	raw, err := instrument.AppendHeader(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if raw, err = instrument.AppendRecord(raw, h, r); err != nil {
			t.Fatal(err)
		}
	}
	back, got, err := instrument.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if *back != *h || len(got) != len(recs) {
		t.Fatalf("the trace reads back as %+v with %d records, was %+v with %d", back, len(got), h, len(recs))
	}
	for k, r := range recs {
		g := got[k]
		if g.Kind != r.Kind || g.BH != r.BH || g.I != r.I || g.J != r.J || g.RowsValid != r.RowsValid || g.ColsValid != r.ColsValid ||
			g.SM != r.SM || g.TStart != r.TStart || g.TEnd != r.TEnd || g.BytesRead != r.BytesRead || g.BytesWritten != r.BytesWritten ||
			g.Role != r.Role || g.Event != r.Event {
			t.Fatalf("record %d reads back as %+v, was %+v", k, g, r)
		}
		for _, a := range spec(t, r.Kind).Arrays {
			want, _ := arrayOf(r, a.Name)
			have, _ := arrayOf(g, a.Name)
			for e := range *want {
				if math.Float32bits((*want)[e]) != math.Float32bits((*have)[e]) {
					t.Fatalf("record %d array %s[%d] reads back as %#x, was %#x", k, a.Name, e, math.Float32bits((*have)[e]), math.Float32bits((*want)[e]))
				}
			}
		}
	}
	return raw
}

// odd is a float32 from every corner of the format: ordinary values of
// many sizes, ±0, ±∞, NaNs with payloads, subnormals, the extremes.
func odd(rng *rand.Rand) float32 {
	sign := uint32(rng.IntN(2)) << 31
	switch rng.IntN(12) {
	case 0:
		return math.Float32frombits(sign) // ±0
	case 1:
		return math.Float32frombits(sign | 0x7f800000) // ±∞
	case 2:
		return math.Float32frombits(sign | 0x7f800000 | (1 + rng.Uint32()%0x7fffff)) // NaN, payload
	case 3:
		return math.Float32frombits(sign | (1 + rng.Uint32()%0x7fffff)) // subnormal
	case 4:
		return math.Float32frombits(sign | 0x7f7fffff) // ±MaxFloat32
	case 5:
		return math.Float32frombits(sign | rng.Uint32()&0x7f7fffff) // any finite bits
	default:
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4)))
	}
}

func odds(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for k := range out {
		out[k] = odd(rng)
	}
	return out
}

// record is a record of kind k at (bh, i, j) with the tiling's extents,
// odd arrays and stamps; i or j −1 where the kind has none.
func record(t *testing.T, rng *rand.Rand, h *instrument.Header, k instrument.Kind, bh, i, j int) *instrument.Record {
	sp := spec(t, k)
	r := &instrument.Record{Kind: k, BH: bh, I: i, J: j, SM: rng.IntN(max(1, h.NumSMs)),
		BytesRead: rng.Uint64N(1 << 40), BytesWritten: rng.Uint64N(1 << 40)}
	if i >= 0 {
		r.RowsValid = h.RowsValid(i)
	}
	if j >= 0 {
		r.ColsValid = h.ColsValid(j)
	}
	// Stamps past 2⁵³, where a float64 would lose nanoseconds.
	r.TStart = 1<<60 + rng.Uint64N(1<<40)
	r.TEnd = r.TStart + rng.Uint64N(1<<20)
	for _, a := range sp.Arrays {
		vals, _ := arrayOf(r, a.Name)
		*vals = odds(rng, h.ArrayLen(&a))
	}
	return r
}

// synthetic traces: every record kind, with odd values and large stamps,
// under headers that use every field.
func syntheticTraces(t *testing.T, rng *rand.Rand) map[string][]byte {
	out := map[string][]byte{}

	// Every kind a trace with arrays holds, ragged tiles, a traced corner of
	// a batch of heads, a label in UTF-8.
	h := &instrument.Header{
		Variant: variant(t, "flash2"), DType: instrument.DTypeF32, Source: instrument.SourceRecording, Causal: true,
		Pattern: instrument.PatternPeaked, N: 37, D: 3, Br: 8, Bc: 6, Batch: 2, Heads: 3,
		TracedBH: instrument.Range{Lo: 1, Hi: 5}, TracedQ: instrument.Range{Lo: 1, Hi: 5},
		Seed: 1<<63 + 5, Scale: float32(1 / math.Sqrt(3)), NumSMs: 132, TimerTickNs: 32.5,
		RecordedUnix: 1764000000, Label: "H100 80GB HBM3 · recorded — naïve ∞",
	}
	var recs []*instrument.Record
	for _, bh := range []int{1, 4} {
		recs = append(recs, record(t, rng, h, instrument.KindInputs, bh, -1, -1))
		for _, i := range []int{1, 4} {
			for _, k := range []instrument.Kind{instrument.KindFlashStep, instrument.KindScores, instrument.KindPV, instrument.KindBwdStep, instrument.KindBwdDP, instrument.KindBwdKV} {
				recs = append(recs, record(t, rng, h, k, bh, i, rng.IntN(h.Tc())))
			}
			recs = append(recs, record(t, rng, h, instrument.KindFlashStep, bh, i, h.Tc()-1)) // the ragged last kv-tile
			for _, k := range []instrument.Kind{instrument.KindSoftmax, instrument.KindEpilogue, instrument.KindBwdPre, instrument.KindBwdDQ, instrument.KindBwdDS} {
				recs = append(recs, record(t, rng, h, k, bh, i, -1))
			}
		}
	}
	out["kinds"] = encode(t, h, recs)

	// Fewer queries than keys and grouped heads (format version 4): the
	// inputs' Q has Nq rows, q-tiles count them, the last one ragged.
	h = &instrument.Header{
		Variant: variant(t, "flash2"), DType: instrument.DTypeF32, Source: instrument.SourceCPUMirror, Causal: true,
		Pattern: instrument.PatternNormal, N: 37, Nq: 21, D: 4, Br: 8, Bc: 8, Batch: 1, Heads: 4, KVHeads: 2,
		TracedBH: instrument.Range{Lo: 0, Hi: 4}, TracedQ: instrument.Range{Lo: 0, Hi: 3},
		Seed: 7, Scale: 0.5, Label: "nq 21 of n 37, 4 heads over 2",
	}
	recs = nil
	for _, bh := range []int{0, 3} {
		recs = append(recs, record(t, rng, h, instrument.KindInputs, bh, -1, -1))
		for i := range h.Tr() {
			recs = append(recs, record(t, rng, h, instrument.KindFlashStep, bh, i, h.Tc()-1), record(t, rng, h, instrument.KindEpilogue, bh, i, -1))
		}
	}
	out["shapes"] = encode(t, h, recs)

	// A timing trace: SMs and stamps alone, an epilogue's without a kv-tile.
	h = &instrument.Header{
		Variant: variant(t, "flash2_fast"), DType: instrument.DTypeBF16, Source: instrument.SourceGPU, Timing: true,
		Pattern: instrument.PatternLarge, N: 200, D: 64, Br: 64, Bc: 64, Batch: 1, Heads: 2,
		TracedBH: instrument.Range{Lo: 0, Hi: 2}, TracedQ: instrument.Range{Lo: 0, Hi: 4},
		Seed: 7, Scale: 0.125, NumSMs: 132, TimerTickNs: 1, Label: "NVIDIA H100 80GB HBM3",
	}
	recs = nil
	for bh := range 2 {
		for i := range 4 {
			for _, j := range blockOrder(h) {
				recs = append(recs, record(t, rng, h, instrument.KindTiming, bh, i, j))
			}
		}
	}
	out["timing"] = encode(t, h, recs)

	// A roles trace: each warp role's events, per kv-tile or in the
	// closing group, beside the steps' timing records.
	h = &instrument.Header{
		Variant: variant(t, "flash3_pingpong"), DType: instrument.DTypeBF16, Source: instrument.SourceRecording, Timing: true, Roles: true,
		Pattern: instrument.PatternNormal, N: 300, D: 64, Br: 128, Bc: 128, Batch: 1, Heads: 1,
		TracedBH: instrument.Range{Lo: 0, Hi: 1}, TracedQ: instrument.Range{Lo: 0, Hi: 3},
		Seed: 1, Scale: 0.125, NumSMs: 132, TimerTickNs: 32, RecordedUnix: 1700000000, Label: "NVIDIA H100 80GB HBM3, roles",
	}
	recs = nil
	for i := range 3 {
		for _, j := range blockOrder(h) {
			recs = append(recs, record(t, rng, h, instrument.KindTiming, 0, i, j))
			for role := instrument.RoleProducer; role <= instrument.RoleConsumer1; role++ {
				for e := instrument.Event(1); e <= instrument.EventClock; e++ {
					if !role.HasEvent(e) || e.PerTile() != (j >= 0) {
						continue
					}
					r := record(t, rng, h, instrument.KindRole, 0, i, j)
					r.Role, r.Event, r.BytesWritten = role, e, 0
					recs = append(recs, r)
				}
			}
		}
	}
	out["roles"] = encode(t, h, recs)
	return out
}

// blockOrder is a block's steps: its kv-tiles in order, then its epilogue
// (−1).
func blockOrder(h *instrument.Header) []int {
	var out []int
	for j := range h.Tc() {
		out = append(out, j)
	}
	return append(out, -1)
}

// tailTraces are runs of fewer queries than keys with grouped heads, in
// kernels' own order and with their own numbers, made from square mirror
// runs until a mirror runs such shapes itself: each is the last nq rows of
// a causal run whose first n − nq rows are whole q-tiles (skip of them).
// A q-tile of flash2 or naive depends on its own rows alone, so its
// records are those the nq run writes (the inputs' rule: a run with
// nq < n is the bottom rows of the nq = n run), its q-tiles renumbered
// from 0 and the inputs' Q cut to its rows. The header says nq, and 2
// heads over 1 head of K and V with head 0 traced: its K and V are its
// group's, as a grouped run draws them.
func tailTraces(t *testing.T) map[string][]byte {
	const skip = 3 // q-tiles left out: query row 0 is position skip·Br = 12
	out := map[string][]byte{}
	for _, variant := range []string{"flash2", "naive"} {
		raw := mirrorTrace(t, "variant="+variant+"&n=42&d=4&br=4&bc=8&causal=1&seed=11")
		h, recs, err := instrument.ReadAll(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if h.TracedQ.Lo != 0 || h.Batch != 1 || h.Heads != 1 || !h.Causal {
			t.Fatalf("%s: the square run is not one causal head with every q-tile traced: %+v", variant, h)
		}
		nh := *h
		nh.Nq = h.N - skip*h.Br
		nh.Heads, nh.KVHeads = 2, 1
		nh.TracedBH = instrument.Range{Lo: 0, Hi: 1}
		nh.TracedQ = instrument.Range{Lo: 0, Hi: h.TracedQ.Hi - skip}
		nh.Label = fmt.Sprintf("the last %d of %d rows of a CPU mirror run, 2 heads over 1", nh.Nq, h.N)
		var kept []*instrument.Record
		for _, r := range recs {
			c := *r
			switch {
			case r.Kind == instrument.KindInputs:
				c.Q = r.Q[skip*h.Br*h.D:]
			case r.I >= 0 && r.I < skip:
				continue
			case r.I >= 0:
				c.I -= skip
			}
			kept = append(kept, &c)
		}
		if nh.Tr() != h.Tr()-skip || len(kept) == len(recs) {
			t.Fatalf("%s: %d of %d q-tiles, %d of %d records kept", variant, nh.Tr(), h.Tr(), len(kept), len(recs))
		}
		out["tail-"+variant] = encode(t, &nh, kept)
	}
	return out
}

// mirrorTrace is the trace the CPU mirror writes for the run of query q.
func mirrorTrace(t *testing.T, q string) []byte {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	run, err := kernels.ParseRun(v)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var raw []byte
	if err := kernels.MirrorTrace(context.Background(), run, func(chunk []byte) error { raw = append(raw, chunk...); return nil }); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return raw
}

// mirrorTraces are traces the CPU mirror writes, in each kernel's own
// order: what the pages step.
func mirrorTraces(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for name, q := range map[string]string{
		"flash2":     "variant=flash2&n=29&d=4&br=8&bc=8&causal=1&heads=2&seed=3",
		"flash1":     "variant=flash1&n=20&d=4&br=8&bc=8&causal=1&seed=4",
		"naive":      "variant=naive&n=24&d=4&br=8&bc=8&causal=1&seed=5",
		"naive_row":  "variant=naive_row&n=20&d=4&br=8&bc=8&seed=6",
		"flash2_bwd": "variant=flash2_bwd&n=24&d=4&br=8&bc=8&causal=1&seed=7",
		"naive_bwd":  "variant=naive_bwd&n=16&d=4&br=8&bc=8&seed=8",
		// Split-KV: one query against 256 keys in 4 kv-tiles, 2 query
		// heads over 1 of K and V; a block's 4 kv-tiles make 4 splits of
		// one (kernels.DecodeSplits).
		"decode_split": "variant=decode_split&n=256&nq=1&d=4&br=1&bc=64&heads=2&kv_heads=1&seed=9",
		// Causal, 72 q-tiles of one row against 9 kv-tiles: 3 splits of 3
		// kv-tiles. Of the traced q-tiles (positions 46 to 49), 46 and 47
		// see kv-tiles 0 to 5 (split 2 none of them: LSE_2 = −∞, weight
		// 0), 48 and 49 kv-tile 6 too (split 2 in part).
		"decode_split-causal": "variant=decode_split&n=72&d=4&br=1&bc=8&causal=1&seed=10&trace_q=46-49",
	} {
		out["mirror-"+name] = mirrorTrace(t, q)
	}
	return out
}

// field is the offset of a wire field.
func field(t *testing.T, fields []instrument.WireField, name string) int {
	t.Helper()
	for _, f := range fields {
		if f.Name == name {
			return f.Offset
		}
	}
	t.Fatalf("no wire field %q", name)
	return 0
}

func traceFixtures(t *testing.T, files map[string][]byte) {
	rng := rand.New(rand.NewPCG(32, 5)) // fixed: the fixtures are committed
	traces := syntheticTraces(t, rng)
	for name, raw := range mirrorTraces(t) {
		traces[name] = raw
	}
	for name, raw := range tailTraces(t) {
		traces[name] = raw
	}
	hf, rf := instrument.HeaderFields(), instrument.RecordHeaderFields()
	setVersion := func(raw []byte, v uint16) []byte {
		out := bytes.Clone(raw)
		binary.LittleEndian.PutUint16(out[field(t, hf, "version"):], v)
		return out
	}
	// asVersion is raw as an older version wrote it: before version 4 the
	// bytes of nq and kv_heads were padding, zero.
	asVersion := func(raw []byte, v uint16) []byte {
		out := setVersion(raw, v)
		if v < 4 {
			clear(out[field(t, hf, "kv_heads") : field(t, hf, "nq")+4])
		}
		return out
	}
	headerBytes := func(raw []byte) int { return int(binary.LittleEndian.Uint16(raw[field(t, hf, "header_bytes"):])) }

	// Older versions of the format, as they were written: a forward trace as
	// version 1, a backward one as version 2.
	versions := map[string]int{"mirror-flash2-v1": 1, "mirror-flash2_bwd-v2": 2}
	olderOf := map[string]string{"mirror-flash2-v1": "mirror-flash2", "mirror-flash2_bwd-v2": "mirror-flash2_bwd"}
	for name, v := range versions {
		traces[name] = asVersion(traces[olderOf[name]], uint16(v))
	}

	var index traceIndex
	for name, raw := range traces {
		files["traces/"+name+".fstrace"] = raw
		entry := traceEntry{File: name, Summary: name, Version: instrument.FormatVersion}
		if v, ok := versions[name]; ok {
			// The same records as the trace it was written from: its
			// summary, under the older version.
			entry.Summary, entry.Version = olderOf[name], v
			if want, got := summarise(t, traces[olderOf[name]], instrument.FormatVersion), summarise(t, raw, v); !sameRecords(want, got) {
				t.Fatalf("%s reads back other than %s", name, olderOf[name])
			}
		} else {
			files["traces/"+name+".json"] = jsonFile(t, summarise(t, raw, instrument.FormatVersion))
		}
		index.Traces = append(index.Traces, entry)
	}
	slices.SortFunc(index.Traces, func(a, b traceEntry) int { return strings.Compare(a.File, b.File) })

	// What Go's decoder refuses, the page's must too.
	first := headerBytes // the first record's offset
	patch := func(raw []byte, at int, b ...byte) []byte {
		out := bytes.Clone(raw)
		copy(out[at:], b)
		return out
	}
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	small, roles, bwd, timing := traces["mirror-naive_bwd"], traces["roles"], traces["mirror-flash2_bwd"], traces["timing"]
	roleAt := -1 // the offset of the roles trace's first role record
	rh, rrecs, _ := instrument.ReadAll(bytes.NewReader(roles))
	for k, off := 0, first(roles); roleAt < 0; k++ {
		if rrecs[k].Kind == instrument.KindRole {
			roleAt = off
		}
		off += rh.RecordBytes(rrecs[k].Kind)
	}
	sh, srecs, _ := instrument.ReadAll(bytes.NewReader(small))
	lastSize := sh.RecordBytes(srecs[len(srecs)-1].Kind)
	th, _, _ := instrument.ReadAll(bytes.NewReader(timing))
	shapes := traces["shapes"]
	shh, _, _ := instrument.ReadAll(bytes.NewReader(shapes))
	for _, c := range []struct {
		name, why string
		raw       []byte
	}{
		{"magic", "the magic is not FSTR", patch(timing, field(t, hf, "magic"), 'F', 'S', 'T', 'X')},
		{"version-0", "format version 0", setVersion(timing, 0)},
		{"version-next", "a format version newer than the page reads", setVersion(timing, instrument.FormatVersion+1)},
		{"header-bytes", "the header's size does not fit its label", patch(timing, field(t, hf, "header_bytes"), byte(headerBytes(timing)+8), byte((headerBytes(timing)+8)>>8))},
		{"bwd-in-v1", "a backward record in a version-1 trace", asVersion(bwd, 1)},
		{"roles-in-v2", "a role record in a version-2 trace", asVersion(roles, 2)},
		{"nq-in-v3", "a version-3 trace with bytes where version 4 keeps nq", setVersion(timing, 3)},
		{"nq-past-n", "nq above n", patch(timing, field(t, hf, "nq"), u32(uint32(th.N+1))...)},
		{"nq-zero", "a version-4 trace without nq", patch(timing, field(t, hf, "nq"), 0, 0, 0, 0)},
		{"kv-heads-indivisible", "kv_heads that does not divide heads", patch(shapes, field(t, hf, "kv_heads"), byte(shh.Heads-1), 0)},
		{"unknown-kind", "a record of a kind no version has", patch(small, first(small)+field(t, rf, "kind"), 99)},
		{"outside-bh", "a record of a batch-head not traced", patch(small, first(small)+field(t, rf, "bh"), u32(uint32(sh.TracedBH.Hi))...)},
		{"outside-q", "a record of a q-tile not traced", patch(timing, first(timing)+field(t, rf, "i"), u32(uint32(th.TracedQ.Hi))...)},
		{"outside-kv", "a record of a kv-tile past the last", patch(timing, first(timing)+field(t, rf, "j"), u32(uint32(th.Tc()))...)},
		{"role-byte", "a timing record with a role", patch(timing, first(timing)+field(t, rf, "role"), 1)},
		{"role-event", "a producer's role record with a consumer's event", patch(roles, roleAt+field(t, rf, "event"), byte(instrument.EventSoftmax))},
		{"role-backwards", "a role record that ends before it starts", patch(roles, roleAt+field(t, rf, "t_end"), 0, 0, 0, 0, 0, 0, 0, 0)},
		{"trailing", "a whole record after the last", append(bytes.Clone(small), small[len(small)-lastSize:]...)},
		{"cut", "a trace cut short in its last record", bytes.Clone(small[:len(small)-12])},
	} {
		_, _, err := instrument.ReadAll(bytes.NewReader(c.raw))
		if err == nil {
			t.Fatalf("rejected/%s: Go's decoder reads it (%s)", c.name, c.why)
		}
		files["traces/rejected-"+c.name+".fstrace"] = c.raw
		index.Rejected = append(index.Rejected, rejectedFile{"rejected-" + c.name, c.why, err.Error()})
	}
	files["traces/index.json"] = jsonFile(t, index)
}
