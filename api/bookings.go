package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

func (s *server) listBookings(c *gin.Context) {
	limit, ok := s.queryLimit(c)
	if !ok {
		return
	}
	bs, next, err := s.eng.ListBookings(c.Request.Context(), actorOf(c), c.Query("cursor"), limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(bs, next, toBookingResponse))
}

// venueBookings is the front desk's list of a venue's bookings.
func (s *server) venueBookings(c *gin.Context) {
	venueID, ok := s.queryID(c, "venue_id")
	if !ok {
		return
	}
	resourceID, ok := s.queryID(c, "resource_id")
	if !ok {
		return
	}
	date, ok := s.queryDate(c, "date", false)
	if !ok {
		return
	}
	limit, ok := s.queryLimit(c)
	if !ok {
		return
	}
	a := actorOf(c)
	if venueID == 0 && a.Role == booking.RoleStaff {
		venueID = a.VenueID // a desk lists its own venue by default
	}
	bs, next, err := s.eng.VenueBookings(c.Request.Context(), a, engine.BookingQuery{VenueID: venueID, Date: date,
		Status: c.Query("status"), ResourceID: resourceID, Cursor: c.Query("cursor"), Limit: limit})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(bs, next, toBookingResponse))
}

func (s *server) getBooking(c *gin.Context) {
	if b, ok := s.pathBooking(c); ok {
		c.JSON(http.StatusOK, toBookingResponse(b))
	}
}

// pathBooking reads the booking the path names, as the caller may see it (the engine's read rule:
// owner, the venue's staff, admin); false when it answered an error instead.
func (s *server) pathBooking(c *gin.Context) (booking.Booking, bool) {
	id, ok := s.pathID(c)
	if !ok {
		return booking.Booking{}, false
	}
	b, err := s.eng.GetBooking(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return booking.Booking{}, false
	}
	return b, true
}

func (s *server) bookingHistory(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	hs, err := s.eng.History(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(hs, "", toHistoryResponse))
}

func (s *server) cancelBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.CancelBooking(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (s *server) restoreBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.Restore(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

type checkinRequest struct {
	CheckinCode *string `json:"checkin_code"`
}

func (s *server) checkIn(c *gin.Context) {
	var req checkinRequest
	if !s.bind(c, &req) {
		return
	}
	if err := required("checkin_code", req.CheckinCode != nil); err != nil {
		s.fail(c, err)
		return
	}
	b, err := s.eng.CheckIn(c.Request.Context(), actorOf(c), *req.CheckinCode)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}
