package redisstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits owns the limits on users and clients that are kept outside the venues: the per-second
// request counters of rate limiting and the freezes of users for no-shows.
type Limits struct{ *shared }

// counterLife is how long a rate counter of one second lives: past its second, with a margin for
// clocks that disagree.
const counterLife = 2 * time.Second

// FrozenUntil answers until when a user is frozen for no-shows; the zero time when they are not.
func (s *Limits) FrozenUntil(ctx context.Context, userID string) (time.Time, error) {
	v, err := s.rdb.Get(ctx, s.keys.Frozen(userID)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, unavailable("read freeze", err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, nil // not ours to read: no freeze
	}
	return time.UnixMilli(n).UTC(), nil
}

// SetFrozen freezes each user of until until their time (the key expires then, as measured from
// now), or unfreezes them when it is not after now; one pipeline for all of them.
func (s *Limits) SetFrozen(ctx context.Context, until map[string]time.Time, now time.Time) error {
	if len(until) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for user, t := range until {
		key := s.keys.Frozen(user)
		if !t.After(now) {
			pipe.Del(ctx, key)
		} else {
			pipe.Set(ctx, key, ms(t), t.Sub(now))
		}
	}
	_, err := pipe.Exec(ctx)
	return unavailable("freeze", err)
}

// Allow counts one request of addr at now against a limit of perSecond; false when it is over it.
func (s *Limits) Allow(ctx context.Context, addr string, now time.Time, perSecond int) (bool, error) {
	n, err := s.scripts.rateLimit.Run(ctx, s.rdb, []string{s.keys.RateLimit(addr, now.Unix())}, counterLife.Milliseconds()).Int()
	if err != nil {
		return false, unavailable("rate limit", err)
	}
	return n <= perSecond, nil
}
