package instrument

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// Decoder reads a trace from a stream: the header at construction, then one
// record per Next. Malformed input of any kind is an error wrapping ErrFormat
// (or the reader's own error); it never panics, and it never allocates much
// more than the bytes the input actually holds.
type Decoder struct {
	r       *bufio.Reader
	h       Header
	nread   int
	version uint16
	scratch [recordHeaderWireBytes]byte
}

// NewDecoder reads and checks the header.
func NewDecoder(r io.Reader) (*Decoder, error) {
	d := &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
	var raw [headerWireBytes]byte
	if _, err := io.ReadFull(d.r, raw[:]); err != nil {
		return nil, truncated(err, "header")
	}
	var w headerWire
	if _, err := binary.Decode(raw[:], binary.LittleEndian, &w); err != nil {
		return nil, formatErr("header: %v", err)
	}
	if w.Magic != Magic {
		return nil, formatErr("not a flashstep trace (magic %q)", w.Magic[:])
	}
	if w.Version < MinFormatVersion || w.Version > FormatVersion {
		return nil, formatErr("format version %d, this build reads versions %d to %d", w.Version, MinFormatVersion, FormatVersion)
	}
	if w.Pad0 != [3]uint8{} || w.Flags&^(FlagCausal|FlagTiming|FlagRoles) != 0 {
		return nil, formatErr("header: nonzero padding or unknown flags")
	}
	if w.Version < 4 && (w.NQ != 0 || w.KVHeads != 0) {
		return nil, formatErr("header: nonzero padding (nq and kv_heads are version 4's)")
	}
	if w.Version >= 4 && (w.NQ == 0 || w.KVHeads == 0) {
		return nil, formatErr("header: nq=%d, kv_heads=%d: a version-4 trace gives both", w.NQ, w.KVHeads)
	}
	if w.Flags&FlagRoles != 0 && w.Version < 3 {
		return nil, formatErr("header: the roles flag in a version-%d trace (it is version 3's)", w.Version)
	}
	if int(w.LabelBytes) > MaxLabelBytes {
		return nil, formatErr("label of %d bytes, at most %d", w.LabelBytes, MaxLabelBytes)
	}
	if int(w.HeaderBytes) != align8(headerWireBytes+int(w.LabelBytes)) {
		return nil, formatErr("header says %d bytes, its label needs %d", w.HeaderBytes, align8(headerWireBytes+int(w.LabelBytes)))
	}
	rest := make([]byte, int(w.HeaderBytes)-headerWireBytes)
	if _, err := io.ReadFull(d.r, rest); err != nil {
		return nil, truncated(err, "header label")
	}
	label := rest[:w.LabelBytes]
	if !allZero(rest[w.LabelBytes:]) {
		return nil, formatErr("header: nonzero padding after label")
	}
	d.version = w.Version
	d.h = Header{
		Variant:      Variant(w.Variant),
		DType:        DType(w.DType),
		Source:       Source(w.Source),
		Causal:       w.Flags&FlagCausal != 0,
		Timing:       w.Flags&FlagTiming != 0,
		Roles:        w.Flags&FlagRoles != 0,
		Pattern:      Pattern(w.Pattern),
		N:            int(w.N),
		D:            int(w.D),
		Br:           int(w.Br),
		Bc:           int(w.Bc),
		Batch:        int(w.Batch),
		Heads:        int(w.Heads),
		TracedBH:     Range{int(w.TraceBH0), int(w.TraceBH1)},
		TracedQ:      Range{int(w.TraceQ0), int(w.TraceQ1)},
		Seed:         w.Seed,
		Scale:        w.Scale,
		NumSMs:       int(w.NumSMs),
		TimerTickNs:  w.TimerTickNs,
		Records:      int(w.Records),
		RecordedUnix: w.RecordedUnix,
		Label:        string(label),
	}
	// Zero stands for the default (Queries, KVHeadCount), so that a header
	// reads back as it was written.
	if int(w.NQ) != d.h.N {
		d.h.Nq = int(w.NQ)
	}
	if int(w.KVHeads) != d.h.Heads {
		d.h.KVHeads = int(w.KVHeads)
	}
	// Bound every count before arithmetic on them can overflow.
	if w.N > MaxN || w.D > MaxD || w.Br > MaxTile || w.Bc > MaxTile ||
		uint64(w.Batch)*uint64(w.Heads) > MaxBatchHeads || w.Records > MaxRecords {
		return nil, formatErr("header: sizes beyond the format's limits")
	}
	if err := d.h.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// Header returns the decoded header.
func (d *Decoder) Header() *Header { return &d.h }

// Next reads the next record. It returns io.EOF after the header's count of
// records, and io.ErrUnexpectedEOF (wrapped) when the stream ends before.
func (d *Decoder) Next() (*Record, error) {
	if d.nread == d.h.Records {
		return nil, io.EOF
	}
	if _, err := io.ReadFull(d.r, d.scratch[:]); err != nil {
		return nil, truncated(err, "record header")
	}
	var w recordHeaderWire
	if _, err := binary.Decode(d.scratch[:], binary.LittleEndian, &w); err != nil {
		return nil, formatErr("record header: %v", err)
	}
	spec, ok := Spec(Kind(w.Kind))
	if !ok {
		return nil, formatErr("record %d: unknown kind %d", d.nread, w.Kind)
	}
	if since := max(spec.Since, 1); since > d.version {
		return nil, formatErr("record %d: a %s record in a version-%d trace (the kind is version %d's)", d.nread, spec.Name, d.version, since)
	}
	if err := d.h.checkRecord(spec, &w); err != nil {
		return nil, err
	}
	r := &Record{
		Kind:         spec.Kind,
		BH:           int(w.BH),
		I:            tileIndex(w.I),
		J:            tileIndex(w.J),
		RowsValid:    int(w.RowsValid),
		ColsValid:    int(w.ColsValid),
		SM:           int(w.SM),
		TStart:       w.TStart,
		TEnd:         w.TEnd,
		BytesRead:    w.BytesRead,
		BytesWritten: w.BytesWritten,
		Role:         Role(w.Role),
		Event:        Event(w.Event),
	}
	size := d.h.RecordBytes(spec.Kind)
	payload, err := readBounded(d.r, size-recordHeaderWireBytes)
	if err != nil {
		return nil, truncated(err, spec.Name+" record")
	}
	off := 0
	for i := range spec.Arrays {
		a := &spec.Arrays[i]
		n := d.h.ArrayLen(a)
		vals := make([]float32, n)
		for k := range vals {
			vals[k] = math.Float32frombits(binary.LittleEndian.Uint32(payload[off:]))
			off += 4
		}
		*a.field(r) = vals
	}
	if !allZero(payload[off:]) {
		return nil, formatErr("%s record: nonzero padding", spec.Name)
	}
	d.nread++
	return r, nil
}

// ReadAll decodes a whole trace and checks that nothing follows it.
func ReadAll(r io.Reader) (*Header, []*Record, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return nil, nil, err
	}
	var recs []*Record
	for {
		rec, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, rec)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		return nil, nil, formatErr("bytes after the last of %d records", d.h.Records)
	}
	return d.Header(), recs, nil
}

func tileIndex(w uint32) int {
	if w == NoTile {
		return -1
	}
	return int(w)
}

// readBounded reads exactly n bytes, growing its buffer only as data arrives,
// so a header that promises a huge record costs nothing if the bytes are not
// there.
func readBounded(r io.Reader, n int) ([]byte, error) {
	const chunk = 1 << 20
	if n <= chunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r, int64(n))
	if err != nil {
		if got < int64(n) && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func truncated(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return formatErr("%s cut short: %v", what, io.ErrUnexpectedEOF)
	}
	return err
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
