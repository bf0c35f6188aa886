package instrument

import (
	"fmt"
	"math"
	"reflect"
)

// Variant names the kernel that produced a trace. Its values are generated
// from the kernels' registry entries (variants.go).
type Variant uint8

// DType is the element type the kernel computed in.
type DType uint8

const (
	DTypeF32  DType = 1
	DTypeBF16 DType = 2
)

// Source says where the numbers of a trace came from.
type Source uint8

const (
	SourceCPUMirror Source = 1 // the Go mirror of the kernel, on this server's CPU
	SourceGPU       Source = 2 // the CUDA kernel on this server's GPU, now
	SourceRecording Source = 3 // a trace recorded earlier on the GPU the label names
)

// Pattern names how the inputs were generated from the seed.
type Pattern uint8

const (
	PatternNormal Pattern = 1 // Q, K, V ~ N(0, 1)
	PatternPeaked Pattern = 2 // each query row has one dominant key
	PatternLarge  Pattern = 3 // logits in the hundreds: exp overflows without the max
)

var (
	dtypeNames   = map[DType]string{DTypeF32: "f32", DTypeBF16: "bf16"}
	sourceNames  = map[Source]string{SourceCPUMirror: "cpu", SourceGPU: "gpu", SourceRecording: "recording"}
	patternNames = map[Pattern]string{PatternNormal: "normal", PatternPeaked: "peaked", PatternLarge: "large"}
)

func (v Variant) String() string { return enumName(variantNames, v) }
func (t DType) String() string   { return enumName(dtypeNames, t) }
func (s Source) String() string  { return enumName(sourceNames, s) }
func (p Pattern) String() string { return enumName(patternNames, p) }

// Patterns lists the valid patterns in order, for forms and tests.
var Patterns = []Pattern{PatternNormal, PatternPeaked, PatternLarge}

// ParseVariant and ParsePattern map the names used in URLs to values.
func ParseVariant(s string) (Variant, bool) { return parseEnum(variantNames, s) }
func ParsePattern(s string) (Pattern, bool) { return parseEnum(patternNames, s) }

func enumName[E ~uint8 | ~uint16](names map[E]string, e E) string {
	if n, ok := names[e]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", uint64(e)) // not %v: that would call String again
}

func parseEnum[E comparable](names map[E]string, s string) (E, bool) {
	for e, n := range names {
		if n == s {
			return e, true
		}
	}
	var zero E
	return zero, false
}

// Range is a half-open range of indices [Lo, Hi).
type Range struct{ Lo, Hi int }

func (r Range) Len() int            { return r.Hi - r.Lo }
func (r Range) Contains(i int) bool { return i >= r.Lo && i < r.Hi }

// Header describes a whole trace: the run's configuration, what was traced and
// where the numbers came from.
type Header struct {
	Variant Variant
	DType   DType
	Source  Source
	Causal  bool
	Timing  bool // timing records of every block, no arrays
	Roles   bool // with Timing: the role records of every block too
	Pattern Pattern

	N, D, Br, Bc int
	Batch, Heads int
	// Nq is the run's query rows, the last Nq positions of its N keys, and
	// KVHeads the heads of K and V, each serving Heads/KVHeads query heads
	// (format version 4). Zero means N and Heads, as every trace of an
	// earlier version has them: Queries and KVHeadCount read them so.
	Nq, KVHeads int

	TracedBH Range // batch-heads recorded
	TracedQ  Range // q-tiles recorded

	Seed  uint64
	Scale float32

	NumSMs      int
	TimerTickNs float32

	Records      int
	RecordedUnix int64
	Label        string
}

// Queries is the run's query rows; KVHeadCount its heads of K and V.
func (h *Header) Queries() int {
	if h.Nq == 0 {
		return h.N
	}
	return h.Nq
}
func (h *Header) KVHeadCount() int {
	if h.KVHeads == 0 {
		return h.Heads
	}
	return h.KVHeads
}

// Tr is the number of q-tiles, Tc the number of kv-tiles.
func (h *Header) Tr() int { return ceilDiv(h.Queries(), h.Br) }
func (h *Header) Tc() int { return ceilDiv(h.N, h.Bc) }

// RowsValid is how many rows of q-tile i are data; ColsValid likewise for
// kv-tile j. Only the last tile can be ragged.
func (h *Header) RowsValid(i int) int { return min(h.Br, h.Queries()-i*h.Br) }
func (h *Header) ColsValid(j int) int { return min(h.Bc, h.N-j*h.Bc) }

func (h *Header) dim(d Dim) int {
	switch d {
	case DimBr:
		return h.Br
	case DimBc:
		return h.Bc
	case DimD:
		return h.D
	case DimN:
		return h.N
	case DimNq:
		return h.Queries()
	}
	panic("instrument: unknown dim " + d.String())
}

// ArrayLen is the number of floats of array a under this header.
func (h *Header) ArrayLen(a *ArraySpec) int {
	n := 1
	for _, d := range a.Shape {
		n *= h.dim(d)
	}
	return n
}

// RecordBytes is the size on the wire of a record of kind k.
func (h *Header) RecordBytes(k Kind) int {
	spec, ok := Spec(k)
	if !ok {
		return 0
	}
	n := 0
	for i := range spec.Arrays {
		n += h.ArrayLen(&spec.Arrays[i])
	}
	return align8(recordHeaderWireBytes + 4*n)
}

// HeaderBytes is the size on the wire of the header, label included.
func (h *Header) HeaderBytes() int { return align8(headerWireBytes + len(h.Label)) }

// Record is one decoded record. Only the arrays its kind lists are set; the
// others are nil. J is -1 when the kind has no kv-tile (I likewise).
type Record struct {
	Kind                    Kind
	BH, I, J                int
	RowsValid, ColsValid    int
	SM                      int
	TStart, TEnd            uint64
	BytesRead, BytesWritten uint64

	// A role record's warp role and span; zero in every other kind.
	Role  Role
	Event Event

	Q, K, V      []float32
	MOld, MNew   []float32 // MNew also holds the naive softmax record's row max
	Alpha, L     []float32
	S, P, O, LSE []float32

	// The backward pass: dO and D = rowsum(dO∘O) of a q-tile; a step's dP
	// and dS tiles, kv-tile j's dV and dK accumulators after it, and dQ
	// (the step's contribution in a bwd_step, the finished dQ in a bwd_dq).
	DO, Delta  []float32
	DP, DS     []float32
	DV, DK, DQ []float32
}

// SameBits reports whether two records are the same field for field,
// their floats bit for bit: a NaN equals only the same NaN, −0 is not +0.
// A test that holds one run's trace to another's (two runs of a mirror, a
// mirror and its simulation, a stream and its source) compares with it.
func SameBits(a, b *Record) bool {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		if xs, ok := fa.Interface().([]float32); ok {
			ys := fb.Interface().([]float32)
			if len(xs) != len(ys) {
				return false
			}
			for k, x := range xs {
				if math.Float32bits(x) != math.Float32bits(ys[k]) {
					return false
				}
			}
		} else if !fa.Equal(fb) {
			return false
		}
	}
	return true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
