package releasebench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
)

const anchorTaskType = "bench:release"

// asynqDefaultConcurrency is what asynq.Config's zero Concurrency means.
func asynqDefaultConcurrency() int { return runtime.NumCPU() }

// asynqEnqueuers enqueue the anchor's tasks at once: enqueueing is a round trip per task.
const asynqEnqueuers = 16

// measureAsynq measures the first anchor: stock Asynq with default settings — its own server
// whose only non-default setting is its queue (and a quieter log level, which changes no timing) —
// one task per booking scheduled with ProcessAt(release_at), and a handler that releases its one
// booking with one UPDATE.
func measureAsynq(ctx context.Context, env *Env, cfg Config, s spec, p *Progress) (m *measurement, err error) {
	m = &measurement{design: DesignAsynq, label: cfg.label(DesignAsynq, s.c), c: s.c, n: s.n, observed: -1, unitsBack: -1, redisBytes: -1}
	cleanup := context.WithoutCancel(ctx)
	rig, err := newAnchorRig(ctx, env, cfg, s, p)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rig.close(cleanup)) }()
	db, t, load := rig.db, rig.t, rig.load
	queue := randomName("bench_asynq_")
	defer func() { err = errors.Join(err, env.deleteQueues(cleanup, queue)) }()

	srv := asynq.NewServer(env.AsynqOpt, asynq.Config{Queues: map[string]int{queue: 1}, LogLevel: asynq.WarnLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(anchorTaskType, func(ctx context.Context, task *asynq.Task) error {
		id, err := strconv.ParseInt(string(task.Payload()), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		_, err = db.sql.ExecContext(ctx, t.releaseOne, id)
		return err
	})
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	defer srv.Shutdown()
	client := asynq.NewClient(env.AsynqOpt)
	defer client.Close()
	enqueue := func(ctx context.Context, id int64, at time.Time) error {
		_, err := client.EnqueueContext(ctx, asynq.NewTask(anchorTaskType, []byte(strconv.FormatInt(id, 10))),
			asynq.Queue(queue), asynq.ProcessAt(at))
		return err
	}
	// A booking of this design is a row and a task.
	book := func(ctx context.Context, firstID int64, ats []time.Time, status string) error {
		if err := t.insert(ctx, firstID, ats, status); err != nil {
			return err
		}
		return parallel(ctx, len(ats), asynqEnqueuers, p, func(ctx context.Context, _, i int) error {
			return enqueue(ctx, firstID+int64(i), ats[i])
		})
	}

	scratch := min(max(s.n/50, 20), 500)
	p.Stage("estimating the setup rate", scratch)
	t0 := time.Now()
	if err := book(ctx, int64(s.n)+1, scratchTimes(scratch), anchorScratch); err != nil {
		return nil, err
	}
	first := s.plan(time.Now(), float64(scratch)/time.Since(t0).Seconds(), 0)
	ats := s.releaseAts(first)
	last := ats[len(ats)-1]

	before := env.usedMemory(ctx)
	p.Stage("making bookings and tasks", s.n)
	t1 := time.Now()
	if err := book(ctx, 1, ats, anchorConfirmed); err != nil {
		return nil, err
	}
	m.setupPerSecond = float64(s.n) / time.Since(t1).Seconds()
	if after := env.usedMemory(ctx); before >= 0 && after >= 0 {
		m.redisBytes = float64(after-before) / float64(s.n)
	}
	if err := checkOnTime(first); err != nil {
		return nil, err
	}

	obs, err := db.observer()
	if err != nil {
		return nil, err
	}
	stopLoad := load.start(ctx, first, last)
	seen, contention, err := waitReleased(ctx, t.watcher(obs), db.sql, s, first, last, cfg.Timeout, p)
	m.load, m.contention = stopLoad(), contention
	if err != nil {
		return nil, err
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
	return m, nil
}
