package engine

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// GracePolicy is how long after start a no-show keeps its slot, for resources of one category.
type GracePolicy struct {
	Category     string
	GraceSeconds int
	Peak         []booking.PeakRule
}

// The booking rules of docs/API.md "Booking rules": a resource's policy (notice, days ahead, cancel
// cut-off and refund shares, no-show refund, reschedule cut-off and count) and the deployment's
// no-show freeze. The rules themselves are engine/booking's; this file stores and applies them.

// Policy is a resource's booking rules as the API shows them.
type Policy struct {
	ResourceID uint64
	booking.Policy
}

// ResourcePolicy reads a resource's booking rules (the defaults when it set none). Anyone.
func (cg *Catalog) ResourcePolicy(ctx context.Context, resourceID uint64) (Policy, error) {
	ri, err := cg.cat.Resource(ctx, resourceID)
	if err != nil {
		return Policy{}, err
	}
	return Policy{ResourceID: resourceID, Policy: ri.Policy}, nil
}

// SetResourcePolicy changes a resource's booking rules; fields left out keep their value. The
// venue's manager or an admin.
func (cg *Catalog) SetResourcePolicy(ctx context.Context, a booking.Actor, resourceID uint64, in booking.PolicyInput) (Policy, error) {
	// An unknown resource is answered before the rules are checked.
	res, _, err := cg.ss.Resource(ctx, resourceID)
	if err != nil {
		return Policy{}, err
	}
	if err := a.RequireManager(res.VenueID); err != nil {
		return Policy{}, err
	}
	p, err := cg.ss.UpdatePolicy(ctx, resourceID, cg.clock.Now(), func(p *booking.Policy) error {
		next, err := p.With(in)
		*p = next
		return err
	})
	if err != nil {
		return Policy{}, err
	}
	if err := cg.cat.ChangedResource(ctx, resourceID, res.VenueID); err != nil {
		return Policy{}, err
	}
	return Policy{ResourceID: resourceID, Policy: p}, nil
}

// NoshowPolicy is the no-show freeze rule as the API shows it; Enabled is false while it is off.
type NoshowPolicy struct {
	Enabled                            bool
	MaxNoshows, WithinDays, FreezeDays int
}

// SetNoshowPolicy sets the no-show freeze rule and applies it at once to every user's recent
// no-shows. Admin only.
func (cg *Catalog) SetNoshowPolicy(ctx context.Context, a booking.Actor, in booking.NoshowPolicyInput) (NoshowPolicy, error) {
	if err := a.RequireAdmin(); err != nil {
		return NoshowPolicy{}, err
	}
	p, err := booking.ParseNoshowPolicy(in)
	if err != nil {
		return NoshowPolicy{}, err
	}
	now := cg.clock.Now()
	if err := cg.ss.SetNoshowPolicy(ctx, in, now); err != nil {
		return NoshowPolicy{}, err
	}
	if err := cg.cat.ChangedNoshowPolicy(ctx); err != nil {
		return NoshowPolicy{}, err
	}
	users, err := cg.ss.UsersWithNoshows(ctx, now.Add(-p.Within))
	if err != nil {
		return NoshowPolicy{}, err
	}
	if err := cg.holds.refreshFreezes(ctx, users); err != nil {
		return NoshowPolicy{}, err
	}
	return NoshowPolicy{Enabled: in.MaxNoshows > 0, MaxNoshows: in.MaxNoshows, WithinDays: in.WithinDays, FreezeDays: in.FreezeDays}, nil
}

// NoshowPolicyView reads the no-show freeze rule. Admin only.
func (cg *Catalog) NoshowPolicyView(ctx context.Context, a booking.Actor) (NoshowPolicy, error) {
	if err := a.RequireAdmin(); err != nil {
		return NoshowPolicy{}, err
	}
	row, ok, err := cg.ss.NoshowPolicy(ctx)
	if err != nil || !ok {
		return NoshowPolicy{}, err
	}
	return NoshowPolicy{Enabled: row.MaxNoshows > 0, MaxNoshows: row.MaxNoshows, WithinDays: row.WithinDays, FreezeDays: row.FreezeDays}, nil
}

// refreshFreezes decides again whether users are frozen, after their no-shows changed (a release, a
// restore, a late check-in) or the rule did, and tells Redis, where every instance's holds read it.
func (hs *Holds) refreshFreezes(ctx context.Context, users []string) error {
	p, err := hs.cat.NoshowPolicy(ctx)
	if err != nil || p.MaxNoshows == 0 {
		return err
	}
	now := hs.clock.Now()
	times, err := hs.ss.NoshowTimes(ctx, users, now.Add(-p.Within))
	if err != nil {
		return err
	}
	pardons, err := hs.ss.Pardons(ctx, users)
	if err != nil {
		return err
	}
	until := make(map[string]time.Time, len(users))
	for _, u := range users {
		until[u] = p.FrozenUntil(times[u], pardons[u].PardonedAt, now)
	}
	return hs.rs.SetFrozen(ctx, until, now)
}

// checkFrozenIn refuses a new hold of a user frozen for no-shows (the end of the freeze in loc, the
// venue's zone), with the rule rule answers. It costs a Redis read only while the rule is on.
func (hs *Holds) checkFrozenIn(ctx context.Context, userID string, loc *time.Location, rule func(context.Context) (booking.NoshowPolicy, error)) error {
	p, err := rule(ctx)
	if err != nil || p.MaxNoshows == 0 {
		return err
	}
	until, err := hs.rs.FrozenUntil(ctx, userID)
	if err != nil {
		return err
	}
	if until.After(hs.clock.Now()) {
		return booking.DetailsIn(booking.ErrAccountFrozen.WithDetail("until", until), loc)
	}
	return nil
}

// AllowRequest counts one request of a client address against RateLimitPerIP. Over it, the answer
// is ErrRateLimited with the seconds to wait (retry_after). Without a limit, or when Redis cannot
// count, the request passes: a limit that fails open never turns a Redis hiccup into an outage.
func (hs *Holds) AllowRequest(ctx context.Context, addr string) error {
	if hs.rateLimitPerIP <= 0 {
		return nil
	}
	ok, err := hs.rs.Allow(ctx, addr, hs.clock.Now(), hs.rateLimitPerIP)
	if err != nil {
		hs.log.Warn("rate limit not counted", "err", err)
		return nil
	}
	if !ok {
		return booking.ErrRateLimited.WithDetail("retry_after", 1)
	}
	return nil
}
