package engine

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/models"
)

// A guest's standing in the back office: their recent no-shows, the freeze they make, and staff
// lifting it (docs/API.md "Users").

// noshowLookback is how far back a standing counts no-shows while the freeze rule is off.
const noshowLookback = 30 * 24 * time.Hour

// UserStanding is a user's no-show record as the back office shows it.
type UserStanding struct {
	UserID string
	// Noshows are the user's no-shows within the freeze rule's window (30 days while it is off);
	// Counted are those after the last pardon, which count toward a freeze.
	Noshows, Counted int
	FrozenUntil      time.Time // zero: free to book
	Pardon           *models.UserPardon
}

// UserStanding answers user id's standing. Admin only: a freeze spans every venue.
func (hs *Holds) UserStanding(ctx context.Context, a booking.Actor, id string) (UserStanding, error) {
	if err := a.RequireAdmin(); err != nil {
		return UserStanding{}, err
	}
	return hs.standing(ctx, id)
}

// Unfreeze lifts user id's no-show freeze at once, with staff's reason: the no-shows so far no
// longer count, and only new ones can freeze the user again. Lifting a freeze that is not there
// records the pardon all the same. Admin only.
func (hs *Holds) Unfreeze(ctx context.Context, a booking.Actor, id, reason string) (UserStanding, error) {
	if err := a.RequireAdmin(); err != nil {
		return UserStanding{}, err
	}
	reason, err := booking.Reason(reason, true)
	if err != nil {
		return UserStanding{}, err
	}
	if err := hs.ss.Pardon(ctx, models.UserPardon{UserID: id, PardonedAt: hs.clock.Now(), Actor: a.Name(), Reason: reason}); err != nil {
		return UserStanding{}, err
	}
	if err := hs.refreshFreezes(ctx, []string{id}); err != nil {
		return UserStanding{}, err
	}
	return hs.standing(ctx, id)
}

func (hs *Holds) standing(ctx context.Context, id string) (UserStanding, error) {
	p, err := hs.cat.NoshowPolicy(ctx)
	if err != nil {
		return UserStanding{}, err
	}
	now := hs.clock.Now()
	window := noshowLookback
	if p.MaxNoshows > 0 {
		window = p.Within
	}
	times, err := hs.ss.NoshowTimes(ctx, []string{id}, now.Add(-window))
	if err != nil {
		return UserStanding{}, err
	}
	pardons, err := hs.ss.Pardons(ctx, []string{id})
	if err != nil {
		return UserStanding{}, err
	}
	out := UserStanding{UserID: id, Noshows: len(times[id])}
	if pd, ok := pardons[id]; ok {
		out.Pardon = &pd
	}
	out.Counted, _ = booking.Counted(times[id], now.Add(-window), pardons[id].PardonedAt, now)
	if p.MaxNoshows > 0 {
		until, err := hs.rs.FrozenUntil(ctx, id)
		if err != nil {
			return UserStanding{}, err
		}
		if until.After(now) {
			out.FrozenUntil = until
		}
	}
	return out, nil
}
