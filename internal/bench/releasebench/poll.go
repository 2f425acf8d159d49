package releasebench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/engine/loop"
)

// tick is one run of the poll's UPDATE.
type tick struct {
	at   time.Time
	took time.Duration
	rows int
}

// measurePoll measures the second anchor, the seeds' polling design: every PollPeriod, one
// UPDATE releases every CONFIRMED booking whose release_at has come. It returns that row and a
// computed one for ComputedPeriod, derived from the same release_at values and the UPDATE
// durations measured here (see computePoll).
func measurePoll(ctx context.Context, env *Env, cfg Config, s spec, p *Progress) (ms []*measurement, err error) {
	m := &measurement{design: DesignPoll, label: cfg.label(DesignPoll, s.c), c: s.c, n: s.n,
		observed: -1, unitsBack: -1, redisBytes: -1}
	cleanup := context.WithoutCancel(ctx)
	rig, err := newAnchorRig(ctx, env, cfg, s, p)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rig.close(cleanup)) }()
	db, t, load := rig.db, rig.t, rig.load

	scratch := min(max(s.n/50, 20), 1000)
	p.Stage("estimating the setup rate", 0)
	t0 := time.Now()
	if err := t.insert(ctx, int64(s.n)+1, scratchTimes(scratch), anchorScratch); err != nil {
		return nil, err
	}
	first := s.plan(time.Now(), float64(scratch)/time.Since(t0).Seconds(), 0)
	ats := s.releaseAts(first)
	last := ats[len(ats)-1]
	p.Stage("making bookings", 0)
	t1 := time.Now()
	if err := t.insert(ctx, 1, ats, anchorConfirmed); err != nil {
		return nil, err
	}
	m.setupPerSecond = float64(s.n) / time.Since(t1).Seconds()
	if err := checkOnTime(first); err != nil {
		return nil, err
	}

	obs, err := db.observer()
	if err != nil {
		return nil, err
	}
	// The poller runs as a service would, from before the first release_at, at a phase that has
	// nothing to do with the bookings'.
	pollCtx, stopPoll := context.WithCancel(ctx)
	var ticks []tick
	var pollErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := loop.Sleep(pollCtx, rand.N(cfg.PollPeriod)); err != nil {
			return
		}
		tk := time.NewTicker(cfg.PollPeriod)
		defer tk.Stop()
		for {
			start := time.Now()
			res, err := db.sql.ExecContext(pollCtx, t.releaseDue)
			if pollCtx.Err() != nil {
				return
			}
			var n int64
			if err == nil {
				n, err = res.RowsAffected()
			}
			if err != nil {
				pollErr = err
				return
			}
			ticks = append(ticks, tick{at: start, took: time.Since(start), rows: int(n)})
			select {
			case <-pollCtx.Done():
				return
			case <-tk.C:
			}
		}
	})
	stopLoad := load.start(ctx, first, last)
	seen, contention, err := waitReleased(ctx, t.watcher(obs), db.sql, s, first, last, cfg.Timeout, p)
	m.load, m.contention = stopLoad(), contention
	stopPoll()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if pollErr != nil {
		return nil, fmt.Errorf("poll: %w", pollErr)
	}
	if !seen.IsZero() {
		m.observed = seen.Sub(last)
		m.perSecond = float64(s.n) / seen.Sub(first).Seconds()
	}
	if err := t.lags(ctx, m, last); err != nil {
		return nil, err
	}
	if len(m.lags) < s.n {
		m.note = fmt.Sprintf("%d bookings still CONFIRMED %s after the latest release_at", s.n-len(m.lags), cfg.Timeout)
	}
	m.finish()

	p.Stage("computing the "+cfg.ComputedPeriod.String()+" poll", 0)
	c := computePoll(ats, cfg.ComputedPeriod, fitCost(ticks))
	c.label, c.c = "poll UPDATE every "+cfg.ComputedPeriod.String(), s.c
	return []*measurement{m, c}, nil
}

// cost is what one poll's UPDATE takes: a fixed part and a part per row released.
type cost struct {
	fixed, perRow time.Duration
}

func (c cost) of(rows int) time.Duration { return c.fixed + time.Duration(rows)*c.perRow }

// fitCost estimates cost from measured ticks: the fixed part is the median of the ticks that
// released nothing (or the quickest tick), the per-row part what the others took beyond it, per row.
func fitCost(ticks []tick) cost {
	var idle []time.Duration
	quickest := time.Duration(-1)
	for _, t := range ticks {
		if t.rows == 0 {
			idle = append(idle, t.took)
		}
		if quickest < 0 || t.took < quickest {
			quickest = t.took
		}
	}
	var c cost
	if len(idle) > 0 {
		slices.Sort(idle)
		c.fixed = idle[len(idle)/2]
	} else {
		c.fixed = max(quickest, 0)
	}
	var extra time.Duration
	rows := 0
	for _, t := range ticks {
		if t.rows > 0 {
			extra += max(t.took-c.fixed, 0)
			rows += t.rows
		}
	}
	if rows > 0 {
		c.perRow = extra / time.Duration(rows)
	}
	return c
}

// computePoll derives what a poll every period would give the bookings due at ats (sorted): for
// phases spread evenly over one period (a uniformly random phase, integrated), each booking is
// released by the first tick at or after its release_at, visible once that tick's UPDATE — costed
// by c for the rows it releases — is over. Lags of every phase are pooled into a histogram of 1 ms
// bins, from which the row keeps an even sample; "last" and releases per second are the worst
// phase's. Nothing is released early, by construction.
func computePoll(ats []time.Time, period time.Duration, c cost) *measurement {
	n := len(ats)
	m := &measurement{design: DesignPoll, computed: true, n: n, released: n, observed: -1, unitsBack: -1, redisBytes: -1}
	if n == 0 {
		return m
	}
	phases := min(max(20_000_000/n, 100), 1000)
	span := ats[n-1].Sub(ats[0])
	bins := make([]int64, int((period+span+c.of(n))/time.Millisecond)+2)
	var worst time.Duration
	for k := range phases {
		phase := time.Duration((float64(k) + 0.5) / float64(phases) * float64(period))
		base := ats[0].Add(-period).Add(phase) // a tick in (first − period, first]
		var lastSeen time.Time
		for i := 0; i < n; {
			j := (ats[i].Sub(base) + period - 1) / period // the first tick at or after ats[i]
			at := base.Add(j * period)
			e := i
			for e < n && !ats[e].After(at) {
				e++
			}
			done := at.Add(c.of(e - i))
			for q := i; q < e; q++ {
				lag := done.Sub(ats[q])
				bins[min(int(lag/time.Millisecond), len(bins)-1)]++
				m.maxLag = max(m.maxLag, lag)
			}
			lastSeen, i = done, e
		}
		if l := lastSeen.Sub(ats[n-1]); l > worst {
			worst = l
			m.perSecond = float64(n) / lastSeen.Sub(ats[0]).Seconds()
		}
	}
	m.last, m.observed = worst, worst
	// An even sample of the pooled distribution: 10,000 quantiles, each the middle of its bin.
	const sample = 10_000
	total := int64(n) * int64(phases)
	m.lags = make([]time.Duration, 0, sample)
	var cum int64
	b := 0
	for s := range sample {
		rank := (int64(s)*total + total/2) / sample
		for cum+bins[b] <= rank {
			cum += bins[b]
			b++
		}
		m.lags = append(m.lags, time.Duration(b)*time.Millisecond+time.Millisecond/2)
	}
	m.lags[len(m.lags)-1] = m.maxLag
	return m
}
