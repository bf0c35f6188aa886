package instrument

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendHeader appends h in wire form to dst.
func AppendHeader(dst []byte, h *Header) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return dst, err
	}
	w := headerWire{
		Magic:        Magic,
		Version:      FormatVersion,
		HeaderBytes:  uint16(h.HeaderBytes()),
		Variant:      uint8(h.Variant),
		DType:        uint8(h.DType),
		Source:       uint8(h.Source),
		Pattern:      uint8(h.Pattern),
		N:            uint32(h.N),
		D:            uint32(h.D),
		Br:           uint32(h.Br),
		Bc:           uint32(h.Bc),
		Batch:        uint32(h.Batch),
		Heads:        uint32(h.Heads),
		TraceBH0:     uint32(h.TracedBH.Lo),
		TraceBH1:     uint32(h.TracedBH.Hi),
		TraceQ0:      uint32(h.TracedQ.Lo),
		TraceQ1:      uint32(h.TracedQ.Hi),
		Seed:         h.Seed,
		Scale:        h.Scale,
		NumSMs:       uint32(h.NumSMs),
		TimerTickNs:  h.TimerTickNs,
		Records:      uint32(h.Records),
		RecordedUnix: h.RecordedUnix,
		LabelBytes:   uint16(len(h.Label)),
		KVHeads:      uint16(h.KVHeadCount()),
		NQ:           uint32(h.Queries()),
	}
	if h.Causal {
		w.Flags |= FlagCausal
	}
	if h.Timing {
		w.Flags |= FlagTiming
	}
	if h.Roles {
		w.Flags |= FlagRoles
	}
	start := len(dst)
	dst, err := binary.Append(dst, binary.LittleEndian, &w)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, h.Label...)
	return pad8(dst, start), nil
}

// AppendRecord appends r in wire form to dst. Every array r's kind lists must
// have the length h gives it.
func AppendRecord(dst []byte, h *Header, r *Record) ([]byte, error) {
	spec, ok := Spec(r.Kind)
	if !ok {
		return dst, fmt.Errorf("instrument: unknown record kind %d", r.Kind)
	}
	w := recordHeaderWire{
		Kind:         uint8(r.Kind),
		Role:         uint8(r.Role),
		Event:        uint16(r.Event),
		RowsValid:    uint16(r.RowsValid),
		ColsValid:    uint16(r.ColsValid),
		BH:           uint32(r.BH),
		I:            tileWire(r.I),
		J:            tileWire(r.J),
		SM:           uint32(r.SM),
		BytesRead:    r.BytesRead,
		BytesWritten: r.BytesWritten,
		TStart:       r.TStart,
		TEnd:         r.TEnd,
	}
	if err := h.checkRecord(spec, &w); err != nil {
		return dst, err
	}
	start := len(dst)
	dst, err := binary.Append(dst, binary.LittleEndian, &w)
	if err != nil {
		return dst[:start], err
	}
	for i := range spec.Arrays {
		a := &spec.Arrays[i]
		vals := *a.field(r)
		if want := h.ArrayLen(a); len(vals) != want {
			return dst[:start], fmt.Errorf("instrument: %s record: array %s has %d values, want %d", spec.Name, a.Name, len(vals), want)
		}
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return pad8(dst, start), nil
}

func tileWire(i int) uint32 {
	if i < 0 {
		return NoTile
	}
	return uint32(i)
}

func pad8(b []byte, start int) []byte {
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// Chunks splits an encoded trace into the pieces a stream sends: the header
// alone, then runs of whole records of about target bytes each.
func Chunks(h *Header, trace []byte, target int, emit func([]byte) error) error {
	hb := h.HeaderBytes()
	if len(trace) < hb {
		return formatErr("trace of %d bytes has no room for its %d-byte header", len(trace), hb)
	}
	if err := emit(trace[:hb]); err != nil {
		return err
	}
	start, off := hb, hb
	for off < len(trace) {
		size := h.RecordBytes(Kind(trace[off]))
		if size == 0 || off+size > len(trace) {
			return formatErr("record at byte %d runs past the trace", off)
		}
		off += size
		if off-start >= target || off == len(trace) {
			if err := emit(trace[start:off]); err != nil {
				return err
			}
			start = off
		}
	}
	return nil
}

// RawStamps reads what a kernel wrote into the record header at the start
// of rec, before the record is checked: its SM and its two times.
func RawStamps(rec []byte) (sm uint32, tStart, tEnd uint64, err error) {
	var w recordHeaderWire
	if _, err := binary.Decode(rec, binary.LittleEndian, &w); err != nil {
		return 0, 0, 0, formatErr("record header: %v", err)
	}
	return w.SM, w.TStart, w.TEnd, nil
}

// PutRecordHeader writes r's header in wire form over the first bytes of
// dst, checked against h as AppendRecord checks it; r's kind must have no
// arrays. The worker uses it to finish records the kernel stamped only
// with times.
func PutRecordHeader(dst []byte, h *Header, r *Record) error {
	if spec, ok := Spec(r.Kind); !ok || len(spec.Arrays) > 0 {
		return fmt.Errorf("instrument: PutRecordHeader of a %s record", r.Kind)
	}
	if len(dst) < recordHeaderWireBytes {
		return fmt.Errorf("instrument: PutRecordHeader into %d bytes", len(dst))
	}
	b, err := AppendRecord(nil, h, r)
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}
