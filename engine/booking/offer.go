package booking

import (
	"time"
)

// Offer is a resource as it is sold: on its grid, optionally through a service whose duration and
// buffers decide the window. It is what hold placement and availability are judged on.
type Offer struct {
	ResourceID uint64
	Capacity   int
	PriceCents int64 // per slot, for a resource hold
	Active     bool
	Plan       *Plan // nil: no schedule yet, nothing is open
	Loc        *time.Location
	Service    *ServiceTerms // nil for a resource hold
	Policy     Policy        // the resource's sale rules (notice, days ahead)
}

// ServiceTerms are what a service adds to a resource: its own duration, buffers that take units but
// are not shown to the customer, and its price.
type ServiceTerms struct {
	ID         uint64
	Duration   time.Duration
	Prep       time.Duration
	Cleanup    time.Duration
	PriceCents int64
}

// Placement is a hold request resolved against the grid: the customer's window, the physical window
// and the slots whose units it takes.
type Placement struct {
	Start, End             time.Time
	OccupyStart, OccupyEnd time.Time
	Slots                  []Slot // the physical window's slots, in order
	AmountCents            int64
}

// CheckServiceDuration checks that a service of durationMinutes fits the grid of a resource whose
// slots are slotMinutes long (0: the resource has no schedule yet). A service hold starts on the
// grid and ends duration later, so its end is on the grid only when the duration is a whole number
// of slots; anything else would sell a window that ends inside a slot (docs/API.md refuses "times off
// the slot grid"). Buffers are not the customer's window: they take every slot they touch.
func CheckServiceDuration(durationMinutes, slotMinutes int) error {
	if slotMinutes <= 0 || durationMinutes%slotMinutes == 0 {
		return nil
	}
	return Invalid("invalid_duration", "duration_minutes %d is not a whole number of the resource's %d-minute slots",
		durationMinutes, slotMinutes).WithField(string(FieldDurationMinutes)).WithDetail("slot_minutes", slotMinutes)
}

// MaxHoldLength bounds a customer window.
const MaxHoldLength = 7 * 24 * time.Hour

// Place resolves a hold of quantity units starting at start (and, for a resource hold, ending at
// end; a service hold's end is start + the service's duration, and end may be zero) at now.
// A slot in progress can still be held (a released no-show's court can be used for the rest of its
// slot); one that has ended cannot.
func (o Offer) Place(start, end time.Time, quantity int, now time.Time) (Placement, error) {
	if !o.Active {
		return Placement{}, ErrResourceInactive
	}
	if o.Plan == nil {
		return Placement{}, ErrSlotClosed
	}
	if quantity > o.Capacity {
		return Placement{}, Invalid("invalid_quantity", "quantity %d is more than the resource's capacity %d", quantity, o.Capacity).
			WithField(string(FieldQuantity))
	}
	p := Placement{Start: start.UTC()}
	if s := o.Service; s != nil {
		p.End = p.Start.Add(s.Duration)
		if !end.IsZero() && !end.Equal(p.End) {
			return Placement{}, Invalid("invalid_end", "end must be start + the service's %s, or omitted", s.Duration).WithField("end")
		}
		p.OccupyStart, p.OccupyEnd = PhysicalWindow(p.Start, p.End, s.Prep, s.Cleanup)
		p.AmountCents = s.PriceCents * int64(quantity)
	} else {
		if end.IsZero() {
			return Placement{}, Invalid("missing_end", "end is required for a resource hold").WithField("end")
		}
		p.End = end.UTC()
		if !p.End.After(p.Start) {
			return Placement{}, Invalid("invalid_window", "end must be after start").WithField("end")
		}
		p.OccupyStart, p.OccupyEnd = p.Start, p.End
	}
	if p.End.Sub(p.Start) > MaxHoldLength {
		return Placement{}, Invalid("invalid_window", "a hold may not be longer than seven days").WithField("end")
	}
	if !p.End.After(now) {
		return Placement{}, ErrSlotPast
	}
	// The customer's own window must start (and, for resource holds, end) on the grid.
	own, ok := o.Plan.Window(p.Start, p.End, o.Loc)
	switch {
	case len(own) == 0:
		return Placement{}, o.closedOrFar(p.Start, now)
	case !own[0].Start.Equal(p.Start), o.Service == nil && !own[len(own)-1].End.Equal(p.End):
		return Placement{}, ErrOffGrid
	case !ok:
		return Placement{}, o.closedOrFar(p.Start, now)
	case !own[0].End.After(now):
		return Placement{}, ErrSlotPast
	}
	slots, ok := o.Plan.Window(p.OccupyStart, p.OccupyEnd, o.Loc)
	if !ok {
		return Placement{}, ErrSlotClosed
	}
	if last := LocalDay(own[len(own)-1].Start, o.Loc); !o.Plan.WithinHorizon(last, now, o.Loc) || o.Policy.TooFar(last, now, o.Loc) {
		return Placement{}, ErrTooFar
	}
	if o.Policy.TooSoon(p.Start, now) {
		return Placement{}, ErrTooSoon.WithDetail("min_notice_minutes", int(o.Policy.MinNotice/time.Minute))
	}
	if o.Service == nil {
		p.AmountCents = o.PriceCents * int64(len(own)) * int64(quantity)
	}
	p.Slots = slots
	return p, nil
}

func (o Offer) closedOrFar(t, now time.Time) error {
	if day := LocalDay(t, o.Loc); t.After(now) && (!o.Plan.WithinHorizon(day, now, o.Loc) || o.Policy.TooFar(day, now, o.Loc)) {
		return ErrTooFar
	}
	return ErrSlotClosed
}

// HoldDeadline is when a hold made at now with lifetime ttl ends. The API shows expires_at in whole
// seconds; the deadline is that second, rounded up, so a hold never ends before the time its owner
// was told.
func HoldDeadline(now time.Time, ttl time.Duration) time.Time {
	d := now.Add(ttl)
	if t := d.Truncate(time.Second); !t.Equal(d) {
		return t.Add(time.Second)
	}
	return d
}

// EffectiveHoldStatus is a hold's status at now: a HELD hold stops occupying at its deadline, even if
// the wheel has not popped it yet.
func EffectiveHoldStatus(s HoldStatus, deadline, now time.Time) HoldStatus {
	if s == HoldHeld && !deadline.After(now) {
		return HoldExpired
	}
	return s
}
