//go:build gpu

package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/recordings"
)

// record runs every configuration of a list on the GPU and writes each trace
// to a file, marked as a recording with the GPU's name, driver and date:
//
//	gpuworker record -list recordings/list.txt -out DIR
func record(args []string) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	list := fs.String("list", "recordings/list.txt", "lines of 'name query'")
	out := fs.String("out", "recordings", "folder for the .fstrace files")
	if fs.Parse(args) != nil {
		return 2
	}
	d, err := openDevice()
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		return 1
	}
	f, err := os.Open(*list)
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		return 1
	}
	defer f.Close()
	entries, err := recordings.ParseList(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		return 1
	}
	for _, e := range entries {
		name := e.Name
		v, err := url.ParseQuery(e.Query)
		if err != nil {
			fmt.Fprintf(os.Stderr, "record %s: %v\n", name, err)
			return 1
		}
		r, err := kernels.ParseRun(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "record %s: %v\n", name, err)
			return 1
		}
		tr, err := d.traceRun(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "record %s: %v\n", name, err)
			return 1
		}
		rec, err := asRecording(tr, time.Now())
		if err != nil {
			fmt.Fprintf(os.Stderr, "record %s: %v\n", name, err)
			return 1
		}
		path := filepath.Join(*out, name+".fstrace")
		if err := os.WriteFile(path, rec, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "%s: %d records, %s, kernel %.3f ms\n", path, tr.header.Records, kernels.FormatBytes(int64(len(rec))), tr.kernelMs)
	}
	return 0
}

// asRecording re-labels a GPU trace as a recording made at the given time.
func asRecording(tr *gpuTrace, at time.Time) ([]byte, error) {
	h := tr.header
	h.Source = instrument.SourceRecording
	h.RecordedUnix = at.Unix()
	head, err := instrument.AppendHeader(nil, &h)
	if err != nil {
		return nil, err
	}
	out := append(head, tr.bytes[tr.header.HeaderBytes():]...)
	if _, _, err := instrument.ReadAll(bytes.NewReader(out)); err != nil {
		return nil, err
	}
	return out, nil
}
