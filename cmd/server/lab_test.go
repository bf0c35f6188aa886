package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels"
	"flashstep/lab"

	"github.com/chromedp/chromedp"
)

// The lab's loop track in Chromium: each exercise's solution passes, and
// each of its classic slips fails where the slip first shows, at the tile,
// row, quantity and element that this test works out for itself on the
// kernel's trace (a float64 replay of the slip beside the CPU mirror's
// records, held to the page's tolerance). Then what a sandbox must do: an
// endless loop is stopped at the time limit, a syntax error and a thrown
// error are shown at their line, the tolerance holds at its edge, and the
// student's code cannot reach the network.
func TestBrowserLabLoopTrack(t *testing.T) {
	t.Parallel()
	// A second for the student's code: an exercise's solution takes
	// milliseconds, and the endless loop below is stopped sooner.
	base, _ := startServer(t, "-lab-loop-time", "1s")
	ctx := browser(t)
	problems := watchConsole(ctx)
	// Exercise 1 last: the sandbox's checks below run on its page.
	for _, id := range []string{"qtile-loop", "online-step"} {
		e, ok := lab.ByID(id)
		if !ok {
			t.Fatalf("no exercise %s", id)
		}
		navigate(ctx, t, base+"/lab/"+id)
		waitText(ctx, t, "#lab-status", "Not run yet")
		v := labRun(ctx, t, e.Solution)
		if v.Verdict != "pass" {
			t.Errorf("%s: the solution's verdict is %+v", id, v)
		}
		// Exercise 2's calls are q-tiles, each with its records.
		if id == "qtile-loop" && !regexp.MustCompile(`every one of its \d+ q-tiles \(\d+ records\)`).MatchString(v.Text) {
			t.Errorf("%s: the pass does not count q-tiles and records: %q", id, v.Text)
		}
		recs := mirrorRecords(t, e.Run)
		for name, src := range slipsToTry(t, e) {
			want := slipMiss(t, e, name, recs)
			got := labRun(ctx, t, src)
			if got.Verdict != "fail" || got.I != want.I || got.J != want.J || got.Row != want.Row || got.Quantity != want.Quantity || got.X != want.X {
				t.Errorf("%s slip %s: the page says %+v; the slip first shows at %+v", id, name, got, want)
			}
			if got.Verdict == "fail" && !strings.Contains(got.Text, "the kernel's") {
				t.Errorf("%s slip %s: the verdict does not set the kernel's number beside the student's: %q", id, name, got.Text)
			}
			saveShot(ctx, t, "lab-"+id+"-"+name)
		}
	}
	// The sandbox, on exercise 1's page.
	if v := labRun(ctx, t, "function onlineSoftmaxStep() {\n  for (;;) {}\n}\n"); v.Verdict != "timeout" || !strings.Contains(v.Text, "more than 1 s") {
		t.Errorf("an endless loop: %+v", v)
	}
	if v := labRun(ctx, t, "function onlineSoftmaxStep(mOld) {\n  const x = 1;\n  return { m: mOld, l: x +* 2 };\n}\n"); v.Verdict != "error" || v.Line != "3" {
		t.Errorf("a syntax error on line 3: %+v", v)
	}
	if v := labRun(ctx, t, "function onlineSoftmaxStep(mOld) {\n  const o = undefined;\n\n  return o.m;\n}\n"); v.Verdict != "error" || v.Line != "4" || !strings.Contains(v.Text, "TypeError") {
		t.Errorf("a TypeError on line 4: %+v", v)
	}
	// The graders' tolerance (lab_grade.js's within) at its edges is held
	// to the kernel track's by a unit test, jstest/lab_grade.test.mjs.
	leak := "function onlineSoftmaxStep() {\n  const x = new XMLHttpRequest();\n  x.open('GET', '/healthz', false);\n  x.send();\n  return x.responseText;\n}\n"
	if v := labRun(ctx, t, leak); v.Verdict != "error" {
		t.Errorf("student code reached the network: %+v", v)
	}
	// Without a GPU (and without -lab-kernels on) the kernel track is off:
	// its pages say what it needs, and step the solution's run recorded on
	// a GPU beside the reference kernel's (labrun's tests hold the
	// recorded numbers to the mirror's).
	navigate(ctx, t, base+"/lab/causal-kernel")
	waitText(ctx, t, "#lab-recorded-caption", "H100")
	// Under the disabled Run button the status says why nothing runs, and
	// the recorded placement names where its rungs' figures come from.
	waitText(ctx, t, "#lab-status", "Not run here: this server's kernel track is off")
	waitText(ctx, t, "#lab-placed-table", "ladder-h100.json")
	type recordedView struct {
		Off, Track      bool
		Options, Picked int
		Rows            []string
		Heatmaps        int
		Placed          bool
	}
	view := func() recordedView {
		return evalJS[recordedView](ctx, t, `(() => ({
			off: !!document.querySelector('[data-testid=kernel-track-off]') && /NVRTC/.test(document.querySelector('[data-testid=kernel-track-off]').textContent),
			track: JSON.parse(document.getElementById('fs-lab').textContent).kernel_track,
			options: document.getElementById('lab-records-step').options.length,
			picked: document.getElementById('lab-records-step').selectedIndex,
			rows: [...document.querySelectorAll('#lab-rows tbody tr')].map((tr) => tr.textContent),
			heatmaps: document.querySelectorAll('#lab-diff canvas, #lab-diff svg').length,
			placed: !document.getElementById('lab-placed').hidden,
		}))()`)
	}
	causal, _ := lab.ByID("causal-kernel")
	tq := (causal.Run.N + causal.Run.Br - 1) / causal.Run.Br
	v := view()
	// The causal run visits kv-tiles 0…i of q-tile i: tq(tq+1)/2 steps.
	if !v.Off || v.Track || v.Options != tq*(tq+1)/2 || v.Picked != 0 || len(v.Rows) != causal.Run.Br || v.Heatmaps < 2 || !v.Placed {
		t.Errorf("the causal kernel's page without the kernel track: %+v", v)
	}
	evalJS[bool](ctx, t, `(document.getElementById('lab-recorded').scrollIntoView(), true)`)
	saveShot(ctx, t, "lab-recorded.png")
	click(ctx, t, "#lab-records-next")
	if w := view(); w.Picked != 1 || slices.Equal(w.Rows, v.Rows) {
		t.Errorf("the recorded run's next step: %+v", w)
	}
	for _, row := range append(v.Rows, view().Rows...) {
		if strings.Contains(row, "NaN") {
			t.Errorf("a row of the recorded run's step shows NaN: %q", row)
		}
	}
	for _, p := range problems() {
		if !strings.Contains(p, "healthz") && !strings.Contains(p, "Content Security Policy") && !strings.Contains(p, "content security policy") {
			t.Errorf("console: %s", p)
		}
	}
}

// TestBrowserLabKernelTrack submits CUDA kernels from the page to a
// server whose kernel track runs this test binary as its lab worker (the
// labruntest fake: the numbers a right kernel, a wrong one and one that
// does not compile would give): the right one passes, the wrong one's first
// difference is named, and the compile error is marked at its line.
func TestBrowserLabKernelTrack(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t, "-lab-kernels", "on", "-lab-worker", os.Args[0])
	ctx := browser(t)
	navigate(ctx, t, base+"/lab/causal-kernel")
	waitText(ctx, t, "#lab-status", "Not run yet")
	if v := labRun(ctx, t, "// PASS\n"); v.Verdict != "pass" || !strings.Contains(v.Text, "hidden runs") {
		t.Errorf("a right kernel: %+v", v)
	}
	// Timed at the ladder's size and set among the rungs.
	waitText(ctx, t, "[data-testid=lab-placed]", "TFLOP/s, beside each rung")
	if rows := evalJS[string](ctx, t, `Array.from(document.querySelectorAll('#lab-placed-table tr')).map((r) => r.textContent).join('|')`); !strings.Contains(rows, "your kernel") || !strings.Contains(rows, "rung 4: flash2") {
		t.Errorf("the placement: %q", rows)
	}
	saveShot(ctx, t, "lab-kernel-pass")
	// Its records, every step of them, to step beside the kernel's.
	causal, _ := lab.ByID("causal-kernel")
	tq := (causal.Run.N + causal.Run.Br - 1) / causal.Run.Br
	if n := evalJS[int](ctx, t, `(async () => {
		// The records show once the reference kernel's run has streamed.
		for (let k = 0; k < 200 && document.getElementById('lab-records').hidden; k++) await new Promise((r) => setTimeout(r, 25));
		return document.getElementById('lab-records').hidden ? -1 : document.getElementById('lab-records-step').options.length;
	})()`); n != tq*(tq+1)/2 {
		t.Errorf("a passing kernel's records to step: %d steps, want %d", n, tq*(tq+1)/2)
	}
	if v := labRun(ctx, t, "// LSE\n"); v.Verdict != "fail" || v.Quantity != "LSE" || v.Row != "2" || v.J != "end" {
		t.Errorf("a kernel with one LSE wrong: %+v", v)
	}
	if v := labRun(ctx, t, "// COMPILE\n"+strings.Repeat("\n", 8)); v.Verdict != "error" || v.Line != "7" || !strings.Contains(v.Text, "expected a") {
		t.Errorf("a kernel that does not compile: %+v", v)
	}
	if n := evalJS[int](ctx, t, `document.querySelectorAll('.cm-lintRange-error, .cm-lint-marker-error').length`); n == 0 {
		t.Errorf("the compile error is not marked in the editor")
	}
	// A kernel that prints: it passes, and its printf shows under the
	// verdict, cut at 8 KiB with a note.
	if v := labRun(ctx, t, "// PRINTF\n"); v.Verdict != "pass" {
		t.Errorf("a kernel that prints: %+v", v)
	}
	if out := evalJS[string](ctx, t, `document.getElementById('lab-output').hidden ? '' : document.getElementById('lab-output').textContent`); !strings.Contains(out, "row 0: m = 0\nrow 1: m = 0.125") || !strings.Contains(out, "more bytes were cut") {
		t.Errorf("what the kernel printed, as the page shows it: %.200q", out)
	}
	evalJS[bool](ctx, t, `(document.getElementById('lab-output').scrollIntoView(), true)`)
	saveShot(ctx, t, "lab-kernel-printf.png")
	// A compiler that crashes on the source: a verdict in words.
	if v := labRun(ctx, t, "// COMPILECRASH\n"); v.Verdict != "error" || !strings.Contains(v.Text, "The compiler stopped on your source") || strings.Contains(v.Text, "goroutine") {
		t.Errorf("a source that crashes the compiler: %+v", v)
	}
}

// slipsToTry are an exercise's slips the test runs: all of them, or under
// -short one drawn from the test's seed (make test-long and CI run all).
func slipsToTry(t *testing.T, e *lab.Exercise) map[string]string {
	if !testing.Short() {
		return e.Slips
	}
	names := slices.Sorted(maps.Keys(e.Slips))
	name := names[testrand.New(t).IntN(len(names))]
	return map[string]string{name: e.Slips[name]}
}

// labVerdict is what the page's status says of a run.
type labVerdict struct {
	Verdict, I, J, Row, Quantity, X, Line, Text string
}

// labRun types src into the editor (through CodeMirror itself), runs it and
// waits for the verdict.
func labRun(ctx context.Context, t *testing.T, src string) labVerdict {
	t.Helper()
	js := fmt.Sprintf(`(async () => {
		const { EditorView } = await import('/static/vendor/codemirror/codemirror.js');
		// The editor is built when the student first reaches for the code
		// (lab.js, lazyEditor); a page that has just loaded has not yet.
		document.querySelector('#editor .lab-editor-plain')?.dispatchEvent(new Event('pointerdown'));
		for (let k = 0; k < 200 && !document.querySelector('#editor .cm-editor'); k++) await new Promise((r) => setTimeout(r, 25));
		const view = EditorView.findFromDOM(document.querySelector('#editor .cm-editor'));
		view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: %s } });
		const status = document.getElementById('lab-status');
		status.dataset.verdict = '';
		document.getElementById('lab-run').click();
		// A deadline by the clock, not by a count of timer ticks (a loaded
		// machine stretches each tick).
		const end = Date.now() + 30000;
		while (Date.now() < end && ['', 'running'].includes(status.dataset.verdict || '')) await new Promise((r) => setTimeout(r, 50));
		status.scrollIntoView();
		const d = status.dataset;
		return JSON.stringify({ Verdict: d.verdict || '', I: d.i || '', J: d.j || '', Row: d.row || '', Quantity: d.quantity || '', X: d.x || '', Line: d.line || '', Text: status.textContent });
	})()`, jsString(src))
	// The page's own deadline is 30 s; past a minute the evaluation itself
	// is stuck (a renderer gone, a context lost): fail with what the page
	// says, not at the whole test's limit.
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := chromedp.Run(ectx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		said, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`document.getElementById('lab-status')?.textContent ?? '(no page)'`))
		t.Fatalf("running the editor's code: %v; the page's status says %q", err, said)
	}
	var v labVerdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func mirrorRecords(t *testing.T, c kernels.Config) []*instrument.Record {
	t.Helper()
	run, err := c.Check()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*instrument.Record
	if err := kernels.RunMirror(context.Background(), run, func(r *instrument.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// The page's tolerance (static/js/lab_grade.js) is the kernel track's
// (lab.Within; jstest/lab_grade.test.mjs holds the page to it).
var labWithin, labScale = lab.Within, lab.ScaleOf

func f64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for k, x := range xs {
		out[k] = float64(x)
	}
	return out
}

// slipMiss works out where slip name of exercise e first differs from the
// kernel's records, as the page should report it.
func slipMiss(t *testing.T, e *lab.Exercise, name string, recs []*instrument.Record) labVerdict {
	t.Helper()
	h := e.Run
	d := h.D
	var v []float32 // inputs of batch-head 0, the only one these runs have
	var q, k []float32
	for _, r := range recs {
		if r.Kind == instrument.KindInputs {
			q, k, v = r.Q, r.K, r.V
		}
	}
	// miss compares one row's state with the kernel's, in the page's order.
	miss := func(m, l float64, o []float64, km, kl float64, ko []float64, lScale float64) (string, int) {
		switch {
		case !labWithin(m, km, math.Max(math.Abs(km), 0)+b2f(km == 0)):
			return "m", -1
		case !labWithin(l, kl, lScale):
			return "l", -1
		}
		sc := labScale(ko)
		for x := range ko {
			if !labWithin(o[x], ko[x], sc) {
				return "O", x
			}
		}
		return "", -1
	}
	verdict := func(i, j, row int, qty string, x int) labVerdict {
		out := labVerdict{Verdict: "fail", I: fmt.Sprint(i), J: fmt.Sprint(j), Row: fmt.Sprint(i*h.Br + row), Quantity: qty}
		if j < 0 {
			out.J = "end"
		}
		if x >= 0 {
			out.X = fmt.Sprint(x)
		}
		return out
	}
	// step is one kv-tile's update of one row, as the slip writes it.
	step := func(mOld, lOld float64, oOld, s []float64, j int) (m, l float64, o []float64) {
		m = mOld
		for _, x := range s {
			m = math.Max(m, x)
		}
		if name == "tile-max-only" {
			m = math.Inf(-1)
			for _, x := range s {
				m = math.Max(m, x)
			}
		}
		b := m
		if math.IsInf(m, -1) && (e.ID == "qtile-loop") {
			b = 0
		}
		alpha := math.Exp(mOld - b)
		o = make([]float64, d)
		for x := range d {
			o[x] = oOld[x]
			if name != "no-alpha-on-o" {
				o[x] *= alpha
			}
		}
		l = lOld
		if name != "no-alpha-on-l" {
			l *= alpha
		}
		for c, sc := range s {
			p := math.Exp(sc - b)
			l += p
			for x := range d {
				o[x] += p * float64(v[(j*h.Bc+c)*d+x])
			}
		}
		return m, l, o
	}
	switch e.ID {
	case "online-step":
		type state struct {
			l []float64
			o [][]float64
		}
		prev := map[int]state{}
		for _, r := range recs {
			if r.Kind != instrument.KindFlashStep {
				continue
			}
			rows, cols := r.RowsValid, r.ColsValid
			st, ok := prev[r.I]
			lScale := labScale(f64(r.L[:rows]))
			for row := range rows {
				lOld, oOld := 0.0, make([]float64, d)
				if ok {
					lOld, oOld = st.l[row], st.o[row]
				}
				m, l, o := step(float64(r.MOld[row]), lOld, oOld, f64(r.S[row*h.Bc:row*h.Bc+cols]), r.J)
				if qty, x := miss(m, l, o, float64(r.MNew[row]), float64(r.L[row]), f64(r.O[row*d:(row+1)*d]), lScale); qty != "" {
					return verdict(r.I, r.J, row, qty, x)
				}
			}
			next := state{l: f64(r.L[:rows])}
			for row := range rows {
				next.o = append(next.o, f64(r.O[row*d:(row+1)*d]))
			}
			prev[r.I] = next
		}
	case "qtile-loop":
		scale := float64(h.Scale())
		type tile struct {
			m, l []float64
			o    [][]float64
		}
		cur := map[int]*tile{}
		for _, r := range recs {
			if r.Kind != instrument.KindFlashStep && r.Kind != instrument.KindEpilogue {
				continue
			}
			rows := r.RowsValid
			st := cur[r.I]
			if st == nil {
				st = &tile{}
				for range rows {
					st.m, st.l, st.o = append(st.m, math.Inf(-1)), append(st.l, 0), append(st.o, make([]float64, d))
				}
				cur[r.I] = st
			}
			if r.Kind == instrument.KindEpilogue {
				for row := range rows {
					lse := st.m[row] + math.Log(st.l[row])
					if name == "lse-without-m" {
						lse = math.Log(st.l[row])
					}
					if !labWithin(lse, float64(r.LSE[row]), math.Max(math.Abs(float64(r.LSE[row])), 0)+b2f(r.LSE[row] == 0)) {
						return verdict(r.I, -1, row, "LSE", -1)
					}
					o := make([]float64, d)
					for x := range d {
						o[x] = st.o[row][x] / st.l[row]
					}
					ko := f64(r.O[row*d : (row+1)*d])
					sc := labScale(ko)
					for x := range d {
						if !labWithin(o[x], ko[x], sc) {
							return verdict(r.I, -1, row, "O", x)
						}
					}
				}
				continue
			}
			c0, cols := r.J*h.Bc, r.ColsValid
			lScale := labScale(f64(r.L[:rows]))
			for row := range rows {
				s := make([]float64, cols)
				for c := range cols {
					var dot float64
					for x := range d {
						dot += float64(q[(r.I*h.Br+row)*d+x]) * float64(k[(c0+c)*d+x])
					}
					masked := c0+c > r.I*h.Br+row
					switch name {
					case "mask-own-key":
						masked = c0+c >= r.I*h.Br+row
					case "mask-in-tile":
						masked = c > row
					}
					s[c] = dot * scale
					if h.Causal && masked {
						s[c] = math.Inf(-1)
					}
				}
				st.m[row], st.l[row], st.o[row] = step(st.m[row], st.l[row], st.o[row], s, r.J)
				if qty, x := miss(st.m[row], st.l[row], st.o[row], float64(r.MNew[row]), float64(r.L[row]), f64(r.O[row*d:(row+1)*d]), lScale); qty != "" {
					return verdict(r.I, r.J, row, qty, x)
				}
			}
		}
	}
	t.Fatalf("%s slip %s never differs from the kernel: it tests nothing", e.ID, name)
	return labVerdict{}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestBrowserLabRoom: in a classroom, the presenter presents a kernel
// exercise; a student's kernel passes (the labruntest fake), and the
// presenter's tally counts it; the presenter turns the kernel track off
// for the room, and the student's page says so; then puts the loop
// exercise in front of the room, and steps its reference run with the
// room. (web's TestLabRoom holds the room's protocol to a class of 300
// in make test; this is the pages' part, in make test-long and CI.)
func TestBrowserLabRoom(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t, "-lab-kernels", "on", "-lab-worker", os.Args[0])
	ctx := browser(t)
	navigate(ctx, t, base+"/lab/causal-kernel")
	waitText(ctx, t, "#lab-status", "Not run yet")
	click(ctx, t, "#present")
	waitText(ctx, t, "[data-testid=room-counts]", "student")
	join := evalJS[string](ctx, t, `document.querySelector('[data-testid=room-join-url]').href`)
	sctx, problems := student(t, ctx, join)
	waitText(sctx, t, "#room-status", "put this exercise in front of the class")
	waitText(sctx, t, "#lab-status", "Not run yet")
	if v := labRun(sctx, t, "// PASS\n"); v.Verdict != "pass" {
		t.Errorf("the student's kernel in the room: %+v", v)
	}
	waitText(ctx, t, "[data-testid=room-counts]", "1 student: 1 passed, 0 tried and not passed yet, 0 not run yet")
	click(ctx, t, "#room-kernels")
	waitText(sctx, t, "[data-testid=kernel-track-off]", "The presenter turned the kernel track off")
	waitText(ctx, t, "[data-testid=kernel-track-off]", "The presenter turned the kernel track off") // the presenter's page too
	waitText(ctx, t, "[data-testid=room-counts]", "1 student")
	if on := evalJS[bool](sctx, t, `!document.getElementById('lab-run').disabled`); on {
		t.Errorf("the student's run button is on with the room's kernel track off")
	}
	evalJS[bool](ctx, t, `(() => { const s = document.getElementById('room-lab'); s.value = 'online-step'; s.dispatchEvent(new Event('change')); return true; })()`)
	waitText(sctx, t, "h1", "The online-softmax update, one tile")
	waitText(ctx, t, "[data-testid=room-counts]", "1 student: 0 passed, 0 tried and not passed yet, 1 not run yet")
	step, _ := lab.ByID("online-step")
	if v := labRun(sctx, t, step.Solution); v.Verdict != "pass" {
		t.Errorf("the student's loop exercise in the room: %+v", v)
	}
	waitText(ctx, t, "[data-testid=room-counts]", "1 student: 1 passed")
	saveShot(ctx, t, "lab-room-presenter.png")
	click(ctx, t, "#room-lab-run")
	waitText(sctx, t, "#step-label", "1 / ")
	for _, p := range problems() {
		t.Errorf("the student's console: %s", p)
	}
}

// TestBrowserLabMergeSplits: exercise 7, the merge of split-KV's partials,
// in the page: the solution passes every row of its decode_split run and
// the hidden cases; each classic slip fails, the run's rows naming the
// kernel's number beside the student's, the merge without the max on the
// hidden cases (its run's LSEs are too small to overflow). A second loop
// exercise in the browser, so make test-long's.
func TestBrowserLabMergeSplits(t *testing.T) {
	if testing.Short() {
		t.Skip("a second loop exercise in the browser: make test-long")
	}
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	e, ok := lab.ByID("merge-splits")
	if !ok {
		t.Fatal("no exercise merge-splits")
	}
	navigate(ctx, t, base+"/lab/merge-splits")
	waitText(ctx, t, "#lab-status", "Not run yet")
	if v := labRun(ctx, t, e.Solution); v.Verdict != "pass" {
		t.Errorf("the solution's verdict is %+v", v)
	}
	if len(e.Slips) < 4 {
		t.Fatalf("%d slips", len(e.Slips))
	}
	for name, src := range e.Slips {
		v := labRun(ctx, t, src)
		switch {
		case v.Verdict != "fail":
			t.Errorf("slip %s: %+v", name, v)
		case name != "no-max" && !strings.Contains(v.Text, "the kernel's"):
			t.Errorf("slip %s fails without the kernel's number beside the student's: %q", name, v.Text)
		}
		saveShot(ctx, t, "lab-merge-splits-"+name)
	}
	for _, p := range problems() {
		t.Errorf("console: %s", p)
	}
}
