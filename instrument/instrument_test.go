package instrument

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"flashstep/internal/testrand"
)

var update = flag.Bool("update", false, "rewrite the generated ABI files")

// randomHeader draws a valid header with small dimensions.
func randomHeader(rng *rand.Rand) *Header {
	h := &Header{
		Variant: Variants[rng.IntN(len(Variants))],
		DType:   DTypeF32,
		Source:  Source(1 + rng.IntN(3)),
		Causal:  rng.IntN(2) == 0,
		Pattern: Patterns[rng.IntN(len(Patterns))],
		N:       1 + rng.IntN(40),
		D:       1 + rng.IntN(9),
		Br:      1 + rng.IntN(8),
		Bc:      1 + rng.IntN(8),
		Batch:   1 + rng.IntN(3),
		Heads:   1 + rng.IntN(3),
		Seed:    rng.Uint64(),
		Scale:   rng.Float32() + 0.01,
		Label:   []string{"", "CPU mirror", "NVIDIA H100 80GB HBM3, driver 580.159.04 — recorded"}[rng.IntN(3)],
	}
	if rng.IntN(3) == 0 { // fewer queries than keys, the last of them (format version 4)
		h.Nq = 1 + rng.IntN(h.N)
	}
	if rng.IntN(3) == 0 { // grouped heads: a divisor of Heads (1 for multi-query)
		for h.KVHeads = 1 + rng.IntN(h.Heads); h.Heads%h.KVHeads != 0; h.KVHeads-- {
		}
	}
	// Zero is the default's one spelling: a header reads back so.
	if h.Nq == h.N {
		h.Nq = 0
	}
	if h.KVHeads == h.Heads {
		h.KVHeads = 0
	}
	bh := h.Batch * h.Heads
	lo := rng.IntN(bh)
	h.TracedBH = Range{lo, lo + 1 + rng.IntN(bh-lo)}
	lo = rng.IntN(h.Tr())
	h.TracedQ = Range{lo, lo + 1 + rng.IntN(h.Tr()-lo)}
	if h.Source == SourceGPU {
		h.NumSMs, h.TimerTickNs = 132, 32
	}
	return h
}

func randomFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(rng.Uint32()) // every bit pattern, NaNs included
	}
	return v
}

// randomRecord draws a valid record of kind k under h.
func randomRecord(rng *rand.Rand, h *Header, k Kind) *Record {
	spec, _ := Spec(k)
	r := &Record{Kind: k, BH: h.TracedBH.Lo + rng.IntN(h.TracedBH.Len()), I: -1, J: -1,
		SM: rng.IntN(132), TStart: rng.Uint64(), TEnd: rng.Uint64(),
		BytesRead: rng.Uint64(), BytesWritten: rng.Uint64()}
	if spec.HasI {
		r.I = h.TracedQ.Lo + rng.IntN(h.TracedQ.Len())
		r.RowsValid = h.RowsValid(r.I)
	}
	if spec.HasJ {
		r.J = rng.IntN(h.Tc())
		r.ColsValid = h.ColsValid(r.J)
		if spec.SplitJ { // a split: no columns
			r.ColsValid = 0
		}
		if spec.OptionalJ && rng.IntN(2) == 0 {
			r.J, r.ColsValid = -1, 0
		}
	}
	if k == KindRole {
		r.Role = Role(1 + rng.IntN(3))
		for !r.Role.HasEvent(r.Event) {
			r.Event = Event(1 + rng.IntN(len(eventNames)))
		}
		// A span of a kv-tile has one; the closing group's spans have none.
		if r.Event.PerTile() {
			r.J = rng.IntN(h.Tc())
			r.ColsValid = h.ColsValid(r.J)
		} else {
			r.J, r.ColsValid = -1, 0
		}
		r.TStart, r.TEnd = min(r.TStart, r.TEnd), max(r.TStart, r.TEnd)
		r.BytesWritten = 0
	}
	for i := range spec.Arrays {
		*spec.Arrays[i].field(r) = randomFloats(rng, h.ArrayLen(&spec.Arrays[i]))
	}
	return r
}

func randomTrace(rng *rand.Rand) (*Header, []*Record, []byte) {
	h := randomHeader(rng)
	n := rng.IntN(12)
	h.Records = n
	h.Timing = rng.IntN(4) == 0
	h.Roles = h.Timing && rng.IntN(2) == 0
	if h.Roles {
		h.Variant = []Variant{VariantFlash3WS, VariantFlash3PingPong}[rng.IntN(2)]
	}
	buf, err := AppendHeader(nil, h)
	if err != nil {
		panic(err)
	}
	recs := make([]*Record, n)
	for i := range recs {
		// A timing trace holds timing records alone, and a roles trace
		// role records too; no other trace holds either.
		kind := KindTiming
		if h.Roles && rng.IntN(2) == 0 {
			kind = KindRole
		}
		for !h.Timing && (kind == KindTiming || kind == KindRole) {
			kind = Kinds[rng.IntN(len(Kinds))].Kind
		}
		recs[i] = randomRecord(rng, h, kind)
		if buf, err = AppendRecord(buf, h, recs[i]); err != nil {
			panic(err)
		}
	}
	return h, recs, buf
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 500 {
		h, recs, buf := randomTrace(rng)
		if len(buf)%8 != 0 {
			t.Fatalf("trace of %d bytes is not 8-aligned", len(buf))
		}
		gotH, gotRecs, err := ReadAll(bytes.NewReader(buf))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(gotH, h) {
			t.Fatalf("header round trip:\n got %+v\nwant %+v", gotH, h)
		}
		if len(gotRecs) != len(recs) {
			t.Fatalf("%d records back, wrote %d", len(gotRecs), len(recs))
		}
		for i := range recs {
			if !sameBits(gotRecs[i], recs[i]) {
				t.Fatalf("record %d (%s) differs after round trip", i, recs[i].Kind)
			}
		}
		want := h.HeaderBytes()
		for _, r := range recs {
			want += h.RecordBytes(r.Kind)
		}
		if want != len(buf) {
			t.Fatalf("sizes predict %d bytes, encoding has %d", want, len(buf))
		}
	}
}

// sameBits compares records bit for bit, so NaN payloads count as equal.
func sameBits(a, b *Record) bool {
	spec, _ := Spec(a.Kind)
	ca, cb := *a, *b
	for i := range spec.Arrays {
		fa, fb := spec.Arrays[i].field(&ca), spec.Arrays[i].field(&cb)
		if len(*fa) != len(*fb) {
			return false
		}
		for k := range *fa {
			if math.Float32bits((*fa)[k]) != math.Float32bits((*fb)[k]) {
				return false
			}
		}
		*fa, *fb = nil, nil
	}
	return reflect.DeepEqual(ca, cb)
}

func TestWireSizes(t *testing.T) {
	t.Parallel()
	if got := binary.Size(headerWire{}); got != headerWireBytes {
		t.Errorf("headerWire is %d bytes, the format says %d", got, headerWireBytes)
	}
	if got := binary.Size(recordHeaderWire{}); got != recordHeaderWireBytes {
		t.Errorf("recordHeaderWire is %d bytes, the format says %d", got, recordHeaderWireBytes)
	}
	// Go's in-memory layout must equal the packed wire layout, or the
	// offsets exported to C and JS would not be the wire's.
	for _, typ := range []reflect.Type{reflect.TypeFor[headerWire](), reflect.TypeFor[recordHeaderWire]()} {
		off := 0
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if int(f.Offset) != off {
				t.Errorf("%s.%s at %d, packed layout puts it at %d", typ.Name(), f.Name, f.Offset, off)
			}
			off += int(f.Type.Size())
		}
		if uintptr(off) != typ.Size() || off%8 != 0 {
			t.Errorf("%s: %d bytes packed, %d in memory", typ.Name(), off, typ.Size())
		}
	}
}

func TestDecoderRejects(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	var h *Header
	var buf []byte
	for h == nil || h.Records == 0 {
		h, _, buf = randomTrace(rng)
	}
	cases := map[string]func([]byte) []byte{
		"bad magic":         func(b []byte) []byte { b[0] = 'X'; return b },
		"future version":    func(b []byte) []byte { b[4] = FormatVersion + 1; return b },
		"version 0":         func(b []byte) []byte { b[4] = 0; return b },
		"truncated header":  func(b []byte) []byte { return b[:50] },
		"truncated record":  func(b []byte) []byte { return b[:len(b)-8] },
		"trailing bytes":    func(b []byte) []byte { return append(b, make([]byte, 8)...) },
		"unknown kind":      func(b []byte) []byte { b[h.HeaderBytes()] = 99; return b },
		"huge N":            func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 1<<30); return b },
		"zero Br":           func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 0); return b },
		"empty traced":      func(b []byte) []byte { copy(b[40:44], b[44:48]); return b },
		"label length lies": func(b []byte) []byte { binary.LittleEndian.PutUint16(b[88:], 9); return b },
		"nonzero pad":       func(b []byte) []byte { b[13] = 1; return b },
		"roles sans timing": func(b []byte) []byte { b[11] = b[11]&^FlagTiming | FlagRoles; return b },
		"unknown flag":      func(b []byte) []byte { b[11] |= 8; return b },
	}
	// A record's role and event: at byte 1 and bytes 6-7 of its header.
	role := func(t *Header, rec *Record, roleByte byte, event uint16) []byte {
		t.Records = 1
		b, err := AppendHeader(nil, t)
		if err != nil {
			panic(err)
		}
		if b, err = AppendRecord(b, t, rec); err != nil {
			panic(err)
		}
		b[t.HeaderBytes()+1] = roleByte
		binary.LittleEndian.PutUint16(b[t.HeaderBytes()+6:], event)
		return b
	}
	plain, roles := *h, *h
	plain.Timing, plain.Roles = false, false
	roles.Timing, roles.Roles, roles.Variant = true, true, VariantFlash3PingPong
	step := randomRecord(rng, &plain, KindFlashStep)
	span := randomRecord(rng, &roles, KindRole)
	span.Role, span.Event, span.J, span.ColsValid = RoleConsumer1, EventSoftmax, 0, roles.ColsValid(0)
	timed := roles
	timed.Roles = false
	roleCases := map[string][]byte{
		"role in a flash step":      role(&plain, step, 2, 0),
		"event in a flash step":     role(&plain, step, 0, uint16(EventSoftmax)),
		"role 0":                    role(&roles, span, 0, uint16(EventSoftmax)),
		"role 4":                    role(&roles, span, 4, uint16(EventSoftmax)),
		"unknown event":             role(&roles, span, 2, 16),
		"event 0":                   role(&roles, span, 2, 0),
		"producer's softmax":        role(&roles, span, 1, uint16(EventSoftmax)),
		"consumer's copy":           role(&roles, span, 3, uint16(EventCopyV)),
		"consumer 1's clock anchor": role(&roles, span, 3, uint16(EventClock)),
	}
	// A span's kv-tile, times and bytes as its event allows (bytes 16-19:
	// j; 32-39: bytes written; 40-55: t_start, t_end).
	rec := func(edit func(b []byte)) []byte {
		b := role(&roles, span, byte(span.Role), uint16(span.Event))
		edit(b[roles.HeaderBytes():])
		return b
	}
	roleCases["softmax without a kv-tile"] = rec(func(b []byte) { binary.LittleEndian.PutUint32(b[16:], NoTile); binary.LittleEndian.PutUint16(b[4:], 0) })
	roleCases["epilogue with a kv-tile"] = rec(func(b []byte) { binary.LittleEndian.PutUint16(b[6:], uint16(EventEpilogue)) })
	roleCases["clock anchor of consumer 1"] = rec(func(b []byte) { binary.LittleEndian.PutUint16(b[6:], uint16(EventClock)) })
	roleCases["span ending before it starts"] = rec(func(b []byte) {
		binary.LittleEndian.PutUint64(b[40:], 1000)
		binary.LittleEndian.PutUint64(b[48:], 999)
	})
	roleCases["span writing bytes"] = rec(func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 7) })
	flash2 := roles
	flash2.Variant, flash2.Records = VariantFlash2, 0
	if _, err := AppendHeader(nil, &flash2); err == nil {
		t.Error("a roles header on flash2 was encoded")
	}
	// A role record in a timing trace without the roles flag.
	b := role(&timed, &Record{Kind: KindTiming, BH: span.BH, I: span.I, J: span.J, RowsValid: span.RowsValid, ColsValid: span.ColsValid}, 1, uint16(EventCopyK))
	b[timed.HeaderBytes()] = byte(KindRole)
	roleCases["role record, no roles flag"] = b
	for name, b := range roleCases {
		_, _, err := ReadAll(bytes.NewReader(b))
		if err == nil {
			t.Errorf("%s: decoded without error", name)
		} else if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v does not wrap ErrFormat", name, err)
		}
	}
	for name, corrupt := range cases {
		b := corrupt(bytes.Clone(buf))
		_, _, err := ReadAll(bytes.NewReader(b))
		if err == nil {
			t.Errorf("%s: decoded without error", name)
		} else if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v does not wrap ErrFormat", name, err)
		}
	}
}

// TestOlderVersionTraces: a version-1 trace (every recording made before the
// backward pass), a version-2 one (before the warp roles) and a version-3
// one (before nq and kv_heads) read as they did, record for record; one
// holding a record kind, a flag or a header field that a later version
// introduced is malformed.
func TestOlderVersionTraces(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for v := uint16(1); v < FormatVersion; v++ {
		var old, newer int
		for old < 50 || newer < 50 {
			h, recs, buf := randomTrace(rng)
			binary.LittleEndian.PutUint16(buf[4:], v) // the version field: a trace as version v wrote it
			// Version 4's kv_heads and nq lie where earlier versions wrote
			// zeros. A run with all its queries and heads reads as an
			// older version wrote it; one with fewer is version 4's alone,
			// its bytes left in place.
			shapes := h.Nq != 0 || h.KVHeads != 0
			if v < 4 && !shapes {
				clear(buf[90:96])
			}
			later := h.Roles && v < 3 || v < 4 && shapes
			for _, r := range recs {
				if spec, _ := Spec(r.Kind); spec.Since > v {
					later = true
				}
			}
			gotH, gotRecs, err := ReadAll(bytes.NewReader(buf))
			if later {
				newer++
				if err == nil || !errors.Is(err, ErrFormat) {
					t.Fatalf("a version-%d trace holding a later version's record kind or flag: err %v, want a format error", v, err)
				}
				continue
			}
			old++
			if err != nil {
				t.Fatalf("version-%d trace: %v", v, err)
			}
			if !reflect.DeepEqual(gotH, h) || len(gotRecs) != len(recs) {
				t.Fatalf("version-%d trace read back differently", v)
			}
			for i := range recs {
				if !sameBits(gotRecs[i], recs[i]) {
					t.Fatalf("version-%d trace: record %d (%s) differs", v, i, recs[i].Kind)
				}
			}
		}
	}
}

func TestEncoderRejectsWrongArrayLength(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	h := randomHeader(rng)
	r := randomRecord(rng, h, KindFlashStep)
	r.O = r.O[:len(r.O)-1]
	if _, err := AppendRecord(nil, h, r); err == nil {
		t.Fatal("a short O array was encoded")
	}
	r = randomRecord(rng, h, KindFlashStep)
	r.RowsValid++
	if _, err := AppendRecord(nil, h, r); err == nil {
		t.Fatal("a record with more valid rows than its tile was encoded")
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder: it must return an error or
// a trace, never panic, and what it accepts must encode back to the input.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 8 {
		_, _, buf := randomTrace(rng)
		f.Add(buf)
	}
	f.Add([]byte("FSTR"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, recs, err := ReadAll(bytes.NewReader(data))
		if err != nil {
			return
		}
		out, err := AppendHeader(nil, h)
		if err != nil {
			t.Fatalf("decoded header does not encode: %v", err)
		}
		for _, r := range recs {
			if out, err = AppendRecord(out, h, r); err != nil {
				t.Fatalf("decoded record does not encode: %v", err)
			}
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("re-encoding differs from the accepted input")
		}
	})
}

func TestDecoderReportsReaderErrors(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	_, _, buf := randomTrace(rng)
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(buf[:len(buf)/2]), errReader{boom})
	if _, _, err := ReadAll(r); err == nil || (!errors.Is(err, boom) && !errors.Is(err, ErrFormat)) {
		t.Fatalf("got %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestGeneratedABI checks that the CUDA header and the browser's ABI module
// are what the Go definition generates, and that the C header compiles with
// its layout assertions where a C compiler is present.
func TestGeneratedABI(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		filepath.Join("..", "kernels", "cuda", "common", "trace_abi.h"): CHeader(),
		filepath.Join("..", "static", "js", "trace_abi.js"):             JSModule(),
	}
	for path, want := range files {
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: run make generate", path)
		}
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Log("no C compiler; layout assertions of trace_abi.h not compiled")
		return
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "check.c")
	os.WriteFile(src, []byte("#include \"trace_abi.h\"\nint main(void){return fs_flash_step_o(2,3,4,5) == 4u*2 + 2*3 + 2*3 ? 0 : 1;}\n"), 0o644)
	abs, _ := filepath.Abs(filepath.Join("..", "kernels", "cuda", "common"))
	bin := filepath.Join(dir, "check")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Werror", "-I", abs, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("trace_abi.h does not compile: %v\n%s", err, out)
	}
	if err := exec.Command(bin).Run(); err != nil {
		t.Fatalf("C offset of flash_step.o disagrees with Go: %v", err)
	}
}

func TestChunksSplitAtRecords(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	for range 100 {
		h, recs, buf := randomTrace(rng)
		var chunks [][]byte
		target := 1 + rng.IntN(300)
		if err := Chunks(h, buf, target, func(b []byte) error { chunks = append(chunks, b); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(chunks[0]) != h.HeaderBytes() || !bytes.Equal(bytes.Join(chunks, nil), buf) {
			t.Fatal("chunks do not rebuild the trace, header first")
		}
		// Every chunk after the header decodes as whole records.
		n := 0
		for _, c := range chunks[1:] {
			for off := 0; off < len(c); n++ {
				off += h.RecordBytes(Kind(c[off]))
				if off > len(c) {
					t.Fatal("a chunk ends inside a record")
				}
			}
		}
		if n != len(recs) {
			t.Fatalf("%d records in chunks, %d in the trace", n, len(recs))
		}
	}
	h, _, buf := randomTrace(rng)
	if err := Chunks(h, buf[:len(buf)-1], 64, func([]byte) error { return nil }); err == nil && h.Records > 0 {
		t.Fatal("a cut trace split without error")
	}
}

// TestSameBits: a change to any one field of a record, or to one bit of
// one of its floats, makes it another record; a NaN is itself.
func TestSameBits(t *testing.T) {
	base := func() *Record {
		r := &Record{}
		v := reflect.ValueOf(r).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Type() == reflect.TypeOf([]float32(nil)) {
				f.Set(reflect.ValueOf([]float32{1, float32(math.NaN()), 0}))
			}
		}
		return r
	}
	if !SameBits(base(), base()) {
		t.Fatal("a record with a NaN differs from its copy")
	}
	v := reflect.ValueOf(base()).Elem()
	for i := range v.NumField() {
		other := base()
		f := reflect.ValueOf(other).Elem().Field(i)
		switch f.Kind() {
		case reflect.Slice:
			f.Index(2).Set(reflect.ValueOf(float32(math.Copysign(0, -1)))) // −0 for +0
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s of kind %s: say how SameBits tells it apart", v.Type().Field(i).Name, f.Kind())
		}
		if SameBits(base(), other) {
			t.Errorf("a record whose %s differs is the same to SameBits", v.Type().Field(i).Name)
		}
	}
}
