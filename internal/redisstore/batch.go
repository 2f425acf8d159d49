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
	queue func(pipe redis.Pipeliner)
	done  chan struct{}
}

const (
	// maxBatch bounds the requests of one pipeline, so that one batch's replies are read while the
	// next one forms.
	maxBatch = 128
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
	batch := make([]*batchReq, 0, maxBatch)
	for {
		var first *batchReq
		select {
		case first = <-b.reqs:
		case <-idle.C:
			return
		}
		batch = append(batch[:0], first)
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		pipe := b.rdb.Pipeline()
		for _, r := range batch {
			r.queue(pipe)
		}
		_, _ = pipe.Exec(ctx) // each command's own error is read by its request
		cancel()
		for _, r := range batch {
			close(r.done)
		}
		idle.Reset(senderIdle)
	}
}

// do queues the commands queue adds (on the context it is given), sends them with the batch they
// fall into, and returns once their replies are in — read them from the commands — or ctx ends
// first.
func (b *batcher) do(ctx context.Context, queue func(ctx context.Context, pipe redis.Pipeliner)) error {
	if n := b.senders.Load(); n < maxSenders() && b.senders.CompareAndSwap(n, n+1) {
		go b.send()
	}
	r := &batchReq{queue: func(pipe redis.Pipeliner) { queue(ctx, pipe) }, done: make(chan struct{})}
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
