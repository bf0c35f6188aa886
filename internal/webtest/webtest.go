// Package webtest is for the tests of the server's HTTP packages (web,
// classroom): how long a client waits, waiting for what the server gives
// no signal of, and a GET read whole.
package webtest

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// AnswerWithin is how soon a request that computes no trace must be
// answered, however bad or heavy; ClientPatience how long a test's client
// waits for any answer before it gives up.
const (
	AnswerWithin   = 2 * time.Second * Slowdown
	ClientPatience = 5 * time.Second * Slowdown
)

// WaitUntil waits for cond, where the server gives no signal of the event
// (a connection's reader attached, a member gone), failing the test after
// 10 s. It only waits: what a test asserts is asserted after it, on what
// the event makes true.
func WaitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	const patience = 10 * time.Second * Slowdown
	deadline := time.After(patience)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		select {
		case <-time.After(pause):
		case <-deadline:
			t.Fatalf("waited %v for %s", patience, what)
		}
	}
}

// Get fetches u and reads its body whole.
func Get(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}
