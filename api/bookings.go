package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// bookingRoutes are the routes of bookings once made: lists, reads, cancels and restores, check-in
// (and its QR code, qr.go) and erasing a user's bookings (erase.go).
type bookingRoutes struct {
	request.Reader
	bookings *engine.Bookings
}

func (rt *bookingRoutes) listBookings(c *gin.Context) {
	limit, ok := rt.QueryLimit(c)
	if !ok {
		return
	}
	bs, next, err := rt.bookings.ListBookings(c.Request.Context(), auth.Actor(c), c.Query("cursor"), limit)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(bs, next, toBookingResponse))
}

// venueBookings is the front desk's list of a venue's bookings.
func (rt *bookingRoutes) venueBookings(c *gin.Context) {
	venueID, ok := rt.QueryID(c, "venue_id")
	if !ok {
		return
	}
	resourceID, ok := rt.QueryID(c, "resource_id")
	if !ok {
		return
	}
	date, ok := rt.QueryDate(c, "date", false)
	if !ok {
		return
	}
	days, ok := rt.QueryCount(c, "days", "invalid_days")
	if !ok {
		return
	}
	limit, ok := rt.QueryLimit(c)
	if !ok {
		return
	}
	a := auth.Actor(c)
	if venueID == 0 && a.WorksAtAVenue() {
		venueID = a.VenueID // a desk lists its own venue by default
	}
	bs, next, err := rt.bookings.VenueBookings(c.Request.Context(), a, engine.BookingQuery{VenueID: venueID, Date: date, Days: days, Search: c.Query("q"),
		Status: c.Query("status"), ResourceID: resourceID, Cursor: c.Query("cursor"), Limit: limit})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(bs, next, toBookingResponse))
}

func (rt *bookingRoutes) getBooking(c *gin.Context) {
	if b, ok := rt.pathBooking(c); ok {
		c.JSON(http.StatusOK, toBookingResponse(b))
	}
}

// pathBooking reads the booking the path names, as the caller may see it (the engine's read rule:
// owner, the venue's staff, admin); false when it answered an error instead.
func (rt *bookingRoutes) pathBooking(c *gin.Context) (booking.Booking, bool) {
	id, ok := rt.PathID(c)
	if !ok {
		return booking.Booking{}, false
	}
	b, err := rt.bookings.GetBooking(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return booking.Booking{}, false
	}
	return b, true
}

func (rt *bookingRoutes) bookingHistory(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	hs, err := rt.bookings.History(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(hs, "", toHistoryResponse))
}

func (rt *bookingRoutes) cancelBooking(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok || !rt.BindEmpty(c) {
		return
	}
	b, err := rt.bookings.CancelBooking(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (rt *bookingRoutes) restoreBooking(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok || !rt.BindEmpty(c) {
		return
	}
	b, err := rt.bookings.Restore(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

type checkinRequest struct {
	CheckinCode *string `json:"checkin_code"`
}

func (rt *bookingRoutes) checkIn(c *gin.Context) {
	var req checkinRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.Required("checkin_code", req.CheckinCode != nil); err != nil {
		rt.Fail(c, err)
		return
	}
	b, err := rt.bookings.CheckIn(c.Request.Context(), auth.Actor(c), *req.CheckinCode)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

// decisionRequest is what staff send with one of the venue's decisions on a booking (approve,
// decline, cancel for the venue, restore on appeal): the reason that goes into its history, and for
// a cancel how the guest is refunded.
type decisionRequest struct {
	Reason string `json:"reason"`
}

type venueCancelRequest struct {
	decisionRequest
	Refund string `json:"refund"`
}

// decision answers a route that runs one of the engine's decisions: refund is whether the route
// takes the refund field.
func (rt *bookingRoutes) decision(refund bool,
	run func(ctx context.Context, a booking.Actor, id uint64, d engine.Decision) (booking.Booking, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := rt.PathID(c)
		if !ok {
			return
		}
		var req venueCancelRequest
		var dst any = &req.decisionRequest
		if refund {
			dst = &req
		}
		// An approval needs no reason, so its body may be empty; the engine requires one where due.
		if !rt.BindOptional(c, dst) {
			return
		}
		full, err := booking.ParseRefund(req.Refund)
		if err != nil {
			rt.Fail(c, err)
			return
		}
		b, err := run(c.Request.Context(), auth.Actor(c), id, engine.Decision{Reason: req.Reason, FullRefund: full})
		if err != nil {
			rt.Fail(c, err)
			return
		}
		c.JSON(http.StatusOK, toBookingResponse(b))
	}
}
