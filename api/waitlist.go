package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// waitlistRoutes are a user's places on waitlists.
type waitlistRoutes struct {
	request.Reader
	holds *engine.Holds
}

type waitlistRequest struct {
	ResourceID *request.ID   `json:"resource_id"`
	Start      *request.Time `json:"start"`
	End        *request.Time `json:"end"`
	Quantity   *int          `json:"quantity"`
}

func (rt *waitlistRoutes) joinWaitlist(c *gin.Context) {
	var req waitlistRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(request.Required("resource_id", req.ResourceID != nil), request.Required("start", req.Start != nil),
		request.Required("end", req.End != nil)); err != nil {
		rt.Fail(c, err)
		return
	}
	q := request.Deref(req.Quantity)
	if req.Quantity != nil && q == 0 {
		q = -1 // an explicit 0 is out of range, not "the default"
	}
	w, err := rt.holds.JoinWaitlist(c.Request.Context(), engine.WaitlistRequest{UserID: auth.Actor(c).UserID,
		ResourceID: uint64(*req.ResourceID), Start: req.Start.Time, End: req.End.Time, Quantity: q})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toWaitlistResponse(w))
}

func (rt *waitlistRoutes) listWaitlist(c *gin.Context) {
	ws, err := rt.holds.ListWaitlist(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ws, "", toWaitlistResponse))
}

func (rt *waitlistRoutes) leaveWaitlist(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	w, err := rt.holds.LeaveWaitlist(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWaitlistResponse(w))
}

// A waitlist entry is shown as engine/wire writes it, as holds and bookings are (convert.go).
type waitlistResponse = wire.Waitlist

func toWaitlistResponse(w booking.WaitlistEntry) waitlistResponse { return wire.FromWaitlist(w) }
