package engine

import (
	"context"
	"sync"
	"time"
)

// freedUnits is what a release, a cancel, an expiry or a move gave back: the resources whose waiters
// may now be promoted, and the owners released as no-shows, whose freeze is decided again.
type freedUnits struct {
	resources []uint64
	noShows   []string
}

// freedBus tells the capabilities that react to freed units (they subscribe in assemble). The one
// that frees units does not know them: a release never walks through the hold path. What a reaction
// lost with its process is found again by a sweep of SQL: the waitlist loop promotes, the freezes
// loop (sweepFreezes) decides the freezes of recent no-shows.
type freedBus struct {
	reactions []func(context.Context, freedUnits)
}

// subscribe adds a reaction; call it before the engine serves.
func (b *freedBus) subscribe(react func(context.Context, freedUnits)) {
	b.reactions = append(b.reactions, react)
}

// announce runs every reaction to f, in this goroutine.
func (b *freedBus) announce(ctx context.Context, f freedUnits) {
	if len(f.resources) == 0 && len(f.noShows) == 0 {
		return
	}
	for _, react := range b.reactions {
		react(ctx, f)
	}
}

// reactToFreed offers the freed units to the resources' first waiters and refreshes the no-show
// owners' freezes. A failure is only logged: the sweeps retry.
func (hs *Holds) reactToFreed(ctx context.Context, f freedUnits) {
	for _, r := range f.resources {
		hs.promoteAfterFree(ctx, r)
	}
	if len(f.noShows) == 0 {
		return
	}
	if err := hs.refreshFreezes(ctx, f.noShows); err != nil {
		hs.log.Warn("refresh no-show freezes failed; the freezes loop retries", "err", err)
	}
}

// freezeSweep is how far the freezes loop has read the no-shows in SQL.
type freezeSweep struct {
	mu   sync.Mutex
	upTo time.Time // zero: not yet (the loop then reads the policy's whole window)
}

// sweepFreezes decides the freezes of the owners released as no-shows since its last look, so that
// a freeze whose release's process died before the announcement is set all the same. It reads
// nothing while the no-show rule is off.
func (hs *Holds) sweepFreezes(ctx context.Context) error {
	p, err := hs.cat.NoshowPolicy(ctx)
	if err != nil || p.MaxNoshows == 0 {
		return err
	}
	now := hs.clock.Now()
	hs.freezes.mu.Lock()
	// It reads again from a little before its last look: a release commits its released_at a little
	// after it stamps it (a run may take up to the release service's RunTimeout).
	since := hs.freezes.upTo.Add(-hs.releases.Config().RunTimeout)
	hs.freezes.mu.Unlock()
	if since.Before(now.Add(-p.Within)) {
		since = now.Add(-p.Within)
	}
	users, err := hs.ss.UsersWithNoshows(ctx, since)
	if err != nil {
		return err
	}
	if err := hs.refreshFreezes(ctx, users); err != nil {
		return err
	}
	hs.freezes.mu.Lock()
	hs.freezes.upTo = now
	hs.freezes.mu.Unlock()
	return nil
}
