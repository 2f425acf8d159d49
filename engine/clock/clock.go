// Package clock is the only source of "now" in engine/ and the packages it drives: a Clock is
// injected, so that tests move time instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real reads the system clock.
type Real struct{}

// Now returns the current time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// Simulated is a Clock that moves only when told to. It is safe for concurrent use.
type Simulated struct {
	mu  sync.Mutex
	now time.Time
}

// NewSimulated starts a simulated clock at t.
func NewSimulated(t time.Time) *Simulated { return &Simulated{now: t.UTC()} }

// Now returns the simulated time.
func (c *Simulated) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Simulated) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Simulated) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}
