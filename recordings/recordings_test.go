package recordings

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/kernels/kernelstest"
	"flashstep/roles"
)

// TestRecordingsMatchListAndMirror checks every shipped recording: it is the
// run its line of list.txt names, labelled with the GPU, driver and date, and
// its numbers lie within the GPU-versus-mirror bound of the mirror's.
func TestRecordingsMatchListAndMirror(t *testing.T) {
	t.Parallel()
	list, err := Files.Open("list.txt")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseList(list)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name
		v, err := url.ParseQuery(e.Query)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kernels.ParseConfig(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := Files.ReadFile(name + ".fstrace")
		if err != nil {
			t.Fatalf("%s: no recording: %v", name, err)
		}
		h, recs, err := instrument.ReadAll(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := kernels.ConfigFromHeader(h)
		if got.Key() != c.Key() {
			t.Fatalf("%s: the recording is of %s, the list names %s", name, got.Key(), c.Key())
		}
		if h.Source != instrument.SourceRecording || h.RecordedUnix == 0 || !strings.Contains(h.Label, "driver") || h.NumSMs == 0 {
			t.Fatalf("%s: labelled %q, source %s, recorded %d", name, h.Label, h.Source, h.RecordedUnix)
		}
		n++
		if c.Roles { // held to the schedule and to the order its barriers impose, as on the GPU
			if _, err := roles.Check(c, h, recs); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		if c.Timing {
			continue
		}
		mh := c.Header(instrument.SourceCPUMirror, "")
		var mrecs []*instrument.Record
		if err := kernels.RunMirror(context.Background(), kernelstest.MustRun(t, c), func(r *instrument.Record) error { mrecs = append(mrecs, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(mrecs) != len(recs) {
			t.Fatalf("%s: %d records, the mirror makes %d", name, len(recs), len(mrecs))
		}
		bnd := kernelstest.NewBounds(&mh)
		worst := map[string]float64{}
		for k := range recs {
			if err := kernelstest.CompareRecords(h, recs[k], mrecs[k], bnd.Of(mrecs[k]), worst); err != nil {
				t.Fatalf("%s record %d: %v", name, k, err)
			}
		}
	}
	if n < 10 {
		t.Fatalf("%d recordings", n)
	}
}
