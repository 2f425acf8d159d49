// Package idem keeps the answers of idempotent requests (docs/API.md "Idempotency"): a repeat with
// the same key and body gets the first answer, another body is refused, a repeat while the first
// runs is told so. Requests that change SQL keep their records in SQL, beside the bookings they
// protect; a request that touches only Redis (a hold) keeps its record in Redis, so that holds keep
// working while MySQL is away. It is the API's concern, not a rule of the booking life: api/
// declares the interface, and main wires these stores into it.
package idem

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

const (
	// TTL is how long an answer is kept; docs/API.md promises at least 24 hours.
	TTL = 25 * time.Hour
	// InProgressTTL: a reservation whose request never finished (the process died) is given up
	// after this, so that the client's retry runs instead of answering 409 for a day.
	InProgressTTL = time.Minute
)

// Errors of Begin. Their codes are part of the REST contract.
var (
	ErrKeyReused = &booking.Error{Kind: booking.KindInvalid, Code: "idempotency_key_reused",
		Message: "the Idempotency-Key was used with another request body"}
	ErrInProgress = &booking.Error{Kind: booking.KindConflict, Code: "request_in_progress",
		Message: "a request with this Idempotency-Key is still running"}
)

// Response is the first answer to an idempotent request.
type Response struct {
	Status int
	Body   []byte
}

// Clock is where the stores read "now".
type Clock interface{ Now() time.Time }

// SQL keeps records in the SQL store.
type SQL struct {
	ss    *sqlstore.Store
	clock Clock
}

// NewSQL builds the SQL store of idempotency records.
func NewSQL(db *gorm.DB, clock Clock) *SQL { return &SQL{ss: sqlstore.New(db, nil), clock: clock} }

// Begin reserves scope (caller + method + path + key) for a request whose body hashes to hash. It
// answers nil when the caller should run the request, the stored answer when the same request
// already ran, ErrKeyReused when the key came with another body and ErrInProgress while the first
// request still runs.
func (s *SQL) Begin(ctx context.Context, scope, hash string) (*Response, error) {
	now := s.clock.Now()
	for range 3 {
		ok, prev, err := s.ss.ReserveIdem(ctx, scope, sqlstore.IdemRecord{RequestHash: hash, CreatedAt: now, ExpiresAt: now.Add(TTL)})
		if sqlstore.IsStale(err) {
			continue // forgotten meanwhile: try to reserve again
		}
		if err != nil || ok {
			return nil, err
		}
		if now.After(prev.ExpiresAt) || (!prev.Done && now.Sub(prev.CreatedAt) > InProgressTTL) {
			if err := s.ss.ForgetIdem(ctx, scope, prev.CreatedAt); err != nil {
				return nil, err
			}
			continue
		}
		if prev.RequestHash != hash {
			return nil, ErrKeyReused
		}
		if !prev.Done {
			return nil, ErrInProgress
		}
		return &Response{Status: prev.Status, Body: prev.Body}, nil
	}
	return nil, ErrInProgress
}

// Finish stores the answer of a reserved request.
func (s *SQL) Finish(ctx context.Context, scope string, r Response) error {
	return s.ss.FinishIdem(ctx, scope, r.Status, r.Body)
}

// Abandon forgets a reservation whose request failed on the server's side, so a retry runs again.
func (s *SQL) Abandon(ctx context.Context, scope string) error { return s.ss.AbandonIdem(ctx, scope) }

// Purge drops expired records (Redis expires its own).
func (s *SQL) Purge(ctx context.Context) error { return s.ss.PurgeIdem(ctx, s.clock.Now()) }

// Redis keeps records in Redis, each for TTL.
type Redis struct {
	rs    *redisstore.Store
	clock Clock
}

// NewRedis builds the Redis store of idempotency records, under the engine's key prefix.
func NewRedis(rdb redis.UniversalClient, prefix string, clock Clock) *Redis {
	return &Redis{rs: redisstore.New(rdb, prefix), clock: clock}
}

// Begin is SQL.Begin, in Redis.
func (s *Redis) Begin(ctx context.Context, scope, hash string) (*Response, error) {
	a, err := s.rs.IdemBegin(ctx, scope, hash, s.clock.Now(), TTL, InProgressTTL)
	if err != nil {
		return nil, err
	}
	switch a.Outcome {
	case "run":
		return nil, nil
	case "reused":
		return nil, ErrKeyReused
	case "running":
		return nil, ErrInProgress
	case "done":
		return &Response{Status: a.Status, Body: a.Body}, nil
	}
	return nil, errors.New("idempotency: unexpected answer " + a.Outcome)
}

// Finish stores the answer of a reserved request.
func (s *Redis) Finish(ctx context.Context, scope string, r Response) error {
	return s.rs.IdemFinish(ctx, scope, r.Status, r.Body)
}

// Abandon forgets a reservation whose request failed on the server's side.
func (s *Redis) Abandon(ctx context.Context, scope string) error { return s.rs.IdemAbandon(ctx, scope) }
