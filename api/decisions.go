package api

import (
	"bytes"
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

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
		if len(bytes.TrimSpace(request.Body(c))) > 0 && !rt.Bind(c, dst) {
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
