package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
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
func (s *shared) markDue(ctx context.Context, pipe redis.Cmdable, venueID uint64, at, now time.Time) {
	s.markSecond(ctx, pipe, venueID, markedSecond(at, now))
}

// markedSecond is the second whose bucket a mark for at, made at now, goes in: a time already past
// is due at once.
func markedSecond(at, now time.Time) int64 {
	if at.Before(now) {
		at = now
	}
	return dueSecond(at)
}

// markSecond marks a venue's timer in the bucket of second sec.
func (s *shared) markSecond(ctx context.Context, pipe redis.Cmdable, venueID uint64, sec int64) {
	key := s.keys.DueBucket(DueShard(venueID), sec)
	pipe.SAdd(ctx, key, venueID)
	pipe.ExpireAt(ctx, key, time.Unix(sec, 0).Add(dueLife))
}

// markDueOnce is markDue on a batch's pipeline, unless a request of the batch marked the same venue
// and second on it already.
func (s *shared) markDueOnce(ctx context.Context, b *batch, venueID uint64, at, now time.Time) {
	m := dueMark{venue: venueID, sec: markedSecond(at, now)}
	if _, ok := b.marks[m]; ok {
		return
	}
	b.marks[m] = struct{}{}
	s.markSecond(ctx, b.pipe, venueID, m.sec)
}

// Wheel owns the deadlines of a venue's holds — the wheel itself, the holds that ended on it, the
// confirms under way — and the venue timers that say when to look at a venue. It expires and
// requeues holds; what a hold takes is the Holds'.
type Wheel struct{ *shared }

// MarkDue marks a venue's timer at at: the wheel looks at the venue once at has come.
func (s *Wheel) MarkDue(ctx context.Context, venueID uint64, at, now time.Time) error {
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		s.markDue(ctx, pipe, venueID, at, now)
		return nil
	})
	return unavailable("mark due", err)
}

// DueBetween lists the venues marked in every shard of the seconds from..to (inclusive), each once,
// in one round trip (a pipeline; on a Redis Cluster, one per master, sent together).
func (s *Wheel) DueBetween(ctx context.Context, from, to int64) ([]uint64, error) {
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
func (s *Wheel) DropDueBetween(ctx context.Context, from, to int64) error {
	pipe := s.rdb.Pipeline()
	for sec := from; sec <= to; sec++ {
		for shard := range DueShards {
			pipe.Del(ctx, s.keys.DueBucket(shard, sec))
		}
	}
	_, err := pipe.Exec(ctx)
	return unavailable("drop due", err)
}

// ExpireDue gives back the units of a venue's due holds, at most limit of them, and answers how many
// and the earliest remaining deadline (zero when the wheel is empty).
func (s *Wheel) ExpireDue(ctx context.Context, venueID uint64, now time.Time, limit int) (int, time.Time, error) {
	vk := s.keys.Venue(venueID)
	out, err := s.scripts.expireDue.Run(ctx, s.rdb, []string{vk.Wheel(), vk.Ended(), vk.Owners(), vk.Used()}, ms(now), limit).Int64Slice()
	if err != nil {
		return 0, time.Time{}, unavailable("expire due holds", err)
	}
	var next time.Time
	if out[1] >= 0 {
		next = time.UnixMilli(out[1]).UTC()
	}
	return int(out[0]), next, nil
}

// EndedHolds reads up to limit holds of a venue whose units came back at their deadline and whose
// records are still to be written EXPIRED (and announced).
func (s *Wheel) EndedHolds(ctx context.Context, venueID uint64, now time.Time, limit int) ([]HoldRecord, error) {
	vk := s.keys.Venue(venueID)
	ids, err := s.rdb.ZRangeByScore(ctx, vk.Ended(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(ms(now), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, unavailable("ended holds", err)
	}
	out := make([]HoldRecord, 0, len(ids))
	for _, id := range ids {
		m, err := s.rdb.HGetAll(ctx, vk.Hold(id)).Result()
		if err != nil {
			return nil, unavailable("ended holds", err)
		}
		r, ok := decodeHold(m)
		if !ok {
			r = HoldRecord{ID: id, VenueID: venueID} // the record is gone: only its entry is left to clear
		}
		out = append(out, r)
	}
	return out, nil
}

// FinishExpired writes the records of ended holds EXPIRED (a hold re-taken by a late payment
// meanwhile is left as it is) and takes them off the ended set.
func (s *Wheel) FinishExpired(ctx context.Context, venueID uint64, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	vk := s.keys.Venue(venueID)
	keys := make([]string, 0, 1+len(ids))
	keys = append(keys, vk.Ended())
	args := make([]any, 0, 2+len(ids))
	args = append(args, ms(now), Keep.Milliseconds())
	for _, id := range ids {
		keys = append(keys, vk.Hold(id))
		args = append(args, id)
	}
	return unavailable("finish expired holds", s.scripts.finishExpired.Run(ctx, s.rdb, keys, args...).Err())
}

// StaleConfirming lists the holds of a venue CONFIRMING since before cutoff.
func (s *Wheel) StaleConfirming(ctx context.Context, venueID uint64, cutoff time.Time, limit int) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.keys.Venue(venueID).Confirming(),
		&redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(ms(cutoff), 10), Count: int64(limit)}).Result()
	return ids, unavailable("confirming holds", err)
}

// LiveHolds lists the holds on a venue's wheel (HELD, waiting for their deadline).
func (s *Wheel) LiveHolds(ctx context.Context, venueID uint64) ([]string, error) {
	ids, err := s.rdb.ZRange(ctx, s.keys.Venue(venueID).Wheel(), 0, -1).Result()
	return ids, unavailable("live holds", err)
}

// ForgetConfirming takes a hold that is no longer CONFIRMING off the confirming set.
func (s *Wheel) ForgetConfirming(ctx context.Context, venueID uint64, holdID string) error {
	return unavailable("forget confirming", s.rdb.ZRem(ctx, s.keys.Venue(venueID).Confirming(), holdID).Err())
}

// Requeue puts a HELD hold missing from the wheel back on it; true when it was missing.
func (s *Wheel) Requeue(ctx context.Context, r *HoldRecord, now time.Time) (bool, error) {
	n, err := s.rdb.ZAddNX(ctx, s.keys.Venue(r.VenueID).Wheel(), redis.Z{Score: float64(ms(r.Deadline)), Member: r.ID}).Result()
	if err == nil && n == 1 {
		err = s.MarkDue(ctx, r.VenueID, r.Deadline, now)
	}
	return n == 1, unavailable("requeue hold", err)
}

// Leases owns the leases that let one instance at a time run a background loop, and the notes a
// loop leaves of how far its work is done.
type Leases struct{ *shared }

// HoldLease is the lease of one background loop for one holder (see engine/loop.Lease).
type HoldLease struct {
	s     *shared
	key   string
	token string
}

// Lease returns the lease named name for the holder token.
func (s *Leases) Lease(name, token string) *HoldLease {
	return &HoldLease{s: s.shared, key: s.keys.Lease(name), token: token}
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
func (s *Leases) SetSettled(ctx context.Context, name string, before time.Time, ttl time.Duration) error {
	return unavailable("note settled", s.rdb.Set(ctx, s.keys.Settled(name), ms(before), ttl).Err())
}

// Looper is what a leased loop tells others: whether some instance holds its lease now, and up to
// when its work is done (zero when nobody said so within the note's ttl).
func (s *Leases) Looper(ctx context.Context, name string) (held bool, settled time.Time, err error) {
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

// Recovery owns what tells that Redis lost data and must be rebuilt from SQL: the markers that
// reconciliation leaves per tag, and the identity of the primaries, which a failover changes.
type Recovery struct{ *shared }

// Alive reports whether every marker of tags is present; false means Redis lost data since the last
// reconciliation.
func (s *Recovery) Alive(ctx context.Context, tags []string) (bool, error) {
	for _, t := range tags {
		n, err := s.rdb.Exists(ctx, s.keys.Alive(t)).Result()
		if err != nil {
			return false, unavailable("alive", err)
		}
		if n == 0 {
			return false, nil
		}
	}
	return true, nil
}

// MarkAlive sets the markers of tags.
func (s *Recovery) MarkAlive(ctx context.Context, tags []string, now time.Time) error {
	for _, t := range tags {
		if err := s.rdb.Set(ctx, s.keys.Alive(t), ms(now), 0).Err(); err != nil {
			return unavailable("mark alive", err)
		}
	}
	return nil
}

// AliveSince reads the markers of tags that reconciliation leaves (MarkAlive): the earliest time
// they name, which is when the oldest of them began repairing, and false when one is missing (Redis
// lost that data since).
func (s *Recovery) AliveSince(ctx context.Context, tags []string) (time.Time, bool, error) {
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

// Identity names the Redis primaries this client writes to: the run_id of the server, or of every
// master of a cluster, sorted and joined. A primary replaced by a promoted replica (a failover, which
// may have lost acknowledged writes, replication being asynchronous) or restarted changes it. An
// empty answer means the server does not say (the embedded Redis).
func (s *Recovery) Identity(ctx context.Context) (string, error) {
	var mu sync.Mutex
	var ids []string
	read := func(ctx context.Context, c *redis.Client) error {
		// INFO without a section: the embedded Redis refuses the "server" section (and has no run_id).
		info, err := c.Info(ctx).Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && id != "" {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		return "", nil
	}
	if err != nil {
		return "", unavailable("identity", err)
	}
	slices.Sort(ids)
	return strings.Join(ids, ","), nil
}
