package engine

import (
	"sync"
	"time"
)

// Clock is the only source of "now" in engine/, so that tests can move time instead of sleeping.
type Clock interface {
	Now() time.Time
}

// RealClock reads the system clock.
type RealClock struct{}

// Now returns the current time in UTC.
func (RealClock) Now() time.Time { return time.Now().UTC() }

// SimulatedClock is a Clock that moves only when told to. It is safe for concurrent use.
type SimulatedClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewSimulatedClock starts a simulated clock at t.
func NewSimulatedClock(t time.Time) *SimulatedClock { return &SimulatedClock{now: t.UTC()} }

// Now returns the simulated time.
func (c *SimulatedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *SimulatedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *SimulatedClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}
