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
	_, ts := serveDeps(t, Deps{Engines: testEngines{Runner: runner.Mirror{}}, RoomLimits: rooms.Limits{RoomsPerAddress: 1},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.0.64/26")}})
	create := func(from, forwarded string) int {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: clientPatience}
		client := &http.Client{Timeout: clientPatience, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		body, _ := json.Marshal(roomRequest{Page: "step", Query: roomRun})
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

func TestForwardedClientReadsFromTheRight(t *testing.T) {
	t.Parallel()
	proxies, err := ParseTrustedProxies("10.0.0.0/8, 127.0.0.1,2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lines []string
		want  string // "": the peer counts
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"192.0.2.7"}, "192.0.2.7"},
		{[]string{"192.0.2.7, 10.1.2.3"}, "192.0.2.7"},
		{[]string{"198.51.100.1,192.0.2.7,10.1.2.3,127.0.0.1"}, "192.0.2.7"},
		{[]string{"198.51.100.1", "192.0.2.7, 10.1.2.3"}, "192.0.2.7"},
		{[]string{"192.0.2.7", "10.1.2.3"}, "192.0.2.7"},
		// Every hop in a trusted range: the nearest, the address the
		// nearest proxy heard from; never the leftmost, which the sender
		// may have written (a range holding students as well as proxies).
		{[]string{"10.9.9.9, 10.1.2.3"}, "10.1.2.3"},
		{[]string{"10.9.9.9", "10.1.2.3"}, "10.1.2.3"},
		{[]string{"10.9.9.9, 10.1.2.3, 127.0.0.1"}, "127.0.0.1"},
		{[]string{"10.1.2.3"}, "10.1.2.3"},
		{[]string{"2001:db8:1:2::7"}, "2001:db8:1:2::7"},
		{[]string{"[2001:db8:1:2::7]:443, 2001:db8:ffff:1::1"}, "2001:db8:1:2::7"},
		{[]string{"192.0.2.7:5555"}, "192.0.2.7"},
		{[]string{"::ffff:192.0.2.7"}, "192.0.2.7"},
		{[]string{"garbage, 192.0.2.7"}, "192.0.2.7"},
		{[]string{"192.0.2.7, garbage"}, ""},
		{[]string{"192.0.2.7,, 10.1.2.3"}, ""},
		{[]string{"unknown"}, ""},
	} {
		got, ok := forwardedClient(c.lines, proxies)
		if c.want == "" {
			if ok {
				t.Errorf("%q: %s, want the peer", c.lines, got)
			}
			continue
		}
		if !ok || got.String() != c.want {
			t.Errorf("%q: %s %v, want %s", c.lines, got, ok, c.want)
		}
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies(" 127.0.0.1 ,10.0.0.0/8,,::1, 2001:db8::1/32, ::ffff:10.1.1.1")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if strings.Join(s, " ") != "127.0.0.1/32 10.0.0.0/8 ::1/128 2001:db8::/32 10.1.1.1/32" {
		t.Fatalf("%v", s)
	}
	if got, err := ParseTrustedProxies(""); err != nil || len(got) != 0 {
		t.Fatalf("nothing: %v %v", got, err)
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "10.0.0.1-10.0.0.9", "127.0.0.1,proxy"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "CIDR") {
			t.Errorf("%q: %v, want an error saying what is wanted", bad, err)
		}
	}
}

// Without trusted proxies the header changes nothing, and every address
// counts as before: IPv4 itself, IPv6 by its /64.
func TestClientAddrWithoutProxiesIsThePeer(t *testing.T) {
	t.Parallel()
	s := &Server{}
	for in, want := range map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[::ffff:192.0.2.7]:5555":    "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"pipe":                       "pipe",
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = in
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		if got := s.clientAddrOf(r); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
