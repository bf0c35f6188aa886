package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"flashstep/grading"
	"flashstep/instrument"
	"flashstep/internal/testrand"
	"flashstep/kernels/kernelstest"
	"flashstep/lessons"
	"flashstep/lessons/loop"
	"flashstep/recordings"
	"flashstep/runner"
)

func postJSON(t *testing.T, u, body string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return res, b.Bytes()
}

func TestLessonPages(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	course, err := lessons.Default()
	if err != nil {
		t.Fatal(err)
	}
	res, body := get(t, ts.URL+"/lessons")
	if res.StatusCode != 200 {
		t.Fatalf("/lessons: %d", res.StatusCode)
	}
	doc := parse(t, body)
	for _, l := range course.Lessons {
		if findNode(doc, "data-slug", l.Slug) == nil {
			t.Errorf("the course map does not list %s", l.Slug)
		}
	}
	for n, l := range course.Lessons {
		res, body := get(t, ts.URL+"/lessons/"+l.Slug)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", l.Slug, res.StatusCode)
		}
		doc := parse(t, body)
		for _, w := range l.Widgets {
			if findNode(doc, "id", w.ID) == nil {
				t.Errorf("%s: widget %s missing", l.Slug, w.ID)
			}
		}
		for _, c := range l.Checkpoints {
			if el := findNode(doc, "data-checkpoint", c.ID); el == nil || attr(el, "data-format") != c.Format {
				t.Errorf("%s: checkpoint %s missing", l.Slug, c.ID)
			}
		}
		for _, s := range l.Sections {
			if findNode(doc, "id", s.ID) == nil {
				t.Errorf("%s: section anchor %s missing", l.Slug, s.ID)
			}
		}
		next := findNode(doc, "data-testid", "next-lesson")
		if n+1 < len(course.Lessons) && (next == nil || attr(next, "href") != "/lessons/"+course.Lessons[n+1].Slug) {
			t.Errorf("%s: next link %v", l.Slug, next)
		}
	}
	res, body = get(t, ts.URL+"/lessons/no-such-lesson")
	if res.StatusCode != http.StatusNotFound || findNode(parse(t, body), "data-testid", "course-map") == nil {
		t.Errorf("unknown lesson: %d, want 404 with the course map", res.StatusCode)
	}
}

// The API grades against the trace the server's engines produce, answers
// bad input with a hint, and refuses unknown checkpoints and bad bodies.
func TestCheckpointAPI(t *testing.T) {
	t.Parallel()
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	router := &runner.Router{Recordings: recs, Mirror: runner.Mirror{}}
	_, ts := newTestServer(t, router)
	course, _ := lessons.Default()
	for _, l := range course.Lessons {
		for _, c := range l.Checkpoints {
			var trace *lessons.Trace
			if c.NeedsTrace() {
				var buf bytes.Buffer
				if err := router.Run(context.Background(), kernelstest.MustRun(t, c.Run), func(b []byte) error { buf.Write(b); return nil }); err != nil {
					t.Fatal(err)
				}
				h, rs, err := instrument.ReadAll(&buf)
				if err != nil {
					t.Fatal(err)
				}
				trace = lessons.NewTrace(h, rs)
			}
			sol, err := c.Solve(trace)
			if err != nil {
				t.Fatal(err)
			}
			right := sol.Choice
			switch c.Format {
			case grading.FormatNumber:
				right = strings.TrimSuffix(sol.Display, " bytes")
				right = strings.TrimPrefix(right, "SM ")
			case grading.FormatTiles:
				right = strings.Join(sol.Tiles, ";")
				if right == "" {
					right = "none"
				}
			}
			u := ts.URL + "/api/checkpoints/" + l.Slug + "/" + c.ID
			for answer, status := range map[string]string{right: "correct", "": "invalid", "🙂": "invalid"} {
				body, _ := json.Marshal(checkpointRequest{Answer: answer})
				res, b := postJSON(t, u, string(body))
				var v lessons.Judged
				if res.StatusCode != 200 || json.Unmarshal(b, &v) != nil || v.Status != status {
					t.Errorf("%s/%s: %q: %d %s, want %s", l.Slug, c.ID, answer, res.StatusCode, b, status)
				}
				if status == "correct" && (v.Explanation == "" || v.Source == "") {
					t.Errorf("%s/%s: no explanation or source: %s", l.Slug, c.ID, b)
				}
			}
		}
	}
	l := course.Lessons[0]
	for path, want := range map[string]int{
		"/api/checkpoints/no-lesson/x":             404,
		"/api/checkpoints/" + l.Slug + "/no-check": 404,
	} {
		if res, _ := postJSON(t, ts.URL+path, `{"answer":"1"}`); res.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, res.StatusCode, want)
		}
	}
	u := ts.URL + "/api/checkpoints/" + l.Slug + "/" + l.Checkpoints[0].ID
	for body, want := range map[string]int{`not json`: 400, `{"answer": 1}`: 400, `{"answr":"1"}`: 400, `{"answer":"` + strings.Repeat("9", 5000) + `"}`: 413} {
		res, b := postJSON(t, u, body)
		if res.StatusCode != want || !strings.Contains(string(b), "error") {
			t.Errorf("body %.20q: %d %s, want %d", body, res.StatusCode, b, want)
		}
	}
}

// The loop API runs the debugging lesson's loop correctly and with the slips named:
// both runs' state after every kv-tile, −inf carried through JSON, and for
// each row where the two part; every bad field is a 400 naming the field.
func TestLoopAPI(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	seed := testrand.New(t).Uint64N(1 << 40)
	u := fmt.Sprintf("%s/api/loop?n=16&d=8&br=4&bc=4&pattern=normal&seed=%d&q=2&slip=stale-max", ts.URL, seed)
	res, body := get(t, u)
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	var ans struct {
		Q, Br, D, Rows int
		FirstRow       int `json:"first_row"`
		Correct        struct {
			Steps []struct {
				KV    int
				MPrev []any `json:"m_prev"`
				L     []float64
			}
			Out []float64
		}
		Slipped struct {
			Slips []string
			Steps []struct{ Alpha []float64 }
		}
		Parts []loop.Parting
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if ans.Q != 2 || ans.FirstRow != 8 || ans.Rows != 4 || len(ans.Correct.Steps) != 4 || len(ans.Slipped.Steps) != 4 ||
		len(ans.Correct.Out) != 4*8 || len(ans.Parts) != 4 || !slices.Equal(ans.Slipped.Slips, []string{"stale-max"}) {
		t.Fatalf("answer %s", body)
	}
	if ans.Correct.Steps[0].MPrev[0] != "-Infinity" {
		t.Errorf("m before the first kv-tile is %v, want \"-Infinity\"", ans.Correct.Steps[0].MPrev[0])
	}
	for r, p := range ans.Parts {
		if p.Row != r || p.KV != 1 || p.What != "l" || !p.Output {
			t.Errorf("row %d parts %+v, want after kv-tile 1 in l", r, p)
		}
		for k, st := range ans.Slipped.Steps {
			if st.Alpha[r] != 0 {
				t.Errorf("slip (b): α = %g at kv-tile %d", st.Alpha[r], k)
			}
		}
	}
	base := ts.URL + "/api/loop?d=8&br=4&bc=4"
	for query, field := range map[string]string{
		"&n=16&q=4":             "q",
		"&n=16&q=-1":            "q",
		"&n=16&q=two":           "q",
		"&n=16&bh=1":            "bh",
		"&n=16&slip=off-by-one": "slip",
		"&n=16&variant=naive":   "variant",
		"&n=abc":                "n",
		"&n=16&mode=timing":     "mode",
	} {
		res, body := get(t, base+query)
		var e apiErrorBody
		if res.StatusCode != 400 || json.Unmarshal(body, &e) != nil || e.Fields.ByField()[field] == "" {
			t.Errorf("%s: %d %s, want 400 naming %s", query, res.StatusCode, body, field)
		}
	}
}

// /playground opens on the row its URL names, and on a bad URL opens the
// default row and says which field was wrong.
func TestPlaygroundPage(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, runner.Mirror{})
	res, body := get(t, ts.URL+"/playground?logits=1.5,-2,30&tile=2&max=off&dtype=f16")
	if res.StatusCode != 200 {
		t.Fatalf("%d", res.StatusCode)
	}
	box := findNode(parse(t, body), "data-testid", "playground")
	var got struct {
		Logits []float64
		Tile   int
		Max    bool
		Dtype  string
	}
	if box == nil || json.Unmarshal([]byte(attr(box, "data-settings")), &got) != nil ||
		!slices.Equal(got.Logits, []float64{1.5, -2, 30}) || got.Tile != 2 || got.Max || got.Dtype != "f16" {
		t.Errorf("settings %+v", got)
	}
	res, body = get(t, ts.URL+"/playground?dtype=f64")
	doc := parse(t, body)
	if msg := findNode(doc, "data-testid", "playground-error"); res.StatusCode != 200 || msg == nil || !strings.Contains(string(body), "dtype: f32, f16 or bf16") {
		t.Errorf("a bad dtype: %d, error shown %v", res.StatusCode, msg != nil)
	}
}
