package lab

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"flashstep/internal/testrand"
	"flashstep/kernels"
)

// mergeDriver runs exercise 7's grade.js in Node as the page does
// (static/js/lab.js): the trace the CPU mirror writes, read by the page's
// own TraceReader and TraceModel; the kernel's calls, then the hidden ones
// from a seed; each answer held to check. It prints, for every source it
// is given, where that source first fails (or that it passes), and what
// the kernel's calls held.
const mergeDriver = `
import { readFileSync } from 'node:fs';
import { TraceReader } from '%ROOT%/static/js/trace.js';
import { TraceModel } from '%ROOT%/static/js/model.js';
import { rungs } from '%ROOT%/static/js/rungs.js';
import * as grade from '%DIR%/grade.mjs';

rungs.push(...JSON.parse(readFileSync('%ROOT%/jstest/testdata/rungs.json', 'utf8')));
const { trace, seed, sources, entry } = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let model = null;
const reader = new TraceReader({ onHeader: (h) => { model = new TraceModel(h); }, onRecord: (r) => model.add(r) });
reader.push(new Uint8Array(readFileSync(trace)));
if (!reader.complete) throw new Error('the trace did not read whole');
const phases = [['kernel', grade.kernelCalls(model.h, model)], ['hidden', grade.randomCalls(seed)]];
const kernel = phases[0][1];
const out = {
  calls: kernel.length,
  splits: Math.max(...kernel.map((c) => c.args[0].length)),
  emptySplits: kernel.filter((c) => c.args[0].includes(-Infinity)).length,
  results: {},
};
const safe = (v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v);
for (const [name, src] of Object.entries(sources)) {
  const fn = (0, eval)(src + '\n;' + entry);
  let res = { verdict: 'pass' };
  run: for (const [phase, calls] of phases) {
    for (let k = 0; k < calls.length; k++) {
      // Through structuredClone, as the worker sends its answers back.
      const miss = grade.check(calls[k], structuredClone(fn(...structuredClone(calls[k].args))));
      if (miss) {
        res = { verdict: 'fail', phase, call: k, at: calls[k].at, quantity: miss.quantity ?? '', message: miss.message ?? '', yours: safe(miss.yours), kernel: safe(miss.kernelValue) };
        break run;
      }
    }
  }
  out.results[name] = res;
}
console.log(JSON.stringify(out));
`

type mergeResult struct {
	Verdict, Phase, Quantity, Message string
	Call                              int
	At                                map[string]any
	Yours, Kernel                     any
}

type mergeOut struct {
	Calls, Splits, EmptySplits int
	Results                    map[string]mergeResult
}

// gradeMerge grades sources (name → JavaScript) on exercise 7 in Node,
// the hidden cases drawn from seed.
func gradeMerge(t *testing.T, e *Exercise, seed uint32, sources map[string]string) mergeOut {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node: the loop track's graders run in JavaScript")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run, err := e.Run.Check()
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := kernels.MirrorTrace(context.Background(), run, func(chunk []byte) error { raw = append(raw, chunk...); return nil }); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The grader imports the page's module by its URL; here, by its file.
	write("grade.mjs", []byte(strings.ReplaceAll(e.Grader, "'/static/js/", "'"+root+"/static/js/")))
	driver := write("driver.mjs", []byte(strings.NewReplacer("%ROOT%", root, "%DIR%", dir).Replace(mergeDriver)))
	in, _ := json.Marshal(map[string]any{"trace": write("run.fstrace", raw), "seed": seed, "sources": sources, "entry": e.Entry})
	cmd := exec.Command(node, driver, write("in.json", in))
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		if x, ok := err.(*exec.ExitError); ok {
			t.Fatalf("node: %v\n%s", err, x.Stderr)
		}
		t.Fatalf("node: %v", err)
	}
	var out mergeOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return out
}

// TestMergeSplitsGrader holds exercise 7's grader to its exercise: the
// kernel's run gives every row three splits and some rows an empty one;
// the solution passes the kernel's calls and the hidden ones; each classic
// slip fails, the kernel's calls catching all but the merge without the
// max, which only the hidden cases' large LSEs catch; a merge that answers
// NaN fails.
func TestMergeSplitsGrader(t *testing.T) {
	t.Parallel()
	e, ok := ByID("merge-splits")
	if !ok {
		t.Fatal("no exercise merge-splits")
	}
	seed := uint32(testrand.New(t).Uint64())
	t.Logf("hidden cases drawn from seed %d (the page's randomCalls(seed))", seed)
	sources := map[string]string{"solution": e.Solution, "starter": e.Starter,
		"nan": "function mergeSplits(lses, os) {\n  return { lse: NaN, o: os[0].map(() => NaN) };\n}\n",
		// Right LSE, NaN in o: NaN never passes, not even beside a right lse.
		"nan-o": e.Solution + "\nconst right = mergeSplits;\nmergeSplits = (l, o) => ({ ...right(l, o), o: right(l, o).o.map(() => NaN) });\n",
	}
	for name, src := range e.Slips {
		sources["slip "+name] = src
	}
	out := gradeMerge(t, e, seed, sources)
	if out.Splits != 3 || out.EmptySplits == 0 || out.EmptySplits == out.Calls {
		t.Errorf("the kernel's calls: %d of them, %d splits, %d with an empty split; want 3 splits, some rows with an empty one and some without", out.Calls, out.Splits, out.EmptySplits)
	}
	if r := out.Results["solution"]; r.Verdict != "pass" {
		t.Errorf("the solution (seed %d): %+v", seed, r)
	}
	for _, name := range []string{"starter", "nan", "nan-o"} {
		if r := out.Results[name]; r.Verdict != "fail" || r.Phase != "kernel" {
			t.Errorf("%s (seed %d): %+v; want a fail on the kernel's calls", name, seed, r)
		}
	}
	want := map[string]struct{ phase, quantity string }{
		"even-average":           {"kernel", "O"},
		"weights-not-normalised": {"kernel", "O"},
		"weights-against-max":    {"kernel", "O"},
		"divides-by-own-sum":     {"kernel", "O"},
		"multiplies-by-own-sum":  {"kernel", "O"},
		"no-max":                 {"hidden", "LSE"},
	}
	if len(e.Slips) != len(want) {
		t.Errorf("%d slips, want %d", len(e.Slips), len(want))
	}
	for name, w := range want {
		r, ok := out.Results["slip "+name]
		if !ok {
			t.Errorf("no slip %s", name)
			continue
		}
		if r.Verdict != "fail" || r.Phase != w.phase || r.Quantity != w.quantity {
			t.Errorf("slip %s (seed %d): %+v; want a fail on the %s calls, at %s", name, seed, r, w.phase, w.quantity)
		}
	}
	// The merge without the max fails on the first hidden case, LSEs near
	// 800: its exp overflows to Infinity.
	if r := out.Results["slip no-max"]; r.Call != 0 || r.Yours != "Infinity" {
		t.Errorf("slip no-max (seed %d): %+v; want the first hidden case, its LSE Infinity", seed, r)
	}
}
