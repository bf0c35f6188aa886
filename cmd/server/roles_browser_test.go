package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/recordings"
	"flashstep/roles"

	"github.com/chromedp/chromedp"
)

// roleRecording is a roles-mode recording of list.txt, decoded.
type roleRecording struct {
	name, query string
	h           *instrument.Header
	recs        []*instrument.Record
	blocks      map[roles.Key]*roles.Block
}

// roleRecordings reads every recording of a roles run (mode=roles) that
// recordings/list.txt names.
func roleRecordings(t *testing.T) []roleRecording {
	t.Helper()
	list, err := recordings.Files.Open("list.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer list.Close()
	entries, err := recordings.ParseList(list)
	if err != nil {
		t.Fatal(err)
	}
	var out []roleRecording
	for _, e := range entries {
		q, err := url.ParseQuery(e.Query)
		if err != nil || q.Get("mode") != "roles" {
			continue
		}
		f, err := recordings.Files.Open(e.Name + ".fstrace")
		if err != nil {
			t.Fatal(err)
		}
		h, recs, err := instrument.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		out = append(out, roleRecording{e.Name, e.Query, h, recs, roles.ByBlock(recs)})
	}
	if len(out) == 0 {
		t.Fatal("recordings/list.txt names no roles recording")
	}
	return out
}

// stepOf is the 1-based step of block (bh, i)'s kv-tile j (−1: its
// epilogue) as the stepper numbers steps: every record but the role
// records (a timing trace has no inputs).
func (r roleRecording) stepOf(bh, i, j int) int {
	n := 0
	for _, rec := range r.recs {
		if rec.Kind == instrument.KindRole {
			continue
		}
		n++
		if rec.BH == bh && rec.I == i && rec.J == j {
			return n
		}
	}
	return 0
}

func (r roleRecording) steps() int {
	n := 0
	for _, rec := range r.recs {
		if rec.Kind != instrument.KindRole {
			n++
		}
	}
	return n
}

var rolesShot = flag.String("roles-screenshot", "", "write a screenshot of each roles recording's lanes to this folder (NAME.png)")

// TestBrowserRoleLanes replays each roles recording (CPU mode: the H100's
// own stamps) at a step in the middle of a block: the page counts the
// trace's steps as a timing trace's, draws the block's lanes with every
// role span it has, writes the step's note (whose figures a unit test,
// jstest/role_spans.test.mjs, holds to package roles for every block),
// places a span where its stamps say and goes to its step on a click.
// A trace without roles replayed in the same page draws no lanes. Under
// -short, the first roles recording only.
func TestBrowserRoleLanes(t *testing.T) {
	t.Parallel()
	longOnly(t)
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)
	recs := roleRecordings(t)
	if testing.Short() {
		recs = recs[:1]
	}
	const bh, q, kv, other = 0, 3, 4, 6
	for _, rr := range recs {
		b := rr.blocks[roles.Key{BH: bh, I: q}]
		if b == nil {
			t.Fatalf("%s has no block (%d, %d)", rr.name, bh, q)
		}
		total := rr.steps()
		at := rr.stepOf(bh, q, kv)
		navigate(ctx, t, fmt.Sprintf("%s/step?%s&step=%d", base, rr.query, at))
		waitText(ctx, t, "#run-status", fmt.Sprintf("Trace complete: %d steps", total))
		waitText(ctx, t, "#roles-note", fmt.Sprintf("kv-tile %d:", kv))
		if got, want := evalJS[string](ctx, t, `document.getElementById('step-label').textContent`), fmt.Sprintf("%d / %d", at, total); got != want {
			t.Errorf("%s: step label %q, want %q", rr.name, got, want)
		}

		type lanes struct {
			Lanes, Spans, FontPx, LabelRoom, Axis, LaneBoxes, Block, Note string
		}
		got := evalJS[lanes](ctx, t, `(() => {
		  const c = document.getElementById('roles');
		  return {lanes: c.dataset.lanes, spans: c.dataset.spans, fontPx: c.dataset.fontPx, labelRoom: c.dataset.labelRoom,
		    axis: c.dataset.axis, laneBoxes: c.dataset.laneBoxes, block: c.dataset.block,
		    note: document.getElementById('roles-note').textContent};
		})()`)
		if got.Lanes != "producer,consumer 0,consumer 1,products in flight" {
			t.Errorf("%s: lanes %q", rr.name, got.Lanes)
		}
		drawn := len(b.Select(func(s roles.Span) bool { return s.Event != instrument.EventClock }))
		if got.Spans != fmt.Sprint(drawn) || drawn == 0 {
			t.Errorf("%s: %s spans drawn, the block has %d role spans (its clock anchors aside)", rr.name, got.Spans, drawn)
		}
		if got.Block != fmt.Sprintf("%d,%d", bh, q) {
			t.Errorf("%s: lanes of block %q at step %d", rr.name, got.Block, at)
		}
		var px, room float64
		fmt.Sscan(got.FontPx, &px)
		fmt.Sscan(got.LabelRoom, &room)
		if px < 12 || room < 0 {
			t.Errorf("%s: lane labels at %q px with %q px of room", rr.name, got.FontPx, got.LabelRoom)
		}

		// The note's figures, every block's of every roles recording, are
		// held to package roles by a unit test (jstest/role_spans.test.mjs);
		// here, that the page writes the note of the step shown.
		if !strings.HasPrefix(got.Note, fmt.Sprintf("kv-tile %d: ", kv)) || !strings.Contains(got.Note, "consumer 0: waited ") {
			t.Errorf("%s: the note of step %d:\n%s", rr.name, at, got.Note)
		}
		first, last := b.Extent()

		// Consumer 1's softmax of another kv-tile, where its stamps put it:
		// the tooltip names it, a click goes to its step.
		s, ok := b.Find(instrument.RoleConsumer1, instrument.EventSoftmax, other)
		if !ok {
			t.Fatalf("%s: no softmax of consumer 1 at kv-tile %d", rr.name, other)
		}
		var left, width, length float64
		fmt.Sscan(got.Axis, &left, &width, &length)
		if length != float64(last-first) {
			t.Errorf("%s: the axis runs %v ns, the block's stamps %d ns", rr.name, length, last-first)
		}
		boxes := strings.Split(got.LaneBoxes, ";")
		var y0, hgt float64
		if len(boxes) == 4 {
			fmt.Sscan(boxes[2], &y0, &hgt)
		}
		x := left + (float64(s.Start+s.End)/2-float64(first))/length*width
		y := y0 + hgt/2
		at2 := rr.stepOf(bh, q, other)
		tip := evalJS[string](ctx, t, fmt.Sprintf(`(() => {
		  const c = document.getElementById('roles'); const r = c.getBoundingClientRect();
		  const sx = r.width / c.clientWidth, sy = r.height / c.clientHeight;
		  const at = {clientX: r.left + %f * sx, clientY: r.top + %f * sy, bubbles: true};
		  c.dispatchEvent(new MouseEvent('mousemove', at));
		  const text = document.getElementById('tip').textContent;
		  c.dispatchEvent(new MouseEvent('click', at));
		  return text;
		})()`, x, y))
		if want := fmt.Sprintf("consumer 1: online softmax, kv-tile %d\n%d–%d ns from the block's start (%d ns)", other, s.Start-first, s.End-first, s.Len()); !strings.Contains(tip, want) {
			t.Errorf("%s: hovering consumer 1's softmax of kv-tile %d shows %q, want %q", rr.name, other, tip, want)
		}
		waitText(ctx, t, "#step-label", fmt.Sprintf("%d / %d", at2, total))
		waitText(ctx, t, "#roles-note", fmt.Sprintf("kv-tile %d:", other))
		if *rolesShot != "" {
			buf, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.ID("roles-box")))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(*rolesShot, rr.name+".png"), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A lesson's checkpoint holds the overlap at its step (hold=roles.bh.q.step):
	// the note keeps it back until the lesson releases it.
	rr := recs[0]
	b := rr.blocks[roles.Key{BH: bh, I: q}]
	at := rr.stepOf(bh, q, kv)
	navigate(ctx, t, fmt.Sprintf("%s/step?%s&step=%d&hold=roles.%d.%d.%d", base, rr.query, at, bh, q, at))
	waitText(ctx, t, "#roles-note", fmt.Sprintf("kv-tile %d:", kv))
	hidden, softmax, _ := b.HiddenSoftmax(instrument.RoleConsumer0, kv)
	heldNote := evalJS[string](ctx, t, `document.getElementById('roles-note').textContent`)
	if want := fmt.Sprintf("softmax %d ns, of which ? (a checkpoint asks) under consumer 1's products", softmax); !strings.Contains(heldNote, want) {
		t.Errorf("%s with the step held: the note does not say %q:\n%s", rr.name, want, heldNote)
	}
	if strings.Contains(heldNote, fmt.Sprintf("of which %d ns", hidden)) {
		t.Errorf("%s with the step held: the note gives the held overlap away:\n%s", rr.name, heldNote)
	}
	evalJS[bool](ctx, t, `(window.postMessage({type: 'flashstep-release'}, location.origin), true)`)
	waitText(ctx, t, "#roles-note", fmt.Sprintf("softmax %d ns, of which %d ns under consumer 1's products", softmax, hidden))

	// A timing trace without roles, replayed from its file: no lanes.
	navigate(ctx, t, base+"/step?"+toyRun)
	waitText(ctx, t, "#run-status", "Trace complete")
	file, err := filepath.Abs(filepath.Join("..", "..", "recordings", "timeline-2048.fstrace"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload"), []string{file})); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#run-status", "Replaying timeline-2048.fstrace")
	waitText(ctx, t, "#step-label", "/ 8960")
	if shown := evalJS[bool](ctx, t, `document.getElementById('roles').getClientRects().length > 0 || !document.getElementById('roles-box').hidden`); shown {
		t.Errorf("a timing trace without roles shows the roles' lanes")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
