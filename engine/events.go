package engine

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// Events are written to the outbox in the transaction that makes them true; their data is the
// subject as the API shows it (engine/wire), rendered at that moment, so that a receiver sees each
// state a booking passed through, not whatever it is when the event is delivered.

// events renders events, and puts answers in their venue's zone, from the catalog's cache.
type events struct {
	cat *catalog.Cache
	log *slog.Logger
}

// renderChange is the event of a booking change (the store's Renderer).
func (ev *events) renderChange(b *sqlstore.Booking, c booking.Change) (sqlstore.Event, bool) {
	typ := c.Event()
	if typ == "" {
		return sqlstore.Event{}, false
	}
	return ev.bookingEvent(typ, b, string(c.From), c.At), true
}

// bookingEvent renders an event about a booking, with the status it had before when prev is set.
func (ev *events) bookingEvent(typ string, b *sqlstore.Booking, prev string, at time.Time) sqlstore.Event {
	view := b.Booking
	// The venue's zone comes from the catalog's cache, which the callers fill before a transaction
	// starts: rendering runs inside it and must not wait for SQL.
	if vi, ok := ev.cat.PeekVenue(b.VenueID); ok {
		view = view.In(vi.Loc)
	} else {
		ev.log.Warn("event rendered in UTC: its venue was not in the cache", "booking_id", b.ID, "venue_id", b.VenueID)
	}
	data := wire.BookingChange{Booking: wire.FromBooking(view), PreviousStatus: prev}
	return sqlstore.Event{Type: typ, Subject: sqlstore.BookingSubject(b.ID), VenueID: b.VenueID, UserID: b.UserID,
		Data: mustJSON(data), At: at}
}

// waitlistEvent renders an event about a waitlist entry (already in the venue's zone).
func (ev *events) waitlistEvent(typ string, w booking.WaitlistEntry, at time.Time) sqlstore.Event {
	return sqlstore.Event{Type: typ, Subject: "waitlist:" + strconv.FormatUint(w.ID, 10), VenueID: w.VenueID,
		UserID: w.UserID, Data: mustJSON(wire.FromWaitlist(w)), At: at}
}

// holdEvent renders an event about a hold (already in the venue's zone).
func (ev *events) holdEvent(typ string, h booking.Hold, at time.Time) sqlstore.Event {
	return sqlstore.Event{Type: typ, Subject: "hold:" + h.ID, VenueID: h.VenueID, UserID: h.UserID,
		Data: mustJSON(wire.FromHold(h)), At: at}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // wire types always encode
	}
	return b
}

// refundEvent renders a refund's event (the store's RefundRenderer). It runs inside the refund's
// transaction, so the venue's zone comes from the catalog's cache, as a booking event's does.
func (ev *events) refundEvent(r models.Refund, typ string) sqlstore.Event {
	loc := time.UTC
	if vi, ok := ev.cat.PeekVenue(r.VenueID); ok {
		loc = vi.Loc
	} else if r.VenueID != 0 {
		ev.log.Warn("refund event rendered in UTC: its venue was not in the cache", "refund_id", r.ID, "venue_id", r.VenueID)
	}
	return sqlstore.Event{Type: typ, Subject: sqlstore.RefundSubject(r), VenueID: r.VenueID, UserID: r.UserID,
		Data: mustJSON(refundView(r, loc)), At: r.UpdatedAt}
}
