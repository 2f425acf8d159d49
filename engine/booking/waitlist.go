package booking

// WaitStatus is a waitlist entry's state.
type WaitStatus string

// The waitlist statuses. A waiter is promoted to a hold when units free up; a promoted waiter who
// does not pay before the hold's deadline has lapsed, and the units pass to the next waiter.
const (
	WaitWaiting   WaitStatus = "WAITING"
	WaitPromoted  WaitStatus = "PROMOTED"
	WaitLapsed    WaitStatus = "LAPSED"
	WaitCancelled WaitStatus = "CANCELLED"
	WaitExpired   WaitStatus = "EXPIRED" // the window ended, or closed, before units freed up
)
