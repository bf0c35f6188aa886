package classroom_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"testing/fstest"

	"flashstep/api"
	"flashstep/instrument"
	"flashstep/internal/webtest"
	"flashstep/labrun/labruntest"
	"flashstep/rooms"
	"flashstep/runner"
	"flashstep/sweep"
	"flashstep/web"
)

// The classroom is tested as browsers meet it: through the whole server
// (package web), over real sockets.

func TestMain(m *testing.M) {
	if labruntest.IsFake() {
		os.Exit(labruntest.Fake())
	}
	os.Exit(m.Run())
}

// testApp is a server under test, and the rooms it keeps.
type testApp struct {
	*web.Server
	rooms rooms.Service
}

// serveDeps serves d over a real listener: runs from the CPU mirror
// unless d says otherwise, the CPU's sweeps, no browser files, a silent
// log; its rooms close when the test ends.
func serveDeps(t *testing.T, d web.Deps) (*testApp, *httptest.Server) {
	t.Helper()
	if d.Engines == nil {
		d.Engines = &runner.Router{}
	}
	if d.Classroom.Rooms == nil {
		d.Classroom.Rooms = rooms.NewMemory(d.Classroom.Limits)
	}
	sweeps := sweep.NewManager(map[instrument.Source]sweep.Executor{instrument.SourceCPUMirror: sweep.CPU{}})
	t.Cleanup(sweeps.Close)
	d.Sweeps, d.Static, d.Log = sweeps, fstest.MapFS{}, slog.New(slog.NewTextHandler(io.Discard, nil))
	app := web.NewServer(d)
	ts := httptest.NewServer(app)
	t.Cleanup(ts.Close)
	t.Cleanup(app.CloseRooms)
	return &testApp{Server: app, rooms: d.Classroom.Rooms}, ts
}

// canonical is a run's query as a room carries it.
func canonical(t *testing.T, query string) string {
	t.Helper()
	q, _ := url.ParseQuery(query)
	run, err := api.ParseRun(q)
	if err != nil {
		t.Fatal(err)
	}
	c := run.Config()
	return c.Values().Encode()
}

const (
	answerWithin   = webtest.AnswerWithin
	clientPatience = webtest.ClientPatience
)

var (
	waitUntil = webtest.WaitUntil
	get       = webtest.Get
)
