package releasebench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/loop"
)

// sqlWatcher reads a measurement's progress from its own database, the way a reader of the
// bookings table sees it: committed rows only.
type sqlWatcher struct {
	db           *sql.DB
	pendingQuery string // a row while any measured booking is still CONFIRMED
	countQuery   string // how many are RELEASED
	args         []any
}

func (w *sqlWatcher) pending(ctx context.Context) (bool, error) {
	var one int
	err := w.db.QueryRowContext(ctx, w.pendingQuery, w.args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (w *sqlWatcher) released(ctx context.Context) (int, error) {
	var n int
	err := w.db.QueryRowContext(ctx, w.countQuery, w.args...).Scan(&n)
	return n, err
}

// Polling cadence of waitReleased. The tail is polled often, with a query that reads one index
// entry; the count for the progress bar reads them all, so it runs seldom, not to load the
// database whose speed is measured.
const (
	tailPoll  = 10 * time.Millisecond
	countPoll = time.Second
)

// waitReleased waits until no booking of s (due from first to last) is CONFIRMED any more, or
// until timeout past last, and answers when that was seen (zero when it was not), and what the
// process waited for from first until then (see Contention), pool being the design's own MySQL
// pool.
func waitReleased(ctx context.Context, w *sqlWatcher, pool *sql.DB, s spec, first, last time.Time, timeout time.Duration, p *Progress) (time.Time, *Contention, error) {
	var watch *contentionWatch
	end := func() {}
	seen, err := waitReleasedFrom(ctx, w, first, last, s.n, timeout, p, func() {
		if s.window != nil {
			end = s.window()
		}
		watch = watchContention(pool)
	})
	var c *Contention
	if watch != nil {
		c = watch.end()
	}
	end()
	return seen, c, err
}

// waitReleasedFrom is waitReleased's wait; at is called at the first release_at.
func waitReleasedFrom(ctx context.Context, w *sqlWatcher, first, last time.Time, n int, timeout time.Duration, p *Progress, at func()) (time.Time, error) {
	for {
		until := time.Until(first)
		if until <= 0 {
			break
		}
		p.Stage(fmt.Sprintf("%s until the first release_at", until.Round(time.Second)), 0)
		if err := loop.Sleep(ctx, min(until, time.Second)); err != nil {
			return time.Time{}, err
		}
	}
	at()
	p.Stage("releasing", n)
	deadline := last.Add(timeout)
	var nextCount time.Time
	for {
		now := time.Now()
		if now.After(deadline) {
			return time.Time{}, nil
		}
		if !now.Before(nextCount) {
			done, err := w.released(ctx)
			if err != nil {
				return time.Time{}, err
			}
			p.Set(done)
			nextCount = now.Add(countPoll)
		}
		if !now.Before(last) {
			left, err := w.pending(ctx)
			if err != nil {
				return time.Time{}, err
			}
			if !left {
				seen := time.Now()
				p.Set(n)
				return seen, nil
			}
		}
		wait := tailPoll
		if until := time.Until(last); until > wait {
			wait = min(until, time.Until(nextCount))
		}
		if err := loop.Sleep(ctx, wait); err != nil {
			return time.Time{}, err
		}
	}
}

// checkOnTime fails a measurement whose bookings were not all made before the first was due: the
// measurement would overlap its own setup.
func checkOnTime(first time.Time) error {
	if late := time.Since(first); late > -100*time.Millisecond {
		return fmt.Errorf("making the bookings took longer than estimated: done %s after the first release_at; "+
			"run again (the machine may be busy) or with fewer bookings", late.Round(time.Millisecond))
	}
	return nil
}

// parallel runs fn(w, i) for every i in [0, n) on workers goroutines (worker w takes w,
// w+workers, …, so a worker may keep state of its own) and reports progress; the first error
// stops it.
func parallel(ctx context.Context, n, workers int, p *Progress, fn func(ctx context.Context, w, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := range min(workers, n) {
		wg.Go(func() {
			for i := w; i < n && ctx.Err() == nil; i += workers {
				if err := fn(ctx, w, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				p.Set(int(done.Add(1)))
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
