package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"flashstep/classroom"
	"flashstep/rooms"
	"flashstep/runner"
)

// Behind a trusted proxy the per-address limits count the client its
// X-Forwarded-For names, so two students behind it are two addresses; a
// client cannot escape its count by writing the header itself, and from
// any other peer the header is ignored. (The limit probed: one open room
// per address.)
func TestTrustedProxyForwardsTheClientAddress(t *testing.T) {
	t.Parallel()
	_, ts := serveDeps(t, Deps{Engines: testEngines{Runner: runner.Mirror{}}, Classroom: classroom.Options{Limits: rooms.Limits{RoomsPerAddress: 1}},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.0.64/26")}})
	create := func(from, forwarded string) int {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: clientPatience}
		client := &http.Client{Timeout: clientPatience, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		body, _ := json.Marshal(classroom.Request{Page: "step", Query: "variant=flash2&n=12&d=4&br=4&bc=3&seed=3"})
		req, _ := http.NewRequest("POST", ts.URL+"/api/rooms", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if forwarded != "" {
			req.Header.Set("X-Forwarded-For", forwarded)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests && !strings.Contains(string(got), "per address") {
			t.Fatalf("429 without the limit: %s", got)
		}
		return res.StatusCode
	}
	for _, c := range []struct {
		from, forwarded string
		want            int
		why             string
	}{
		{"127.0.0.1", "192.0.2.1", 201, "a first student through the proxy"},
		{"127.0.0.1", "192.0.2.1", 429, "the same student again"},
		{"127.0.0.1", "192.0.2.2", 201, "a second student through the proxy"},
		{"127.0.0.1", "192.0.2.1, 127.0.0.70", 429, "the first, through two trusted proxies"},
		{"127.0.0.1", "198.51.100.9, 192.0.2.2", 429, "the second, who wrote an address of their own in front"},
		{"127.0.0.1", "", 201, "the proxy itself"},
		{"127.0.0.1", "no-address, 192.0.2.1", 429, "a malformed hop left of the client is never read"},
		{"127.0.0.1", "192.0.2.3, no-address", 429, "a malformed hop where the client should be: the peer counts (the proxy, holding a room)"},
		// A trusted range that holds students too (127.0.0.64/26 here, as
		// 10.0.0.0/8 on a school's LAN): a student who writes another
		// address of the range in front of theirs is still theirs.
		{"127.0.0.1", "127.0.0.80, 127.0.0.70", 201, "a student inside a trusted range, through the proxy"},
		{"127.0.0.1", "127.0.0.81, 127.0.0.70", 429, "the same student, writing another address of the range in front"},
		{"127.0.0.1", "127.0.0.82, 127.0.0.83, 127.0.0.70", 429, "the same student, writing two"},
		{"127.0.0.2", "192.0.2.10", 201, "an untrusted peer claiming to forward"},
		{"127.0.0.2", "192.0.2.11", 429, "the same untrusted peer claiming another client: ignored"},
	} {
		if got := create(c.from, c.forwarded); got != c.want {
			t.Errorf("%s (from %s, X-Forwarded-For %q): %d, want %d", c.why, c.from, c.forwarded, got, c.want)
		}
	}
}
