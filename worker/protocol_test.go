package worker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"flashstep/internal/testrand"
)

func TestFramesRoundTrip(t *testing.T) {
	t.Parallel()
	rng := testrand.New(t)
	var buf bytes.Buffer
	want := [][]byte{{}, []byte("x"), make([]byte, 1<<20)}
	for i := range want[2] {
		want[2][i] = byte(rng.IntN(256))
	}
	for _, p := range want {
		if err := WriteFrame(&buf, TypeChunk, p); err != nil {
			t.Fatal(err)
		}
	}
	WriteJSON(&buf, TypeDone, Done{ID: 7, Records: 3})
	for _, p := range want {
		typ, got, err := ReadFrame(&buf)
		if err != nil || typ != TypeChunk || !bytes.Equal(got, p) {
			t.Fatalf("frame of %d bytes: %v %s", len(p), err, typ)
		}
	}
	if typ, got, err := ReadFrame(&buf); err != nil || typ != TypeDone || string(got) != `{"id":7,"kernel_ms":0,"records":3}` {
		t.Fatalf("done frame: %s %q %v", typ, got, err)
	}
	if _, _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("after the last frame: %v", err)
	}
}

func TestBadFramesAreErrors(t *testing.T) {
	t.Parallel()
	frame := func(n uint32, typ byte, payload int) []byte {
		b := binary.LittleEndian.AppendUint32(nil, n)
		return append(append(b, typ), make([]byte, payload)...)
	}
	cases := map[string][]byte{
		"zero length":    frame(0, 3, 0),
		"too long":       frame(MaxFrame+1, 3, 0),
		"unknown type":   frame(5, 99, 4),
		"type zero":      frame(5, 0, 4),
		"truncated body": frame(100, 3, 10),
		"cut in header":  {1, 0},
	}
	for name, b := range cases {
		_, _, err := ReadFrame(bytes.NewReader(b))
		if err == nil || err == io.EOF {
			t.Errorf("%s: %v", name, err)
		}
		if name != "truncated body" && name != "cut in header" && !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v does not wrap ErrProtocol", name, err)
		}
	}
	if err := WriteFrame(io.Discard, TypeChunk, make([]byte, MaxFrame)); err == nil {
		t.Error("an oversized frame was written")
	}
}
