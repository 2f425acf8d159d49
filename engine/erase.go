package engine

import (
	"context"
	"errors"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Erased is what an erasure answers: the pseudonym the user's records carry now and, per kind, how
// many records carry it — erased now or by an earlier erasure of the same user, so that repeating an
// erasure answers the same. Records that end on their own drop out of the counts: hold records 24 h
// after their hold ended, published events and stored answers after their retention.
type Erased struct {
	Pseudonym     string
	Bookings      int // bookings the user owned
	History       int // status-history rows in which the user's id acted (user:, staff: or admin:)
	Waitlist      int // waitlist entries (those still WAITING were withdrawn)
	Refunds       int
	WechatOrders  int // WeChat Pay orders the user was the payer of
	Events        int // outbox events about the user, delivered or not
	StoredAnswers int // stored answers to idempotent requests that showed the user
	Holds         int // hold records in Redis
}

// eraseTimeout bounds an erasure. It runs on after the request that asked for it ends: it is one
// transaction over tables that are partly scanned, and giving up halfway would only roll it back.
const eraseTimeout = time.Minute

// EraseUser anonymises a user (PIPL): every personal value the engine keeps of userID, as
// engine/booking's Erase decides them, is replaced by the user's pseudonym, in Redis and in SQL,
// while every unit, counter and owner of inventory stays as it was. Admin only. It is idempotent.
//
// Events already delivered cannot be recalled: receivers keep what they were sent. Events not yet
// delivered go out as they read after the erasure (a delivery reads its event when it is attempted),
// and a WeChat message still pending is skipped, there being nobody to address. An attempt already
// in flight when the erasure commits may still carry the old values.
//
// The user id itself stays usable: a later request with it starts afresh, as a user with no holds,
// bookings, no-shows or freeze. A request racing with the erasure (a hold or a confirm under way)
// may still write the id after it; erasing again takes care of that.
func (bs *Bookings) EraseUser(ctx context.Context, a booking.Actor, userID string) (Erased, error) {
	if err := a.RequireAdmin(); err != nil {
		return Erased{}, err
	}
	x, err := booking.Erase(bs.erasureKey, userID)
	if err != nil {
		return Erased{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eraseTimeout)
	defer cancel()
	now := bs.clock.Now()

	// Redis first: a confirm that reads a hold after this books it under the pseudonym.
	holds, err := bs.eraseHolds(ctx, x)
	if err != nil {
		return Erased{}, err
	}
	if err := bs.rs.SetFrozen(ctx, map[string]time.Time{x.UserID: {}}, now); err != nil {
		return Erased{}, err
	}
	rows, err := bs.ss.EraseUser(ctx, x, now)
	if errors.Is(err, sqlstore.ErrCommitUnknown) {
		rows, err = bs.ss.EraseUser(ctx, x, now) // the same again is harmless, and tells
	}
	if err != nil {
		return Erased{}, err
	}
	out := Erased{Pseudonym: x.Pseudonym, Bookings: rows.Bookings, History: rows.History, Waitlist: rows.Waitlist,
		Refunds: rows.Refunds, WechatOrders: rows.WechatOrders, Events: rows.Events, StoredAnswers: rows.StoredAnswers,
		Holds: holds}
	// The log names the pseudonym, never the id it replaced.
	bs.log.Info("user erased", "by", a.Name(), "pseudonym", out.Pseudonym, "bookings", out.Bookings,
		"history", out.History, "waitlist", out.Waitlist, "refunds", out.Refunds, "wechat_orders", out.WechatOrders,
		"events", out.Events, "stored_answers", out.StoredAnswers, "holds", out.Holds)
	return out, nil
}

// eraseHolds gives the user's holds at every venue to their pseudonym and counts the hold records
// that name it.
func (bs *Bookings) eraseHolds(ctx context.Context, x booking.Erasure) (int, error) {
	venues, err := bs.ss.VenueIDs(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, v := range venues {
		n, left, err := bs.rs.EraseHolds(ctx, v, x.UserID, x.Pseudonym)
		if err != nil {
			return 0, err
		}
		if left > 0 {
			bs.log.Warn("holds made while their user was erased keep the user id; erase again", "venue_id", v, "holds", left)
		}
		total += n
	}
	return total, nil
}
