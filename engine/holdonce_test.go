package engine

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
)

// roundTrips counts the commands and pipelines a Redis client sends: each is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// keyed is an idempotent hold's step as the API would take it: key names the record, body the
// request, and the answers are JSON of the hold or the error's code.
func keyed(key, body string) IdempotentHold {
	return IdempotentHold{Scope: "test:" + key, Hash: body, Answer: func(h booking.Hold, err error) idem.Response {
		if err != nil {
			e, _ := booking.AsError(err)
			b, _ := json.Marshal(map[string]string{"code": e.Code})
			return idem.Response{Status: 409, Body: b}
		}
		b, _ := json.Marshal(map[string]string{"hold_id": h.ID, "expires_at": h.ExpiresAt.Format(time.RFC3339Nano)})
		return idem.Response{Status: 201, Body: b}
	}}
}

// A hold asked with an Idempotency-Key costs one round trip to Redis, its idempotency record
// included; a repeat takes nothing and gets the first answer, byte for byte, also from a new process;
// the same key with another body is refused; a full slot's answer is kept like a hold's.
func TestKeyedHoldIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("20:00")
	tb.slotOf(t, res.ID, start) // the catalog and the day loaded: what is counted is the hold's own
	warm := HoldRequest{UserID: "dan", ResourceID: res.ID, Start: start.Add(-time.Hour), End: start}
	_, _, err := tb.e.HoldOnce(ctx, warm, keyed("k0", "body-0")) // the script loaded, a connection open
	require.NoError(t, err)
	rt := &roundTrips{}
	tb.redis.Client.AddHook(rt)
	req := HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)}

	first, replayed, err := tb.e.HoldOnce(ctx, req, keyed("k1", "body-1"))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, 201, first.Status)
	if !tb.e.rs.Clustered() {
		require.EqualValues(t, 1, rt.n.Load(), "one round trip: the hold, its timer and its record")
	}
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start))

	tb.restart(t) // a new process on the same Redis
	again, replayed, err := tb.e.HoldOnce(ctx, req, keyed("k1", "body-1"))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first, again, "the first answer, byte for byte")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "a repeat takes nothing")

	_, _, err = tb.e.HoldOnce(ctx, req, keyed("k1", "another body"))
	require.ErrorIs(t, err, idem.ErrKeyReused)

	bob := HoldRequest{UserID: "bob", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)}
	full, replayed, err := tb.e.HoldOnce(ctx, bob, keyed("k2", "body-2"))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, 409, full.Status)
	require.JSONEq(t, `{"code":"slot_full"}`, string(full.Body))
	var h struct {
		HoldID string `json:"hold_id"`
	}
	require.NoError(t, json.Unmarshal(first.Body, &h))
	_, err = tb.e.CancelHold(ctx, booking.Actor{UserID: "alice", Role: booking.RoleUser}, h.HoldID)
	require.NoError(t, err)
	again, replayed, err = tb.e.HoldOnce(ctx, bob, keyed("k2", "body-2"))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, full, again, "the slot is free now, but the key was answered: full")
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start))

	// A request refused before its script (off the grid) is answered and kept the same way.
	off := HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start.Add(time.Minute), End: start.Add(time.Hour)}
	bad, _, err := tb.e.HoldOnce(ctx, off, keyed("k3", "body-3"))
	require.NoError(t, err)
	require.Equal(t, 409, bad.Status)
	again, replayed, err = tb.e.HoldOnce(ctx, off, keyed("k3", "body-3"))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, bad, again)
}
