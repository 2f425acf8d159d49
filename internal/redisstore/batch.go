package redisstore

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A booking-opening rush is thousands of hold scripts at once, each a round trip of its own: a write
// and a read on both sides of the connection, which cost Redis and this process more than many of
// the scripts themselves. The batcher sends the scripts of concurrent requests together instead —
// each request queues its commands, and a sender takes every request waiting when it is free into
// one pipeline — so that a rush costs a round trip per batch, while a request that finds nobody
// waiting goes out at once, alone. Replies are the requests' own: a pipeline reports each command's
// result separately, so one request's error (a script not loaded yet) is nobody else's.

// batcher gathers the commands of concurrent requests into pipelines.
type batcher struct {
	rdb     redis.UniversalClient
	reqs    chan *batchReq
	senders atomic.Int32 // running; they start with demand and stop when idle
}

// batchReq is one request's commands, added to the pipeline of the batch it goes out in.
type batchReq struct {
	queue func(b *batch)
	done  chan struct{}
}

// batch is one pipeline being formed, with the venue timers its requests have marked on it: the
// holds of a rush fall due in the same few seconds, and one mark of a venue's second in a pipeline
// does what the same mark from each of them did (a set's member, the same expiry).
type batch struct {
	pipe  redis.Pipeliner
	marks map[dueMark]struct{}
}

// dueMark is a venue's mark in the bucket of one second.
type dueMark struct {
	venue uint64
	sec   int64
}

const (
	// maxBatch bounds the requests of one pipeline, so that one batch's replies are read while the
	// next one forms.
	maxBatch = 128
	// minBatch is the smallest bound batchLimit sets (see there).
	minBatch = 8
	// batchTimeout bounds one pipeline's round trip.
	batchTimeout = 10 * time.Second
	// senderIdle is how long a sender waits for work before it stops.
	senderIdle = 30 * time.Second
)

func newBatcher(rdb redis.UniversalClient) *batcher {
	return &batcher{rdb: rdb, reqs: make(chan *batchReq, 4*maxBatch)}
}

// maxSenders is how many batches may be on their way at once: two per CPU, so that batches are
// built and read while others wait for Redis.
func maxSenders() int32 { return int32(2 * runtime.GOMAXPROCS(0)) }

// send sends batches until it has been idle for senderIdle.
func (b *batcher) send() {
	defer b.senders.Add(-1)
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	waiting := make([]*batchReq, 0, maxBatch)
	marks := make(map[dueMark]struct{})
	for {
		var first *batchReq
		select {
		case first = <-b.reqs:
		case <-idle.C:
			return
		}
		waiting = append(waiting[:0], first)
		limit := batchLimit(len(b.reqs))
	gather:
		for len(waiting) < limit {
			select {
			case r := <-b.reqs:
				waiting = append(waiting, r)
			default:
				break gather
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		clear(marks)
		p := &batch{pipe: b.rdb.Pipeline(), marks: marks}
		for _, r := range waiting {
			r.queue(p)
		}
		_, _ = p.pipe.Exec(ctx) // each command's own error is read by its request
		cancel()
		for _, r := range waiting {
			close(r.done)
		}
		idle.Reset(senderIdle)
	}
}

// batchLimit is how many requests a sender takes into its batch when queued more are waiting: its
// share of them, between minBatch and maxBatch. Taking every request waiting would put a few dozen
// clients' holds into one pipeline, and then Redis runs them while this process has nothing to do,
// and this process answers them while Redis has nothing to do; shares keep a batch at Redis while
// the one before it is answered (an HTTP hold at 32 connections: 14k holds/s in batches of up to
// 128, 16.5k in shares). A rush queues hundreds, and its shares are full batches, whose round trip
// is shared by the most.
func batchLimit(queued int) int {
	return min(maxBatch, max(minBatch, queued/int(maxSenders())))
}

// do queues the commands queue adds (on the context it is given), sends them with the batch they
// fall into, and returns once their replies are in — read them from the commands — or ctx ends
// first.
func (b *batcher) do(ctx context.Context, queue func(ctx context.Context, b *batch)) error {
	if n := b.senders.Load(); n < maxSenders() && b.senders.CompareAndSwap(n, n+1) {
		go b.send()
	}
	r := &batchReq{queue: func(p *batch) { queue(ctx, p) }, done: make(chan struct{})}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
