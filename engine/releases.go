package engine

import (
	"context"

	"github.com/slotwheel/slotwheel/engine/release"
)

// assembleReleases builds the release service (engine/release) on e's stores, with ports over the
// catalog's cache (its cached rules), the bookings (their timers) and the announcement of freed
// units. The release mode of venues that set none is
// Options.ReleaseMode; the tests' hooks are e's.
func (e *Engine) assembleReleases(freed *freedBus) *release.Service {
	return release.New(release.Config{DefaultMode: e.opts.ReleaseMode, Hooks: &e.hooks.release}, release.Ports{
		SQL:   e.ss,
		Redis: e.rs,
		Rules: e.cat,
		Announce: func(ctx context.Context, resources []uint64, noShows []string) {
			freed.announce(ctx, freedUnits{resources: resources, noShows: noShows})
		},
		SetTimers:       e.Bookings.setTimers,
		CountTransition: countTransition,
		Clock:           e.clock,
		Logger:          e.log,
	})
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
