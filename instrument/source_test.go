package instrument

import (
	"encoding/json"
	"testing"
)

// A source reads back from its name, in URLs and JSON; "auto" is SourceAny.
func TestSourceText(t *testing.T) {
	for _, s := range []Source{SourceAny, SourceCPUMirror, SourceGPU, SourceRecording} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		var back Source
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Errorf("%s read back as %v (%v)", b, back, err)
		}
	}
	if b, _ := json.Marshal(map[Source]int{SourceGPU: 1}); string(b) != `{"gpu":1}` {
		t.Errorf("a map by source: %s", b)
	}
	if _, err := json.Marshal(Source(9)); err == nil {
		t.Error("an unknown source marshals")
	}
	if s, ok := ParseSource("cpu"); !ok || s != SourceCPUMirror {
		t.Errorf("ParseSource(cpu) = %v %v", s, ok)
	}
}
