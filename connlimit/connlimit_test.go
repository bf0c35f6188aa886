package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// patience bounds every wait of these tests on loopback.
const patience = 5 * time.Second

// serve runs an HTTP server that answers "ok" behind a Listener with o.
func serve(t *testing.T, o Options) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, o)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, ln.Addr().String()
}

// client is one raw connection from a loopback address of its own.
type client struct {
	net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: patience}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(patience))
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// get sends a GET on the connection and reads the answer whole.
func (c *client) get(t *testing.T) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: flashstep\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("the answer's body: %v", err)
	}
	return res, string(body)
}

// wantRefused checks the explicit refusal: a 503 that closes, asks the
// client to retry, and says why in one line; then the connection ends.
func (c *client) wantRefused(t *testing.T, why string) {
	t.Helper()
	res, body := c.get(t)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !res.Close || body != why+"\n" {
		t.Fatalf("refusal: %s, Retry-After %q, close %v, body %q; want 503 saying %q", res.Status, res.Header.Get("Retry-After"), res.Close, body, why)
	}
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal the connection stays open: %v", err)
	}
}

func (c *client) wantOK(t *testing.T) {
	t.Helper()
	if res, body := c.get(t); res.StatusCode != http.StatusOK || body != "ok\n" {
		t.Fatalf("%s %q, want 200", res.Status, body)
	}
}

// waitOpen waits until the connections open from an address (from "":
// in all) fall to want: the server closes its end a moment after the
// client has.
func waitOpen(t *testing.T, l *Listener, from string, want int) {
	t.Helper()
	a := &net.TCPAddr{IP: net.ParseIP(from)}
	open := func() int {
		total, n := l.Open(a)
		if from == "" {
			return total
		}
		return n
	}
	for deadline := time.Now().Add(patience); open() != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q holds %d connections, want %d", from, open(), want)
		}
	}
}

// One address holds at most PerAddress connections: the next is answered
// 503 saying so (not reset), another address is not affected, and a place
// freed is taken again.
func TestPerAddressCapRefusesExplicitly(t *testing.T) {
	t.Parallel()
	l, addr := serve(t, Options{PerAddress: 3})
	var held []*client
	for range 3 {
		c := dialFrom(t, "127.0.0.1", addr)
		c.wantOK(t) // served: counted, and kept open (keep-alive)
		held = append(held, c)
	}
	dialFrom(t, "127.0.0.1", addr).wantRefused(t, "too many connections from your address: at most 3")
	dialFrom(t, "127.0.0.2", addr).wantOK(t)
	held[0].Close()
	waitOpen(t, l, "127.0.0.1", 2)
	dialFrom(t, "127.0.0.1", addr).wantOK(t)
	if l.Refused() != 1 {
		t.Fatalf("%d refused, want 1", l.Refused())
	}
}

// A refusal reads the client's request, body and all, before it closes:
// closing over unread bytes would reset the connection, and the client
// might lose the answer.
func TestRefusalOfARequestWithABodyIsRead(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, Options{PerAddress: 1})
	dialFrom(t, "127.0.0.1", addr).wantOK(t)
	c := dialFrom(t, "127.0.0.1", addr)
	body := strings.Repeat("x", 32<<10)
	fmt.Fprintf(c, "POST /api/rooms HTTP/1.1\r\nHost: flashstep\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	got, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(got), "at most 1") {
		t.Fatalf("%s %q %v", res.Status, got, err)
	}
}

// A trusted proxy carries a whole class: it is not held to PerAddress,
// while other addresses are.
func TestExemptPeersAreNotCappedPerAddress(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, Options{PerAddress: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	for range 4 {
		dialFrom(t, "127.0.0.1", addr).wantOK(t)
	}
	dialFrom(t, "127.0.0.2", addr).wantOK(t)
	dialFrom(t, "127.0.0.2", addr).wantRefused(t, "too many connections from your address: at most 1")
}

// Past Total connections in all, from any addresses, exempt or not, the
// next is refused saying the server is full.
func TestTotalCapRefusesExplicitly(t *testing.T) {
	t.Parallel()
	l, addr := serve(t, Options{Total: 2, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	a := dialFrom(t, "127.0.0.1", addr)
	a.wantOK(t)
	dialFrom(t, "127.0.0.2", addr).wantOK(t)
	dialFrom(t, "127.0.0.3", addr).wantRefused(t, "the server has as many connections open as it takes (2); try again in a moment")
	a.Close()
	waitOpen(t, l, "", 1)
	dialFrom(t, "127.0.0.3", addr).wantOK(t)
}

func TestAddressOfCountsIPv6ByNetwork(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7:5555":                 "192.0.2.7/32",
		"[::ffff:192.0.2.7]:5555":        "192.0.2.7/32",
		"[2001:db8:1:2:aaaa::1]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb:cccc::9]:80": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":              "fe80::/64",
	} {
		ap := netip.MustParseAddrPort(in)
		got, ok := AddressOf(net.TCPAddrFromAddrPort(ap))
		if !ok || got.String() != want {
			t.Errorf("%s: %s %v, want %s", in, got, ok, want)
		}
	}
	if _, ok := AddressOf(&net.UnixAddr{Name: "/tmp/sock", Net: "unix"}); ok {
		t.Error("a Unix socket's address counted as an IP")
	}
}

func TestTotalForLeavesFilesInReserve(t *testing.T) {
	t.Parallel()
	for files, want := range map[uint64]int{1 << 20: 1<<20 - fileReserve, 1024: 1024 - fileReserve, 256: 128, 1: 1, 1 << 40: 0} {
		if got := totalFor(files); got != want {
			t.Errorf("%d files: %d, want %d", files, got, want)
		}
	}
}

// TestIPv6SiteCap: one household's /56 holds 256 /64s; each is an address
// of its own, but together they hold at most SiteFactor addresses' worth,
// and a place freed anywhere in the /56 is free again.
func TestIPv6SiteCap(t *testing.T) {
	l := New(nil, Options{PerAddress: 2})
	var held []netip.Prefix
	for k := range 256 {
		key := Network(netip.MustParseAddr(fmt.Sprintf("2001:db8:0:%x::1", k)))
		if why := l.admit(key, true); why != "" {
			if len(held) != SiteFactor*2 || !strings.Contains(why, "/56") {
				t.Fatalf("refused after %d connections from the /56 (%q), want %d and a reason naming the /56", len(held), why, SiteFactor*2)
			}
			break
		}
		held = append(held, key)
	}
	if len(held) != SiteFactor*2 {
		t.Fatalf("the /56 held %d connections, want %d", len(held), SiteFactor*2)
	}
	if why := l.admit(Network(netip.MustParseAddr("2001:db8:0:100::1")), true); why != "" {
		t.Errorf("the next /56 is refused: %s", why)
	}
	if why := l.admit(Network(netip.MustParseAddr("192.0.2.1")), true); why != "" {
		t.Errorf("an IPv4 address is refused: %s", why)
	}
	l.release(held[0], true)
	if why := l.admit(Network(netip.MustParseAddr("2001:db8:0:ff::1")), true); why != "" {
		t.Errorf("a place freed in the /56 is not free again: %s", why)
	}
}
