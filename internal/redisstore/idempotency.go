package redisstore

import (
	"context"
	"strconv"
	"time"
)

// Idempotency owns the records of keyed requests: a request reserves its scope, and finishes it
// with its answer or gives it up. (A hold can take its idempotency step in the hold script itself:
// see Holds.HoldOnce.)
type Idempotency struct{ *shared }

// IdemAnswer is what reserving an idempotency scope answered.
type IdemAnswer struct {
	Outcome string // run, reused, running, done
	Status  int    // done: the first answer's status
	Body    []byte // done: the first answer's body
}

// IdemBegin reserves scope for a request whose body hashes to hash, for ttl; a reservation left
// unfinished for longer than stale is given up.
func (s *Idempotency) IdemBegin(ctx context.Context, scope, hash string, now time.Time, ttl, stale time.Duration) (IdemAnswer, error) {
	out, err := replyStrings(s.scripts.idemBegin.Run(ctx, s.rdb, []string{s.keys.Idempotency(scope)},
		ms(now), hash, ttl.Milliseconds(), stale.Milliseconds()).Result())
	if err != nil {
		return IdemAnswer{}, unavailable("idempotency", err)
	}
	a := IdemAnswer{Outcome: out[0]}
	if a.Outcome == "done" {
		a.Status, _ = strconv.Atoi(out[1])
		a.Body = []byte(out[2])
	}
	return a, nil
}

// IdemFinish stores the answer of a reserved request.
func (s *Idempotency) IdemFinish(ctx context.Context, scope string, status int, body []byte) error {
	return unavailable("idempotency", s.scripts.idemFinish.Run(ctx, s.rdb, []string{s.keys.Idempotency(scope)}, strconv.Itoa(status), body).Err())
}

// IdemAbandon gives up an unfinished reservation.
func (s *Idempotency) IdemAbandon(ctx context.Context, scope string) error {
	return unavailable("idempotency", s.scripts.idemFinish.Run(ctx, s.rdb, []string{s.keys.Idempotency(scope)}, "", "").Err())
}
