package runner

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
)

// Recordings replays traces recorded on a GPU, found by the run they are of.
type Recordings struct {
	byKey map[string]*Recording
	all   []*Recording
}

// Recording is one recorded trace.
type Recording struct {
	Name   string
	Config kernels.Config
	Header instrument.Header
	data   []byte
}

// When is the recording's date.
func (r *Recording) When() time.Time { return time.Unix(r.Header.RecordedUnix, 0).UTC() }

// LoadRecordings indexes every .fstrace file of files; a file that does not
// decode is an error, not something to skip quietly.
func LoadRecordings(files fs.FS) (*Recordings, error) {
	rs := &Recordings{byKey: map[string]*Recording{}}
	names, err := fs.Glob(files, "*.fstrace")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		h, recs, err := instrument.ReadAll(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("recording %s: %w", name, err)
		}
		if len(recs) != h.Records {
			return nil, fmt.Errorf("recording %s: %d of %d records", name, len(recs), h.Records)
		}
		r := &Recording{Name: strings.TrimSuffix(path.Base(name), ".fstrace"), Config: kernels.ConfigFromHeader(h), Header: *h, data: data}
		rs.byKey[r.Config.Key()] = r
		rs.all = append(rs.all, r)
	}
	return rs, nil
}

// Find returns the recording of run c, if there is one.
func (rs *Recordings) Find(c *kernels.Config) (*Recording, bool) {
	if rs == nil {
		return nil, false
	}
	r, ok := rs.byKey[c.Key()]
	return r, ok
}

// All lists the recordings by name.
func (rs *Recordings) All() []*Recording {
	if rs == nil {
		return nil
	}
	return rs.all
}

// replay emits the recording as a runner does: the header, then runs of
// whole records.
func (r *Recording) replay(ctx context.Context, emit func([]byte) error) error {
	return instrument.Chunks(&r.Header, r.data, 256<<10, func(b []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(b)
	})
}
