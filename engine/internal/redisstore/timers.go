package redisstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Venue timers tell the wheel which venues have something due at which second — a hold's deadline, a
// confirm or a move that may have been abandoned — so that its work is proportional to what is due,
// not to the venues that exist. Each second has a SET of venue ids, split over DueShards keys of
// their own hash tags, so that in a Redis Cluster no one master carries every mark. A mark is only
// ever added, and a second is read (and dropped) once it has passed, so no mark is lost to a race.

// DueShards is how many keys one second's venues are spread over.
const DueShards = 8

// DueShard is the shard of a venue's marks.
func DueShard(venueID uint64) int { return int(venueID % DueShards) }

// dueSecond is the second whose bucket holds a mark for at: at rounded up, so that the bucket is read
// no earlier than at.
func dueSecond(at time.Time) int64 {
	s := at.Unix()
	if at.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// dueLife is how long a bucket outlives its second when the wheel never reads it (no instance runs
// the wheel); the wheel's sweep of every venue catches up with what it holds.
const dueLife = time.Hour

// markDue queues, on pipe, the mark of venue's timer at at (never earlier than now).
func (s *Store) markDue(ctx context.Context, pipe redis.Cmdable, venueID uint64, at, now time.Time) {
	if at.Before(now) {
		at = now
	}
	sec := dueSecond(at)
	key := s.keys.DueBucket(DueShard(venueID), sec)
	pipe.SAdd(ctx, key, venueID)
	pipe.ExpireAt(ctx, key, time.Unix(sec, 0).Add(dueLife))
}

// MarkDue marks a venue's timer at at: the wheel looks at the venue once at has come.
func (s *Store) MarkDue(ctx context.Context, venueID uint64, at, now time.Time) error {
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		s.markDue(ctx, pipe, venueID, at, now)
		return nil
	})
	return unavailable("mark due", err)
}

// DueBetween lists the venues marked in every shard of the seconds from..to (inclusive), each once,
// in one round trip (a pipeline; on a Redis Cluster, one per master, sent together).
func (s *Store) DueBetween(ctx context.Context, from, to int64) ([]uint64, error) {
	pipe := s.rdb.Pipeline()
	var cmds []*redis.StringSliceCmd
	for sec := from; sec <= to; sec++ {
		for shard := range DueShards {
			cmds = append(cmds, pipe.SMembers(ctx, s.keys.DueBucket(shard, sec)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("due venues", err)
	}
	seen := map[uint64]bool{}
	var out []uint64
	for _, c := range cmds {
		for _, m := range c.Val() {
			if id, err := strconv.ParseUint(m, 10, 64); err == nil && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// DropDueBetween forgets every shard of the seconds from..to, once their venues were looked at.
func (s *Store) DropDueBetween(ctx context.Context, from, to int64) error {
	pipe := s.rdb.Pipeline()
	for sec := from; sec <= to; sec++ {
		for shard := range DueShards {
			pipe.Del(ctx, s.keys.DueBucket(shard, sec))
		}
	}
	_, err := pipe.Exec(ctx)
	return unavailable("drop due", err)
}

// HoldLease is the lease of one background loop for one holder (see engine/loop.Lease).
type HoldLease struct {
	s     *Store
	key   string
	token string
}

// Lease returns the lease named name for the holder token.
func (s *Store) Lease(name, token string) *HoldLease {
	return &HoldLease{s: s, key: s.keys.Lease(name), token: token}
}

// Hold takes the lease if it is free, or renews it if this holder has it, for ttl.
func (l *HoldLease) Hold(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := l.s.scripts.leaseHold.Run(ctx, l.s.rdb, []string{l.key}, l.token, ttl.Milliseconds()).Int()
	return n == 1, unavailable("hold lease", err)
}

// Release gives the lease up if this holder has it.
func (l *HoldLease) Release(ctx context.Context) error {
	err := l.s.scripts.leaseRelease.Run(ctx, l.s.rdb, []string{l.key}, l.token).Err()
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return unavailable("release lease", err)
}

// SetSettled notes, for ttl, that the work of the loop named name is done up to before (for the
// release loop: every booking due before it is decided, and its units are back).
func (s *Store) SetSettled(ctx context.Context, name string, before time.Time, ttl time.Duration) error {
	return unavailable("note settled", s.rdb.Set(ctx, s.keys.Settled(name), ms(before), ttl).Err())
}

// Looper is what a leased loop tells others: whether some instance holds its lease now, and up to
// when its work is done (zero when nobody said so within the note's ttl).
func (s *Store) Looper(ctx context.Context, name string) (held bool, settled time.Time, err error) {
	vs, err := s.rdb.MGet(ctx, s.keys.Lease(name), s.keys.Settled(name)).Result()
	if err != nil {
		return false, time.Time{}, unavailable("read lease", err)
	}
	if v, ok := vs[1].(string); ok {
		if n, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			settled = time.UnixMilli(n).UTC()
		}
	}
	return vs[0] != nil, settled, nil
}

// AliveSince reads the markers of tags that reconciliation leaves (MarkAlive): the earliest time
// they name, which is when the oldest of them began repairing, and false when one is missing (Redis
// lost that data since).
func (s *Store) AliveSince(ctx context.Context, tags []string) (time.Time, bool, error) {
	var oldest time.Time
	for _, t := range tags {
		v, err := s.rdb.Get(ctx, s.keys.Alive(t)).Int64()
		if errors.Is(err, redis.Nil) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, unavailable("alive since", err)
		}
		at := time.UnixMilli(v).UTC()
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	return oldest, true, nil
}
