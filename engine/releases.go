package engine

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/release"
)

// assembleReleases builds the release service (engine/release) on the stores of e's core, with
// ports over the catalog (its cached rules), the bookings (their timers) and the announcement of
// freed units, and hands it to the services that use it. The release mode of venues that set none
// is Options.ReleaseMode; the tests' hooks are core's.
func (e *Engine) assembleReleases() {
	c := e.core
	s := release.New(release.Config{DefaultMode: c.opts.ReleaseMode, Hooks: &c.hooks.release}, release.Ports{
		SQL:   c.ss,
		Redis: c.rs,
		Rules: releaseRules{c.cat},
		Announce: func(ctx context.Context, resources []uint64, noShows []string) {
			c.announceFreed(ctx, freedUnits{resources: resources, noShows: noShows})
		},
		SetTimers:       e.Bookings.setTimers,
		CountTransition: countTransition,
		Clock:           c.clock,
		Logger:          c.log,
	})
	e.releases, e.Holds.releases, e.Upkeep.releases = s, s, s
}

// releaseRules is the catalog's cache as the release service reads it (release.Rules).
type releaseRules struct{ c *catalog.Cache }

func (r releaseRules) CachedReleaseRules(now time.Time, v uint64) (map[uint64]booking.Policy, bool) {
	return r.c.CachedReleaseRules(now, v)
}

func (r releaseRules) LoadReleaseRules(ctx context.Context, v uint64) error {
	return r.c.LoadReleaseRules(ctx, v)
}

// ReleaseTask is the release queue's handler's work, waiting for release_at included: see
// release.Service.Task.
func (e *Engine) ReleaseTask(ctx context.Context, ref release.Ref) (release.Outcome, error) {
	return e.releases.Task(ctx, ref)
}

// Release is a release task's work once release_at has come: see release.Service.Release.
func (e *Engine) Release(ctx context.Context, ref release.Ref) (release.Outcome, error) {
	return e.releases.Release(ctx, ref)
}

// ReleaseDue releases the due bookings of venueID (0: of every venue) and answers how many it
// decided: see release.Service.ReleaseDue.
func (e *Engine) ReleaseDue(ctx context.Context, venueID uint64) (int, error) {
	return e.releases.ReleaseDue(ctx, venueID)
}

// NeedsRelease reports whether ref's booking still waits for that release: see
// release.Service.NeedsRelease.
func (e *Engine) NeedsRelease(ctx context.Context, ref release.Ref) (bool, error) {
	return e.releases.NeedsRelease(ctx, ref)
}
