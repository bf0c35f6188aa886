package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"

	"flashstep/docs"
	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/labrun"
	"flashstep/lessons"
	"flashstep/offline"
	"flashstep/recordings"
	"flashstep/runner"
	"flashstep/sitebuild"
	"flashstep/static"
	"flashstep/sweep"
	"flashstep/web"
)

// writeSite writes the static site into dir (-write-site): the pages of a
// server in site mode with no GPU, as package sitebuild saves them.
func writeSite(dir, base string) error {
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		return err
	}
	recorded, sdpa, err := sweep.LoadRecorded(recordings.Files)
	if err != nil {
		return err
	}
	traffic, err := sweep.LoadTraffic(recordings.Files)
	if err != nil {
		return err
	}
	sweeps := sweep.NewManager(map[instrument.Source]sweep.Executor{instrument.SourceCPUMirror: sweep.CPU{}})
	defer sweeps.Close()
	labs := labrun.New(labrun.Options{})
	defer labs.Close()
	app := web.NewServer(web.Deps{Engines: &runner.Router{Recordings: recs, NoGPU: "a static site"}, Lab: labs, Sweeps: sweeps,
		Recorded: recorded, SDPA: sdpa, Traffic: traffic, Static: static.Files, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Site: true})
	pages, err := sitePages()
	if err != nil {
		return err
	}
	traces := map[string][]byte{}
	for _, r := range recs.All() {
		if traces[r.Name+".fstrace"], err = recordings.Files.ReadFile(r.Name + ".fstrace"); err != nil {
			return err
		}
	}
	data := map[string]string{
		"/api/kernels":             "data/kernels.json",
		"/api/traffic/measured":    "data/traffic-measured.json",
		"/api/sdpa":                "data/sdpa.json",
		"/api/sweeps/recorded":     "data/sweeps-recorded.json",
		"/api/sweeps/recorded.csv": "data/sweeps-recorded.csv",
	}
	// Each kernel's source, which every stepper shows beside its steps.
	for _, info := range kernels.Variants() {
		data["/api/source?variant="+info.Name()] = "data/source/" + info.Name() + ".json"
	}
	err = sitebuild.Write(dir, sitebuild.Site{Handler: app, Pages: pages, Static: static.Files, Recordings: traces, Base: base, Data: data})
	if err != nil {
		return err
	}
	return writeSiteIndexes(dir, recs)
}

// writeSiteIndexes writes what lets a page of the site open a recorded
// run without the WebAssembly (2 MB, loaded only for a run no recording
// holds, or a grade): data/recordings.json, each recording by its run's
// canonical query, and data/steps.json and data/compares.json, the
// stepper's and the side by side's state (api.Stepper, api.Compare, as
// offline.Get answers /step and /compare) for every link to them of the
// pages.
func writeSiteIndexes(dir string, recs *runner.Recordings) error {
	byQuery := map[string]string{}
	for _, r := range recs.All() {
		byQuery[r.Config.Values().Encode()] = r.Name
	}
	pages := map[string]map[string]any{}
	for _, page := range []string{"step", "compare"} {
		queries, err := sitebuild.LinkQueries(dir, page)
		if err != nil {
			return err
		}
		pages[page] = map[string]any{}
		for _, q := range queries {
			st, err := offline.Get("/"+page, q)
			if err != nil {
				return fmt.Errorf("%s link ?%s: %w", page, q, err)
			}
			pages[page][q] = st
		}
	}
	for name, v := range map[string]any{"data/recordings.json": byQuery, "data/steps.json": pages["step"], "data/compares.json": pages["compare"]} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := sitebuild.Put(dir, name, b); err != nil {
			return err
		}
	}
	return nil
}

// sitePages are the paths of every page of the site, and the files its
// pages fetch by their own paths.
func sitePages() ([]string, error) {
	pages := []string{"/", "/step", "/lessons", "/glossary", "/playground", "/kernels", "/ladder", "/sweep", "/compare", "/lab", "/docs/ptxas.txt"}
	course, err := lessons.Default()
	if err != nil {
		return nil, err
	}
	for _, l := range course.Lessons {
		pages = append(pages, "/lessons/"+l.Slug)
	}
	names, err := fs.Glob(docs.Files, "*.md")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		pages = append(pages, "/docs/"+n)
	}
	for _, e := range lab.All() {
		pages = append(pages, "/lab/"+e.ID, "/lab/"+e.ID+"/solution")
		if e.Grader != "" {
			pages = append(pages, "/lab/"+e.ID+"/grade.js")
		}
		if e.Recorded != nil {
			pages = append(pages, "/lab/"+e.ID+"/recorded.json")
		}
	}
	for i, p := range pages {
		pages[i] = strings.TrimSpace(p)
	}
	return pages, nil
}
