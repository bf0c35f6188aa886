package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"

	"flashstep/instrument"
	"flashstep/kernels"
)

// LoadRecorded reads the sweep recorded on a GPU (sweep-*.json) and the
// PyTorch reference timings measured beside it (sdpa-*.json), if the files
// are there.
func LoadRecorded(files fs.FS) (*Record, json.RawMessage, error) {
	var rec *Record
	var sdpa json.RawMessage
	names, _ := fs.Glob(files, "sweep-*.json")
	if len(names) > 0 {
		b, err := fs.ReadFile(files, names[0])
		if err != nil {
			return nil, nil, err
		}
		rec = &Record{}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(rec); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", names[0], err)
		}
		// A point's variant travels by name; a record from before the sweep
		// timed backward kernels names no pass: its kernel's.
		for k := range rec.Results {
			r := &rec.Results[k]
			v, ok := instrument.ParseVariant(r.VariantName)
			if !ok || kernels.Info(v) == nil {
				return nil, nil, fmt.Errorf("%s: point %d: no kernel %q", names[0], k, r.VariantName)
			}
			r.Variant = v
			if r.Pass == "" {
				r.Pass = r.Point.Pass()
			}
		}
	}
	names, _ = fs.Glob(files, "sdpa-*.json")
	if len(names) > 0 {
		b, err := fs.ReadFile(files, names[0])
		if err != nil {
			return nil, nil, err
		}
		if !json.Valid(b) {
			return nil, nil, fmt.Errorf("%s is not JSON", names[0])
		}
		sdpa = b
	}
	return rec, sdpa, nil
}
