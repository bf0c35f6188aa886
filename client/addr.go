// Package client owns what the server knows of who sent a request: the
// address its per-address limits count (Addr: the peer's, or behind a
// trusted proxy the client that proxy names, an IPv6 client by its /64),
// worked out once per request by Resolve; and whether a request came from
// one of this site's own pages (FromThisSite, SameOrigin). Every
// per-address limit (joins, wrong codes, rooms created, runs, sweeps, lab
// kernels) counts Addr.
package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"flashstep/connlimit"
)

type addrKey struct{}

// Resolve is the middleware that stores in each request's context the
// address its limits count: the peer's, or, where the peer is one of the
// trusted proxies, the client its X-Forwarded-For names (forwardedClient).
func Resolve(proxies []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), addrKey{}, addrOf(r, proxies))))
		})
	}
}

// Addr is the address a limit counts: an IPv4 address, or the /64
// network of an IPv6 one (one home or host holds a whole /64, and would
// otherwise hold as many "addresses" as it likes). Behind a trusted proxy
// it is the client the proxy names; behind any other the proxy's own,
// which limits the whole class as one (the limits on joins with a good
// code are set for that). A request that did not come through Resolve (a
// test's) counts its peer.
func Addr(r *http.Request) string {
	if a, ok := r.Context().Value(addrKey{}).(string); ok {
		return a
	}
	return peerAddr(r.RemoteAddr)
}

// addrOf works out Addr for a request from the network.
func addrOf(r *http.Request, proxies []netip.Prefix) string {
	if len(proxies) == 0 {
		return peerAddr(r.RemoteAddr)
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !trusted(peer.Addr(), proxies) {
		return peerAddr(r.RemoteAddr)
	}
	if client, ok := forwardedClient(r.Header.Values("X-Forwarded-For"), proxies); ok {
		return key(client)
	}
	return peerAddr(r.RemoteAddr)
}

// peerAddr is Addr of a direct peer ("host:port"); an address that is no
// IP counts as itself.
func peerAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return key(ip)
}

// key is ip as the limits count it: the IPv4 address (an IPv4-mapped IPv6
// one is its IPv4 address), or "network/64" for IPv6, the network the
// connection limit counts too.
func key(ip netip.Addr) string {
	n := connlimit.Network(ip)
	if n.Addr().Is4() {
		return n.Addr().String()
	}
	return n.String()
}

// forwardedClient is the client a trusted proxy names in X-Forwarded-For
// (every line of it, in order, one list). Each proxy appends the address
// it heard from, so the list is read from the right: trusted proxies are
// skipped, and the first address that is not one is the client; what lies
// to its left the client wrote itself, and is not read. Where every
// address is in a trusted range, the nearest (the rightmost: the address
// the nearest trusted proxy heard from) is the client, never the leftmost,
// which whoever sent the request may have written: were a range to hold
// clients as well as proxies (10.0.0.0/8 on a school's LAN in 10/8), a
// student writing a random 10.x in front would otherwise be a new address
// on every request. ok is false where the header is absent, or malformed
// where it is read: then the peer counts.
func forwardedClient(lines []string, proxies []netip.Prefix) (client netip.Addr, ok bool) {
	var nearest netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for {
			hop := rest
			cut := strings.LastIndexByte(rest, ',')
			if cut >= 0 {
				hop, rest = rest[cut+1:], rest[:cut]
			}
			a, err := parseHop(strings.TrimSpace(hop))
			if err != nil {
				return netip.Addr{}, false
			}
			if !nearest.IsValid() {
				nearest = a
			}
			if !trusted(a, proxies) {
				return a, true
			}
			if cut < 0 {
				break
			}
		}
	}
	return nearest, nearest.IsValid()
}

// parseHop reads one address of X-Forwarded-For; some proxies write its
// port too ("192.0.2.7:5555", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}

func trusted(ip netip.Addr, proxies []netip.Prefix) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// ranges ("127.0.0.1,10.0.0.0/8,2001:db8::/32") into prefixes; an address
// is a range of one. Empty items are skipped.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR range (like 10.0.0.0/8): %w", item, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range (like 127.0.0.1 or 10.0.0.0/8)", item)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
