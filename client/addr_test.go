package client

import (
	"net/http"
	"strings"
	"testing"
)

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
	for in, want := range map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[::ffff:192.0.2.7]:5555":    "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"pipe":                       "pipe",
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = in
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		if got := addrOf(r, nil); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
