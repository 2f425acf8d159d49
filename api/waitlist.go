package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
)

type waitlistRequest struct {
	ResourceID *jsonID   `json:"resource_id"`
	Start      *jsonTime `json:"start"`
	End        *jsonTime `json:"end"`
	Quantity   *int      `json:"quantity"`
}

func (s *server) joinWaitlist(c *gin.Context) {
	var req waitlistRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(required("resource_id", req.ResourceID != nil), required("start", req.Start != nil),
		required("end", req.End != nil)); err != nil {
		s.fail(c, err)
		return
	}
	q := deref(req.Quantity)
	if req.Quantity != nil && q == 0 {
		q = -1 // an explicit 0 is out of range, not "the default"
	}
	w, err := s.eng.JoinWaitlist(c.Request.Context(), engine.WaitlistRequest{UserID: actorOf(c).UserID,
		ResourceID: uint64(*req.ResourceID), Start: req.Start.Time, End: req.End.Time, Quantity: q})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toWaitlistResponse(w))
}

func (s *server) listWaitlist(c *gin.Context) {
	ws, err := s.eng.ListWaitlist(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ws, "", toWaitlistResponse))
}

func (s *server) leaveWaitlist(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	w, err := s.eng.LeaveWaitlist(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWaitlistResponse(w))
}
