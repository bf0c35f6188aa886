package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flashstep/instrument"
	"flashstep/lessons"
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
	recs, err := runner.LoadRecordings(recordings.Files)
	if err != nil {
		t.Fatal(err)
	}
	router := &runner.Router{Recordings: recs, Mirror: runner.Mirror{}}
	_, ts := newTestServer(t, router)
	course, _ := lessons.Default()
	for _, l := range course.Lessons {
		for _, c := range l.Checkpoints {
			var buf bytes.Buffer
			if err := router.Run(context.Background(), c.Run, func(b []byte) error { buf.Write(b); return nil }); err != nil {
				t.Fatal(err)
			}
			h, rs, err := instrument.ReadAll(&buf)
			if err != nil {
				t.Fatal(err)
			}
			sol, err := c.Solve(lessons.NewTrace(h, rs))
			if err != nil {
				t.Fatal(err)
			}
			right := sol.Choice
			switch c.Format {
			case lessons.FormatNumber:
				right = strings.TrimSuffix(sol.Display, " bytes")
				right = strings.TrimPrefix(right, "SM ")
			case lessons.FormatTiles:
				right = strings.Join(sol.Tiles, ";")
				if right == "" {
					right = "none"
				}
			}
			u := ts.URL + "/api/checkpoints/" + l.Slug + "/" + c.ID
			for answer, status := range map[string]string{right: "correct", "": "invalid", "🙂": "invalid"} {
				body, _ := json.Marshal(checkpointRequest{Answer: answer})
				res, b := postJSON(t, u, string(body))
				var v checkpointAnswer
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
