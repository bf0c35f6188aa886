// Package connlimit owns the server's bound on open connections: at most
// PerAddress at once from one client address (an IPv4 address, or the /64
// network of an IPv6 one, which one home or host holds whole), at most
// SiteFactor times as many from one IPv6 /56 (a home is often given a
// whole /56: 256 /64s of its own), at most Total in all, and an explicit answer past either, a minimal HTTP 503
// that names the limit and says when to retry, then a graceful close,
// never a silent reset.
//
// It counts TCP connections at the listener, below HTTP, so it bounds what
// no request-level limit can see: connections held open without finishing
// a request, which once took every file descriptor the server had. A
// trusted reverse proxy carries a whole class on its connections: its
// address is exempt from PerAddress (Total still counts it), and the
// per-address limits of the requests it forwards are the web package's.
package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPerAddress is the connections one address may hold open when the
// server says nothing else. A browser holds up to 6 HTTP connections to a
// host and a websocket or an event stream beside them, about 8; 256 lets
// some 30 people share one address (a family, a small office or lab behind
// one NAT) while one address holds a sliver of the file descriptors. A
// class of 300 behind one school NAT, with no proxy in front of the
// server, needs about 2500.
const DefaultPerAddress = 256

// SiteFactor is how many addresses' worth of connections one IPv6 /56 may
// hold: without it one household, holding 256 /64s, could hold 256 times
// PerAddress, the whole of Total by default.
const SiteFactor = 4

// DefaultRetryAfter is what a refusal asks the client to wait: its own
// connections close within seconds once a page has loaded.
const DefaultRetryAfter = 5 * time.Second

// Options say what a Listener allows. A zero cap is no cap.
type Options struct {
	PerAddress int // connections open at once from one client address
	Total      int // connections open at once in all
	// Exempt are peers not held to PerAddress: trusted reverse proxies,
	// each carrying a whole class. They count toward Total.
	Exempt     []netip.Prefix
	RetryAfter time.Duration // Retry-After of a refusal; DefaultRetryAfter when zero
}

// Refusals cost a goroutine and a descriptor for at most refusalLinger
// each; past maxRefusing at once (a flood from many addresses) a
// connection is closed unanswered, the one silent refusal: answering it
// would spend the descriptors the caps protect.
const (
	refusalLinger   = 3 * time.Second
	maxRefusing     = 256
	maxRequestHead  = 16 << 10 // what a refusal reads of the request before it answers
	maxRefusalDrain = 64 << 10 // and of what follows, before it closes
)

// Listener is a net.Listener that holds connections to Options' caps. It
// answers every connection past them itself; Accept returns only those
// within them.
type Listener struct {
	net.Listener
	opts     Options
	refusing chan struct{}
	refused  atomic.Int64

	mu    sync.Mutex
	open  map[netip.Prefix]int // by client address
	total int
}

// New holds inner's connections to o's caps.
func New(inner net.Listener, o Options) *Listener {
	if o.RetryAfter <= 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	return &Listener{Listener: inner, opts: o, refusing: make(chan struct{}, maxRefusing), open: map[netip.Prefix]int{}}
}

// Accept returns the next connection within the caps, answering and
// closing any past them on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := AddressOf(c.RemoteAddr())
		if keyed && l.exempt(key.Addr()) {
			keyed = false
		}
		if why := l.admit(key, keyed); why != "" {
			l.refuse(c, why)
			continue
		}
		return &conn{Conn: c, release: func() { l.release(key, keyed) }}, nil
	}
}

// AddressOf is the client address a connection from a counts against: an
// IPv4 address (an IPv4-mapped IPv6 one is its IPv4 address), or the /64
// network of an IPv6 one. ok is false for an address that is no IP (a
// pipe's, a Unix socket's).
func AddressOf(a net.Addr) (key netip.Prefix, ok bool) {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if a == nil {
			return netip.Prefix{}, false
		}
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.Prefix{}, false
		}
		ip = ap.Addr()
	}
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	return Network(ip), true
}

// Network is the prefix that stands for ip in every per-address count: ip
// itself for IPv4, its /64 for IPv6.
func Network(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

func (l *Listener) exempt(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range l.opts.Exempt {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admit counts a new connection, or says why it is refused.
func (l *Listener) admit(key netip.Prefix, keyed bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opts.Total > 0 && l.total >= l.opts.Total {
		return fmt.Sprintf("the server has as many connections open as it takes (%d); try again in a moment", l.opts.Total)
	}
	if keyed && l.opts.PerAddress > 0 && l.open[key] >= l.opts.PerAddress {
		return fmt.Sprintf("too many connections from your address: at most %d", l.opts.PerAddress)
	}
	site, sited := siteOf(key)
	sited = sited && keyed && l.opts.PerAddress > 0
	if sited && l.open[site] >= SiteFactor*l.opts.PerAddress {
		return fmt.Sprintf("too many connections from your network: at most %d from one IPv6 /56", SiteFactor*l.opts.PerAddress)
	}
	l.total++
	if keyed {
		l.open[key]++
	}
	if sited {
		l.open[site]++
	}
	return ""
}

// siteOf is the IPv6 /56 an address's /64 lies in; ok is false for IPv4.
func siteOf(key netip.Prefix) (netip.Prefix, bool) {
	if !key.Addr().Is6() {
		return netip.Prefix{}, false
	}
	p, err := key.Addr().Prefix(56)
	return p, err == nil
}

func (l *Listener) release(key netip.Prefix, keyed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if keyed {
		if l.open[key]--; l.open[key] <= 0 {
			delete(l.open, key)
		}
		if site, ok := siteOf(key); ok && l.opts.PerAddress > 0 {
			if l.open[site]--; l.open[site] <= 0 {
				delete(l.open, site)
			}
		}
	}
}

// Open is the connections open now: in all, and from the address a
// counts against (exempt or not).
func (l *Listener) Open(a net.Addr) (total, fromAddr int) {
	key, _ := AddressOf(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.open[key]
}

// Refused is how many connections were refused so far.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// refuse answers c with a 503 that says why, in its own goroutine so that
// a slow client holds up no other connection. It reads the request's head
// first (an HTTP client takes an answer that comes before its request for
// a broken connection), answers, shuts its side for writing and reads on
// until the client closes, so that closing with the client's bytes unread
// does not reset the connection before the client has read the answer.
func (l *Listener) refuse(c net.Conn, why string) {
	l.refused.Add(1)
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(refusalLinger))
		br := bufio.NewReaderSize(io.LimitReader(c, maxRequestHead), 1024)
		for {
			line, err := br.ReadString('\n')
			if err != nil || strings.TrimRight(line, "\r\n") == "" {
				break
			}
		}
		body := why + "\n"
		secs := max(1, int(l.opts.RetryAfter.Round(time.Second)/time.Second))
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nRetry-After: %d\r\nConnection: close\r\n\r\n%s", len(body), secs, body)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, maxRefusalDrain))
	}()
}

// conn gives its place back once, however often it is closed (the HTTP
// server and a websocket's library may both close it).
type conn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets the HTTP server close gracefully through the wrapper
// (it shuts its side for writing first where the connection can, so that
// a client still sending reads the answer rather than a reset).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
