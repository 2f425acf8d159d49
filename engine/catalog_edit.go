package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
)

// Edits of what a venue sells, for its manager (or an admin): a field left nil keeps its value.
// A capacity change moves every booking onto the slots rebuilt with the new number, as a schedule
// change does; disabling stops new holds at once and keeps the bookings already made unless the
// edit cancels them.

// VenueChange renames a venue.
type VenueChange struct {
	Name *string
}

// ResourceChange edits a resource. CancelAffected has the venue cancel, refunded in full, the
// bookings a lower capacity cannot hold, and every future booking of a resource being disabled.
type ResourceChange struct {
	Name, Kind, Category *string
	Capacity             *int
	PriceCents           *int64
	Status               *string
	CancelAffected       bool
}

// ServiceChange edits a service; a disabled service is not sold, its bookings stay.
type ServiceChange struct {
	Name       *string
	PriceCents *int64
	Status     *string
}

// UpdateVenue edits a venue. Its manager or an admin.
func (cg *Catalog) UpdateVenue(ctx context.Context, a booking.Actor, id uint64, ch VenueChange) (Venue, error) {
	if err := a.RequireManager(id); err != nil {
		return Venue{}, err
	}
	v, err := cg.ss.Venue(ctx, id)
	if err != nil {
		return Venue{}, err
	}
	if ch.Name != nil {
		if err := booking.CheckName("name", *ch.Name, booking.MaxNameLen); err != nil {
			return Venue{}, err
		}
		v.Name = *ch.Name
		if err := cg.ss.UpdateVenue(ctx, &v, "name"); err != nil {
			return Venue{}, err
		}
		if err := cg.cat.ChangedVenue(ctx, id); err != nil {
			return Venue{}, err
		}
	}
	return cg.toVenue(v), nil
}

// UpdateResource edits resource id. The venue's manager or an admin. A capacity that bookings
// already exceed is ErrCapacityConflict naming them, unless CancelAffected.
func (cg *Catalog) UpdateResource(ctx context.Context, a booking.Actor, id uint64, ch ResourceChange) (Resource, error) {
	r, sched, err := cg.ss.Resource(ctx, id)
	if err != nil {
		return Resource{}, err
	}
	if err := a.RequireManager(r.VenueID); err != nil {
		return Resource{}, err
	}
	var cols []string
	if err := firstOf(
		ifSet(ch.Name, func(v string) error {
			r.Name, cols = v, append(cols, "name")
			return booking.CheckName("name", v, booking.MaxNameLen)
		}),
		ifSet(ch.Kind, func(v string) error {
			r.Kind, cols = v, append(cols, "kind")
			return booking.CheckName("kind", v, booking.MaxTagLen)
		}),
		ifSet(ch.Category, func(v string) error {
			r.Category, cols = v, append(cols, "category")
			return booking.CheckOptionalText("category", v, booking.MaxTagLen)
		}),
		ifSet(ch.PriceCents, func(v int64) error {
			r.PriceCents, cols = v, append(cols, "price_cents")
			return booking.CheckRange(booking.FieldPriceCents, v)
		}),
		ifSet(ch.Status, func(v string) error {
			r.Status, cols = v, append(cols, "status")
			return booking.CheckCatalogStatus(v)
		}),
		ifSet(ch.Capacity, func(v int) error { return booking.CheckRange(booking.FieldCapacity, int64(v)) }),
	); err != nil {
		return Resource{}, err
	}
	ri, err := cg.cat.Resource(ctx, id)
	if err != nil {
		return Resource{}, err
	}
	if ch.Capacity != nil && *ch.Capacity != r.Capacity {
		if sched == nil {
			// No inventory yet: the number is all there is to change.
			r.Capacity, cols = *ch.Capacity, append(cols, "capacity")
		} else {
			in, err := catalog.ScheduleInputOf(*sched)
			if err != nil {
				return Resource{}, fmt.Errorf("resource %d has a bad stored schedule: %w", id, err)
			}
			// The slots are rebuilt with the new number, in one transaction with the resource's.
			if _, err := cg.rebuild(ctx, a, ri, in, *ch.Capacity, ch.CancelAffected, booking.ErrCapacityConflict); err != nil {
				return Resource{}, err
			}
			r.Capacity = *ch.Capacity
		}
	}
	if len(cols) > 0 {
		r.UpdatedAt = cg.clock.Now()
		if err := cg.ss.UpdateResource(ctx, &r, append(cols, "updated_at")...); err != nil {
			return Resource{}, err
		}
		if err := cg.cat.ChangedResource(ctx, id, r.VenueID); err != nil {
			return Resource{}, err
		}
	}
	if ch.Status != nil && *ch.Status == booking.CatalogDisabled && ch.CancelAffected {
		// After the status is written, so that no new booking slips in behind the cancels.
		if err := cg.cancelFuture(ctx, a, ri, "the resource was taken out of service"); err != nil {
			return Resource{}, err
		}
	}
	slotMinutes := 0
	if sched != nil {
		slotMinutes = sched.SlotMinutes
	}
	out := toResource(r, slotMinutes)
	out.CreatedAt = out.CreatedAt.In(ri.Venue.Loc)
	return out, nil
}

// cancelFuture has the venue cancel every booking of ri that still holds its place from now on.
func (cg *Catalog) cancelFuture(ctx context.Context, a booking.Actor, ri *catalog.ResourceInfo, why string) error {
	now := cg.clock.Now()
	rows, err := cg.ss.OccupyingBetween(ctx, ri.Resource.ID, now, now.AddDate(2, 0, 0))
	if err != nil {
		return err
	}
	ids := make([]uint64, len(rows))
	for i, b := range rows {
		ids[i] = b.ID
	}
	return cg.cancelForVenue(ctx, a, ids, why)
}

// UpdateService edits service id. The venue's manager or an admin.
func (cg *Catalog) UpdateService(ctx context.Context, a booking.Actor, id uint64, ch ServiceChange) (Service, error) {
	s, links, err := cg.ss.Service(ctx, id)
	if err != nil {
		return Service{}, err
	}
	if err := a.RequireManager(s.VenueID); err != nil {
		return Service{}, err
	}
	var cols []string
	if err := firstOf(
		ifSet(ch.Name, func(v string) error {
			s.Name, cols = v, append(cols, "name")
			return booking.CheckName("name", v, booking.MaxNameLen)
		}),
		ifSet(ch.PriceCents, func(v int64) error {
			s.PriceCents, cols = v, append(cols, "price_cents")
			return booking.CheckRange(booking.FieldPriceCents, v)
		}),
		ifSet(ch.Status, func(v string) error {
			s.Status, cols = v, append(cols, "status")
			return booking.CheckCatalogStatus(v)
		}),
	); err != nil {
		return Service{}, err
	}
	if len(cols) > 0 {
		if err := cg.ss.UpdateService(ctx, &s, cols...); err != nil {
			return Service{}, err
		}
		if err := cg.cat.ChangedService(ctx, id, s.VenueID); err != nil {
			return Service{}, err
		}
	}
	out := toService(catalog.ServiceInfoOf(s, links))
	if vi, err := cg.cat.Venue(ctx, s.VenueID); err == nil {
		out.CreatedAt = out.CreatedAt.In(vi.Loc)
	}
	return out, nil
}

// ifSet runs fn on *v when v is set.
func ifSet[T any](v *T, fn func(T) error) error {
	if v == nil {
		return nil
	}
	return fn(*v)
}

// Schedule answers resource id's stored opening rules; a resource without any is ErrNotFound.
// The venue's staff, manager or an admin: the desk reads the hours it works with.
func (cg *Catalog) Schedule(ctx context.Context, a booking.Actor, id uint64) (Schedule, error) {
	r, sched, err := cg.ss.Resource(ctx, id)
	if err != nil {
		return Schedule{}, err
	}
	if !a.MayListVenue(r.VenueID) {
		return Schedule{}, booking.ErrForbidden
	}
	if sched == nil {
		return Schedule{}, booking.ErrNotFound // nothing to show until the first PUT
	}
	in, err := catalog.ScheduleInputOf(*sched)
	if err != nil {
		return Schedule{}, fmt.Errorf("resource %d has a bad stored schedule: %w", id, err)
	}
	return Schedule{ResourceID: id, SlotMinutes: in.SlotMinutes, Weekly: in.Weekly, Exceptions: in.Exceptions,
		HorizonDays: in.HorizonDays, GeneratedUntil: sched.GeneratedUntil}, nil
}

// ListGracePolicies answers the grace policies set so far, by category; a category without one
// uses the default grace (SLOTWHEEL_DEFAULT_GRACE). Admin only, as setting them is.
func (cg *Catalog) ListGracePolicies(ctx context.Context, a booking.Actor) ([]GracePolicy, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, err
	}
	rows, err := cg.ss.Graces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]GracePolicy, len(rows))
	for i, r := range rows {
		out[i] = GracePolicy{Category: r.Category, GraceSeconds: r.GraceSeconds, Peak: []booking.PeakRule{}}
		if err := json.Unmarshal([]byte(r.Peak), &out[i].Peak); err != nil {
			return nil, fmt.Errorf("grace policy %q: %w", r.Category, err)
		}
	}
	return out, nil
}
