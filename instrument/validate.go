package instrument

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Limits of the format. They bound what a decoder will allocate for any
// input, so that garbage cannot ask for gigabytes.
const (
	MaxN          = 1 << 16
	MaxD          = 1024
	MaxTile       = 1024
	MaxBatchHeads = 1 << 16
	MaxRecords    = 1 << 24
	MaxLabelBytes = 1024
	maxArrayElems = 1 << 24 // N·d of one input matrix: 64 MiB
)

// ErrFormat wraps every error about malformed trace bytes.
var ErrFormat = errors.New("malformed trace")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// Validate checks that h describes a trace this format can hold.
func (h *Header) Validate() error {
	if _, ok := variantNames[h.Variant]; !ok {
		return formatErr("unknown variant %d", h.Variant)
	}
	if _, ok := dtypeNames[h.DType]; !ok {
		return formatErr("unknown dtype %d", h.DType)
	}
	if _, ok := sourceNames[h.Source]; !ok {
		return formatErr("unknown source %d", h.Source)
	}
	if _, ok := patternNames[h.Pattern]; !ok {
		return formatErr("unknown input pattern %d", h.Pattern)
	}
	switch {
	case h.N < 1 || h.N > MaxN:
		return formatErr("N=%d outside [1, %d]", h.N, MaxN)
	case h.D < 1 || h.D > MaxD:
		return formatErr("d=%d outside [1, %d]", h.D, MaxD)
	case h.N*h.D > maxArrayElems:
		return formatErr("N·d=%d above %d", h.N*h.D, maxArrayElems)
	case h.Br < 1 || h.Br > MaxTile:
		return formatErr("Br=%d outside [1, %d]", h.Br, MaxTile)
	case h.Bc < 1 || h.Bc > MaxTile:
		return formatErr("Bc=%d outside [1, %d]", h.Bc, MaxTile)
	case h.Batch < 1 || h.Heads < 1 || h.Batch*h.Heads > MaxBatchHeads:
		return formatErr("batch %d × heads %d outside [1, %d]", h.Batch, h.Heads, MaxBatchHeads)
	case h.Nq < 0 || h.Nq > h.N:
		return formatErr("nq=%d outside [1, n=%d] (0: n)", h.Nq, h.N)
	case h.KVHeads < 0 || h.KVHeads > 0 && h.Heads%h.KVHeads != 0:
		return formatErr("kv_heads=%d does not divide heads=%d (0: heads)", h.KVHeads, h.Heads)
	case h.TracedBH.Lo < 0 || h.TracedBH.Lo >= h.TracedBH.Hi || h.TracedBH.Hi > h.Batch*h.Heads:
		return formatErr("traced batch-heads [%d, %d) not inside [0, %d)", h.TracedBH.Lo, h.TracedBH.Hi, h.Batch*h.Heads)
	case h.TracedQ.Lo < 0 || h.TracedQ.Lo >= h.TracedQ.Hi || h.TracedQ.Hi > h.Tr():
		return formatErr("traced q-tiles [%d, %d) not inside [0, %d)", h.TracedQ.Lo, h.TracedQ.Hi, h.Tr())
	case h.Records < 0 || h.Records > MaxRecords:
		return formatErr("%d records outside [0, %d]", h.Records, MaxRecords)
	case h.NumSMs < 0 || h.NumSMs > 1<<16:
		return formatErr("%d SMs", h.NumSMs)
	case len(h.Label) > MaxLabelBytes || !utf8.ValidString(h.Label):
		return formatErr("label is not UTF-8 of at most %d bytes", MaxLabelBytes)
	case math.IsNaN(float64(h.Scale)) || math.IsInf(float64(h.Scale), 0) || h.Scale <= 0:
		return formatErr("scale %v is not a positive number", h.Scale)
	case h.Roles && !h.Timing:
		return formatErr("a roles trace is a timing trace: the roles flag without the timing flag")
	case h.Roles && !RolesVariant(h.Variant):
		return formatErr("the roles flag on %s, which has no warp roles", h.Variant)
	case math.IsNaN(float64(h.TimerTickNs)) || math.IsInf(float64(h.TimerTickNs), 0) || h.TimerTickNs < 0:
		return formatErr("timer tick %v is not a number ≥ 0", h.TimerTickNs)
	}
	return nil
}

// checkRecord checks a record header against the trace header: a known kind,
// indices inside the traced selection and the valid extents the tiling gives.
func (h *Header) checkRecord(spec *KindSpec, w *recordHeaderWire) error {
	if spec.Kind == KindRole {
		if !h.Roles {
			return formatErr("role record in a trace without the roles flag")
		}
		e := Event(w.Event)
		if r := Role(w.Role); !r.HasEvent(e) {
			return formatErr("role record: role %d has no event %d", w.Role, w.Event)
		}
		if e.PerTile() == (w.J == NoTile) {
			return formatErr("role record: a %s span %s a kv-tile", e, map[bool]string{true: "needs", false: "has no"}[e.PerTile()])
		}
		if w.TEnd < w.TStart || w.BytesWritten != 0 {
			return formatErr("role record: a %s span ends at %d before it starts at %d, or writes %d bytes", e, w.TEnd, w.TStart, w.BytesWritten)
		}
	} else {
		if w.Role != 0 || w.Event != 0 {
			return formatErr("%s record: nonzero role or event", spec.Name)
		}
		if h.Timing != (spec.Kind == KindTiming) {
			return formatErr("%s record in a trace whose timing flag is %t", spec.Name, h.Timing)
		}
	}
	if bh := int(w.BH); !h.TracedBH.Contains(bh) {
		return formatErr("%s record: batch-head %d not traced [%d, %d)", spec.Name, bh, h.TracedBH.Lo, h.TracedBH.Hi)
	}
	wantRows, wantCols := 0, 0
	if spec.HasI {
		i := int(w.I)
		if w.I == NoTile || !h.TracedQ.Contains(i) {
			return formatErr("%s record: q-tile %d not traced [%d, %d)", spec.Name, int64(w.I), h.TracedQ.Lo, h.TracedQ.Hi)
		}
		wantRows = h.RowsValid(i)
	} else if w.I != NoTile {
		return formatErr("%s record has a q-tile index", spec.Name)
	}
	if spec.HasJ && !(spec.OptionalJ && w.J == NoTile) {
		if w.J == NoTile || int(w.J) >= h.Tc() {
			return formatErr("%s record: kv-tile %d outside [0, %d)", spec.Name, int64(w.J), h.Tc())
		}
		if !spec.SplitJ {
			wantCols = h.ColsValid(int(w.J))
		}
	} else if w.J != NoTile {
		return formatErr("%s record has a kv-tile index", spec.Name)
	}
	if spec.OptionalJ && w.J == NoTile {
		wantCols = 0
	}
	if int(w.RowsValid) != wantRows || int(w.ColsValid) != wantCols {
		return formatErr("%s record: %d valid rows and %d columns, the tiling gives %d and %d",
			spec.Name, w.RowsValid, w.ColsValid, wantRows, wantCols)
	}
	return nil
}
