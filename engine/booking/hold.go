package booking

import "time"

// Hold is a user's unpaid claim on units, until ExpiresAt. Times are instants (shown in the venue's
// zone by the engine).
type Hold struct {
	ID          string
	UserID      string
	VenueID     uint64
	ResourceID  uint64
	ServiceID   uint64
	Quantity    int
	Status      HoldStatus
	Start       time.Time
	End         time.Time
	OccupyStart time.Time
	OccupyEnd   time.Time
	ExpiresAt   time.Time
	CreatedAt   time.Time
	AmountCents int64
	BookingID   uint64 // once confirmed
	// Roles are the resources of a multi-resource service, one per role (ResourceID is the first).
	Roles []RoleResource
}

// RoleResource is the resource that fills one role of a multi-resource service.
type RoleResource struct {
	Role       string
	ResourceID uint64
}

// In returns h with its times in loc.
func (h Hold) In(loc *time.Location) Hold {
	h.Start, h.End = h.Start.In(loc), h.End.In(loc)
	h.OccupyStart, h.OccupyEnd = h.OccupyStart.In(loc), h.OccupyEnd.In(loc)
	h.ExpiresAt, h.CreatedAt = h.ExpiresAt.In(loc), h.CreatedAt.In(loc)
	return h
}

// In returns b with its times in loc.
func (b Booking) In(loc *time.Location) Booking {
	in := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		x := t.In(loc)
		return &x
	}
	b.Start, b.End = b.Start.In(loc), b.End.In(loc)
	b.OccupyStart, b.OccupyEnd = b.OccupyStart.In(loc), b.OccupyEnd.In(loc)
	b.ReleaseAt, b.ConfirmedAt = b.ReleaseAt.In(loc), b.ConfirmedAt.In(loc)
	b.CheckedInAt, b.ReleasedAt, b.CancelledAt = in(b.CheckedInAt), in(b.ReleasedAt), in(b.CancelledAt)
	return b
}

// WaitlistEntry is a user waiting for a window; once promoted, HoldID names the hold made for them.
type WaitlistEntry struct {
	ID         uint64
	UserID     string
	VenueID    uint64
	ResourceID uint64
	Status     WaitStatus
	Start      time.Time
	End        time.Time
	Quantity   int
	HoldID     string
	CreatedAt  time.Time
}
