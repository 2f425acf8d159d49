package release

import (
	"context"
	"errors"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/loop"
)

// Task is a release task's work, the entry point of the release queue's handler: Release, at the
// booking's release_at and never before. A task is due at the whole second after release_at and
// should not start early; one that does (clock skew between instances, a task queued before a
// restore moved its release_at) waits for release_at before asking SQL, so that an early start
// costs the database nothing, and should Release still find it early (the clock of the instance
// that queued it ran ahead) it waits what Release says is left. It waits EarlyWait in all at most:
// anything earlier still (an operator pressing "run" in the dashboard) answers Release's
// *booking.NotDueError, so that the queue retries it close to release_at instead of holding a
// worker.
func (s *Service) Task(ctx context.Context, ref Ref) (Outcome, error) {
	return waitThenRelease(ctx, s.p.Clock, s.cfg.EarlyWait, ref, s)
}

// taskReleaser is what Task releases through: a *Service, or a test's stand-in.
type taskReleaser interface {
	Release(ctx context.Context, ref Ref) (Outcome, error)
}

// waitThenRelease is Task on clock c, waiting budget at most, with r's Release.
func waitThenRelease(ctx context.Context, c clock.Clock, budget time.Duration, ref Ref, r taskReleaser) (Outcome, error) {
	wait := ref.ReleaseAt.Sub(c.Now())
	for {
		if wait > budget {
			return "", &booking.NotDueError{Wait: wait}
		}
		if wait > 0 {
			budget -= wait
			if err := loop.Sleep(ctx, wait); err != nil {
				return "", err
			}
		}
		out, err := r.Release(ctx, ref)
		nd, ok := errors.AsType[*booking.NotDueError](err)
		if !ok {
			return out, err
		}
		wait = max(nd.Wait, time.Millisecond)
	}
}
