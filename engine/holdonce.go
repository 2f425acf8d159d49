package engine

import (
	"context"
	"errors"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// A hold asked with an Idempotency-Key (docs/API.md "Idempotency") keeps its first answer, like
// every keyed POST. Holds are the booking-opening rush, so their record lives in Redis and is
// written by the hold script itself: a hold of a resource costs one round trip, its idempotency
// step included. The answer is the API's to render (status and body, opaque here); the engine only
// stores it with the hold. A service's hold (its script may try several resources) and a hold on a
// Redis Cluster (the record's key lives on another master than the venue's) take the record in
// steps of their own: reserved before the hold, finished after it.

// IdempotentHold is what a keyed hold needs beside its request: the record's scope (caller, method,
// path and key) and the request body's hash (idem.Store.Begin), and how the API answers.
type IdempotentHold struct {
	Scope, Hash string
	// Answer renders the answer to the hold h, or to its refusal err.
	Answer func(h booking.Hold, err error) idem.Response
}

// holdOnce is a keyed hold's idempotency step on its way through Hold to the hold script.
type holdOnce struct {
	IdempotentHold
	step   *redisstore.IdemStep
	ran    bool          // the script ran with the step (whatever it answered)
	stored idem.Response // what the script stored: the answer to give
	replay bool          // the stored answer is a repeat's
}

// HoldOnce is Hold for a request with an Idempotency-Key: it answers what the API is to send — the
// first answer again (replayed) for a repeat — and an error only when no answer is to be stored (a
// backend failed, the key came with another body, the first request still runs).
func (hs *Holds) HoldOnce(ctx context.Context, req HoldRequest, k IdempotentHold) (a idem.Response, replayed bool, err error) {
	if req.ServiceID != 0 || hs.rs.Clustered() {
		if prev, err := hs.holdIdem.Begin(ctx, k.Scope, k.Hash); err != nil || prev != nil {
			if prev != nil {
				return *prev, true, nil
			}
			return idem.Response{}, false, err
		}
		h, err := hs.Hold(ctx, req)
		return hs.finishOnce(ctx, k, h, err)
	}
	once := &holdOnce{IdempotentHold: k}
	req.once = once
	h, err := hs.Hold(ctx, req)
	switch {
	case !once.ran:
		// Refused before its script ran (bad input, a frozen account).
		return hs.AnswerOnce(ctx, k, err)
	case errors.Is(err, idem.ErrKeyReused), errors.Is(err, idem.ErrInProgress):
		return idem.Response{}, false, err
	case once.stored.Status != 0:
		return once.stored, once.replay, nil
	}
	// Refused otherwise (closed, over the limit of holds): the script reserved the record.
	return hs.finishOnce(ctx, k, h, err)
}

// AnswerOnce answers a keyed hold refused before it reached the engine's hold (its request could
// not be read) or its script (err): the record is taken now, so that a repeat — or a first request
// that got through meanwhile — answers as one.
func (hs *Holds) AnswerOnce(ctx context.Context, k IdempotentHold, err error) (idem.Response, bool, error) {
	if prev, berr := hs.holdIdem.Begin(ctx, k.Scope, k.Hash); berr != nil || prev != nil {
		if prev != nil {
			return *prev, true, nil
		}
		return idem.Response{}, false, berr
	}
	return hs.finishOnce(ctx, k, booking.Hold{}, err)
}

// finishOnce answers a keyed hold whose record is reserved, and stores the answer; one that failed
// on the server's side (5xx) gives the reservation up, so that a retry runs again.
func (hs *Holds) finishOnce(ctx context.Context, k IdempotentHold, h booking.Hold, err error) (idem.Response, bool, error) {
	a := k.Answer(h, err)
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if a.Status >= 500 {
		if aerr := hs.holdIdem.Abandon(lctx, k.Scope); aerr != nil {
			hs.log.Warn("idempotency reservation not given up; it lapses by itself", "err", aerr)
		}
		return a, false, nil
	}
	if ferr := hs.holdIdem.Finish(lctx, k.Scope, a); ferr != nil {
		hs.log.Warn("idempotency answer not stored; a repeat runs again", "err", ferr)
	}
	return a, false, nil
}

// prepare renders the answers the hold script may store for the hold view (the new hold, as the
// client is to see it): its own, and a full slot's, the refusal of a sold-out rush.
func (o *holdOnce) prepare(view booking.Hold) *redisstore.IdemStep {
	ok, full := o.Answer(view, nil), o.Answer(booking.Hold{}, booking.ErrSlotFull)
	o.step = &redisstore.IdemStep{Scope: o.Scope, Hash: o.Hash, TTL: idem.TTL, Stale: idem.InProgressTTL,
		OK: redisstore.IdemAnswer{Status: ok.Status, Body: ok.Body}, Full: redisstore.IdemAnswer{Status: full.Status, Body: full.Body}}
	return o.step
}

// outcome notes what the hold script answered, and answers whether the hold is decided: a repeat's
// answer (done), or an answer of the script's that it stored (a new hold, a full slot).
func (o *holdOnce) outcome(out redisstore.HoldOutcome, a redisstore.IdemAnswer) {
	o.ran = true
	switch out {
	case redisstore.HoldDone:
		o.stored, o.replay = idem.Response{Status: a.Status, Body: a.Body}, true
	case redisstore.HoldOK:
		o.stored = idem.Response{Status: o.step.OK.Status, Body: o.step.OK.Body}
	case redisstore.HoldFull:
		o.stored = idem.Response{Status: o.step.Full.Status, Body: o.step.Full.Body}
	}
}
