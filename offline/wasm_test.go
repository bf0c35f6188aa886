package offline_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"flashstep/internal/testrand"
	"flashstep/kernels/kernelstest"
	"flashstep/offline"
)

// The WebAssembly itself, in Node (the JavaScript engine a browser's
// worker would be, less the page): cmd/sitewasm built for js/wasm, run
// under Go's own wasm_exec.js, computes random runs' traces and grades
// checkpoints; each trace's hash and each verdict must be the native
// build's. It builds the WebAssembly (tens of seconds cold), so it runs
// with the long tests; the native parity (web's TestSite…) runs always.
func TestWebAssemblyMatchesNative(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the WebAssembly: make test-long")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on this machine")
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "site.wasm")
	build := exec.Command("go", "build", "-trimpath", "-o", wasm, "flashstep/cmd/sitewasm")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rng := testrand.New(t)
	var queries []string
	for range 4 {
		c := kernelstest.RandomGPUConfig(rng, 200)
		queries = append(queries, c.Values().Encode())
	}
	// A checkpoint graded without a trace (the float16 overflow).
	grades := [][3]string{{"stability", "lab-f16", "inf"}, {"stability", "lab-f16", "65504"}}
	script := filepath.Join(dir, "run.js")
	js := `"use strict";
globalThis.require = require; globalThis.fs = require("fs");
require(` + jsString(filepath.Join(goEnvRoot(t), "lib", "wasm", "wasm_exec.js")) + `);
const crypto = require("crypto");
const go = new Go();
WebAssembly.instantiate(fs.readFileSync(process.argv[2]), go.importObject).then(async (r) => {
  go.run(r.instance);
  const out = {traces: [], grades: []};
  let id = 0;
  for (const q of JSON.parse(process.argv[3])) {
    const h = crypto.createHash("sha256");
    await flashstep.trace(++id, q, (chunk) => h.update(chunk));
    out.traces.push(h.digest("hex"));
  }
  for (const [slug, id, answer] of JSON.parse(process.argv[4])) {
    out.grades.push(JSON.parse(await flashstep.grade(slug, id, answer, false)));
  }
  out.refused = await flashstep.recording("variant=flash2&n=0").then(() => "", (e) => e.message);
  // A cancel from the page's event loop (as the worker reads one) stops a
  // long run: the WebAssembly must hand the thread back between chunks.
  let got = 0, cancelled = false;
  out.cancel = await flashstep.trace(++id, "variant=flash2&n=1024&d=64&br=64&bc=64&pattern=normal&seed=1", (c) => {
    got += c.length;
    if (!cancelled) { cancelled = true; const me = id; setTimeout(() => flashstep.cancel(me), 0); }
  }).then(() => "finished", (e) => e.message);
  out.cancelGot = got;
  out.toy = await flashstep.recording("variant=flash2&n=8&d=4&br=2&bc=2&pattern=normal&seed=1");
  out.memory = JSON.parse(await flashstep.get("/api/memory", "b=2&h=8&n=4096&d=64"));
  console.log(JSON.stringify(out));
  process.exit(0);
});
`
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, _ := json.Marshal(queries)
	gs, _ := json.Marshal(grades)
	out, err := exec.Command(node, script, wasm, string(qs), string(gs)).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Traces  []string          `json:"traces"`
		Grades  []json.RawMessage `json:"grades"`
		Refused string            `json:"refused"`
		Toy     string            `json:"toy"`
		Cancel  string            `json:"cancel"`
		Got     int               `json:"cancelGot"`
		Memory  json.RawMessage   `json:"memory"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for i, q := range queries {
		run, err := offline.Run(q)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := offline.Trace(context.Background(), run, func(b []byte) error { buf.Write(b); return nil }); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		if i >= len(got.Traces) || got.Traces[i] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the WebAssembly's trace is not the native one's", q)
		}
	}
	for i, g := range grades {
		want, err := offline.Grade(g[0], g[1], g[2], false, nil) // graded without a trace
		if err != nil {
			t.Fatal(err)
		}
		wj, _ := json.Marshal(want)
		if i >= len(got.Grades) || !bytes.Equal(compact(got.Grades[i]), wj) {
			t.Errorf("%s/%s: the WebAssembly grades %s, natively %s", g[0], g[1], got.Grades[i], wj)
		}
	}
	if !strings.Contains(got.Cancel, "canceled") || got.Got >= 8<<20 {
		t.Errorf("a run cancelled after its first chunk ended %q after %d bytes (its trace is about 14 MiB)", got.Cancel, got.Got)
	}
	if got.Toy != "toy" {
		t.Errorf("the run of recordings/toy.fstrace is found in %q", got.Toy)
	}
	if mem, err := offline.Get("/api/memory", "b=2&h=8&n=4096&d=64"); err != nil {
		t.Fatal(err)
	} else if mj, _ := json.Marshal(mem); !bytes.Equal(compact(got.Memory), mj) {
		t.Errorf("the memory plan: the WebAssembly's %s, the native %s", got.Memory, mj)
	}
	if !strings.Contains(got.Refused, `"field":"n"`) {
		t.Errorf("n=0 refused with %q: want the API's error naming the field", got.Refused)
	}
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

func compact(b []byte) []byte {
	var buf bytes.Buffer
	json.Compact(&buf, b)
	return buf.Bytes()
}

// goEnvRoot is the GOROOT of the go command that builds the WebAssembly
// (go env GOROOT, as scripts/site reads it), whose wasm_exec.js must
// match it: the test binary's own runtime.GOROOT need not be that one.
func goEnvRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}
