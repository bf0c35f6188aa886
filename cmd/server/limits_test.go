package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A bad value of a limit's flag stops the program with an error that
// names the flag, before anything starts.
func TestLimitFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, flag, says string }{
		{"-trusted-proxies proxy.example", "-trusted-proxies", "neither an address nor a CIDR range"},
		{"-trusted-proxies 10.0.0.0/40", "-trusted-proxies", "not a CIDR range"},
		{"-conns-per-addr -1", "-conns-per-addr", "must be 0 (no cap) or more"},
		{"-max-conns -5", "-max-conns", "must be 0"},
		{"-body-timeout 0s", "-body-timeout", "must be from"},
		{"-body-timeout 1h", "-body-timeout", "must be from"},
		{"-lab-loop-time 100ms", "-lab-loop-time", "must be from 500ms to 1m"},
		{"-lab-loop-time 2m", "-lab-loop-time", "must be from 500ms to 1m"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0", "-worker", "none"}, strings.Fields(c.args)...), io.Discard, nil)
		cancel()
		if err == nil || !strings.HasPrefix(err.Error(), c.flag) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error naming %s that says %q", c.args, err, c.flag, c.says)
		}
	}
}

// rawHTTP is one connection to the program from a loopback address.
type rawHTTP struct {
	net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, from, base string) *rawHTTP {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawHTTP{c, bufio.NewReader(c)}
}

// do sends a request (a body promised by its headers, none sent) and
// reads the answer whole.
func (c *rawHTTP) do(t *testing.T, request string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", strings.SplitN(request, "\r", 2)[0], err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

const healthz = "GET /healthz HTTP/1.1\r\nHost: flashstep\r\n\r\n"

// The program holds an address to -conns-per-addr open connections, and
// says so past it; a body promised and not sent is answered 408 at
// -body-timeout; an address of -trusted-proxies is not held to the cap.
func TestServerBoundsWhatOneClientHolds(t *testing.T) {
	t.Parallel()
	base, _ := startServer(t, "-worker", "none", "-conns-per-addr", "2", "-body-timeout", "300ms", "-trusted-proxies", "127.0.0.9")
	for range 2 {
		if res, _ := dialFrom(t, "127.0.0.1", base).do(t, healthz); res.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %s", res.Status)
		}
	}
	res, body := dialFrom(t, "127.0.0.1", base).do(t, healthz)
	if res.StatusCode != http.StatusServiceUnavailable || body != "too many connections from your address: at most 2\n" || res.Header.Get("Retry-After") == "" || !res.Close {
		t.Fatalf("a third connection from one address: %s %q", res.Status, body)
	}

	late := dialFrom(t, "127.0.0.2", base)
	start := time.Now()
	res, body = late.do(t, "POST /api/rooms HTTP/1.1\r\nHost: flashstep\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	if took := time.Since(start); res.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "within 0.3 s") || took > 5*time.Second {
		t.Fatalf("a body that never comes: %s %q after %v", res.Status, body, took)
	}

	for i := range 4 {
		if res, _ := dialFrom(t, "127.0.0.9", base).do(t, healthz); res.StatusCode != http.StatusOK {
			t.Fatalf("the trusted proxy's connection %d: %s", i+1, res.Status)
		}
	}
}
