// Package roomstest holds what the rooms' tests share: a clock moved by
// hand, for the lifetimes and per-address limits that run on time.
package roomstest

import (
	"sync"
	"time"
)

// Clock is a test's time, moved by hand; safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed moment.
func NewClock() *Clock { return &Clock{t: time.Date(2030, 9, 2, 9, 0, 0, 0, time.UTC)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}
