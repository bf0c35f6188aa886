package sweep

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"time"
)

// Record is a sweep as it is kept and downloaded: what ran, where, when, and
// every point's result.
type Record struct {
	Source   string       `json:"source"`
	Recorded time.Time    `json:"recorded"`
	Query    string       `json:"query"`
	State    string       `json:"state"`
	Results  []Result     `json:"results"`
	Memory   *MemoryCheck `json:"memory,omitempty"`
	Note     string       `json:"note,omitempty"`
}

// RecordOf is the record of a job.
func RecordOf(j Job) Record {
	at := j.Finished
	if at.IsZero() {
		at = time.Now()
	}
	return Record{Source: j.Source, Recorded: at.UTC(), Query: j.Query, State: j.State, Results: j.Results, Memory: j.Memory}
}

// WriteJSON writes the record as indented JSON.
func (r Record) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// CSVHeader names the columns of WriteCSV. pass is forward or backward: a
// backward row's time is one backward pass, its TFLOP/s counted from 2.5
// times the forward's FLOPs.
var CSVHeader = []string{"source", "variant", "pass", "kernel", "dtype", "n", "d", "b", "h", "causal",
	"ms_median", "tflops", "peak_bytes", "peak_how", "out_of_memory", "error", "repeats_ms"}

// WriteCSV writes one row per point.
func (r Record) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, p := range r.Results {
		reps, _ := json.Marshal(p.Repeats)
		cw.Write([]string{r.Source, p.VariantName, p.Pass, p.Kernel, p.DType, strconv.Itoa(p.N), strconv.Itoa(p.D),
			strconv.Itoa(p.B), strconv.Itoa(p.H), strconv.FormatBool(p.Causal), f(p.Ms), f(p.TFLOPs),
			strconv.FormatInt(p.PeakBytes, 10), p.PeakHow, strconv.FormatBool(p.OutOfMem), p.Error, string(reps)})
	}
	cw.Flush()
	return cw.Error()
}
