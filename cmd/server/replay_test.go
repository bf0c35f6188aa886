package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flashstep/instrument"

	"github.com/chromedp/chromedp"
)

// TestBrowserReplayErrorStays replays two broken files over a finished run:
// one cut off in its records and one that holds only the header. Each
// one's error must stay on the page, and the finished run's "Trace
// complete" must not come back over it once the page checks its form
// (200 ms after any input, the file field's included).
func TestBrowserReplayErrorStays(t *testing.T) {
	longOnly(t) // make test keeps the replay (HTTPFallbackAndReplay) and the queue (the stream tests of web)
	t.Parallel()
	base, _ := startServer(t)
	ctx := browser(t)
	problems := watchConsole(ctx)

	const query = "variant=flash2&n=9&d=3&br=2&bc=4&causal=1&seed=3"
	res, err := http.Get(base + "/api/trace?" + query)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("download: %d %v", res.StatusCode, err)
	}
	dec, err := instrument.NewDecoder(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h := dec.Header()
	headerBytes := h.HeaderBytes()
	// Cut inside the records: every record of the first third, and part of
	// the next.
	cut := headerBytes + (len(data)-headerBytes)/3 + 4
	dir := t.TempDir()
	files := []struct{ name, says string }{
		{"cut.fstrace", fmt.Sprintf(" of %d records: it is cut short", h.Records)},
		{"header-only.fstrace", fmt.Sprintf("holds 0 of %d records", h.Records)},
	}
	os.WriteFile(filepath.Join(dir, files[0].name), data[:cut], 0o644)
	os.WriteFile(filepath.Join(dir, files[1].name), data[:headerBytes], 0o644)

	for _, f := range files {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/step?"+query)); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#run-status", "Trace complete")
		if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload"), []string{filepath.Join(dir, f.name)})); err != nil {
			t.Fatal(err)
		}
		waitText(ctx, t, "#run-status", "Could not read "+f.name)
		waitText(ctx, t, "#run-status", f.says)
		time.Sleep(time.Second)
		status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('run-status').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(status, "Could not read "+f.name) || strings.Contains(status, "Trace complete") {
			t.Errorf("%s: a second after its error the status says %q", f.name, status)
		}
		// Nothing of the finished run stays on screen as if it were the file's.
		empty, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('stepper').classList.contains('empty')`))
		if err != nil {
			t.Fatal(err)
		}
		if !empty {
			t.Errorf("%s: the stepper still shows a run after the file failed", f.name)
		}
	}

	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
