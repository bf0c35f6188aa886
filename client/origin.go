package client

import (
	"net/http"
	"net/url"
	"strings"
)

// FromThisSite says whether a request that changes something comes from
// one of this site's pages, or from a program (no browser headers). A
// browser says so in Sec-Fetch-Site; under Referrer-Policy: no-referrer its
// form posts carry "Origin: null", so Origin alone cannot tell.
func FromThisSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	return SameOrigin(r)
}

// SameOrigin accepts a browser only from a page of this same host; a client
// that sends no Origin (not a browser) is accepted. The websockets' upgraders
// check it.
func SameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
