package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
)

type holdRequest struct {
	ResourceID *jsonID           `json:"resource_id"`
	ServiceID  *jsonID           `json:"service_id"`
	Start      *jsonTime         `json:"start"`
	End        *jsonTime         `json:"end"`
	Quantity   *int              `json:"quantity"`
	Resources  map[string]jsonID `json:"resources"`
}

func (s *server) createHold(c *gin.Context) {
	var req holdRequest
	if !s.bind(c, &req) {
		return
	}
	errs := []error{required("start", req.Start != nil)}
	if req.ServiceID == nil {
		// A service's duration decides its end; a resource hold names both.
		errs = append(errs, required("resource_id", req.ResourceID != nil), required("end", req.End != nil))
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	hr := engine.HoldRequest{UserID: actorOf(c).UserID, Start: req.Start.Time, Quantity: deref(req.Quantity)}
	if req.Quantity != nil && *req.Quantity == 0 {
		hr.Quantity = -1 // an explicit 0 is out of range, not "the default"
	}
	if req.End != nil {
		hr.End = req.End.Time
	}
	if req.ResourceID != nil {
		hr.ResourceID = uint64(*req.ResourceID)
	}
	if req.ServiceID != nil {
		hr.ServiceID = uint64(*req.ServiceID)
	}
	if len(req.Resources) > 0 {
		hr.Resources = make(map[string]uint64, len(req.Resources))
		for role, id := range req.Resources {
			hr.Resources[role] = uint64(id)
		}
	}
	h, err := s.eng.Hold(c.Request.Context(), hr)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toHoldResponse(h))
}

func (s *server) listHolds(c *gin.Context) {
	hs, err := s.eng.ListHolds(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(hs, "", toHoldResponse))
}

func (s *server) getHold(c *gin.Context) {
	id, ok := s.pathHoldID(c)
	if !ok {
		return
	}
	h, err := s.eng.GetHold(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

func (s *server) cancelHold(c *gin.Context) {
	id, ok := s.pathHoldID(c)
	if !ok {
		return
	}
	h, err := s.eng.CancelHold(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

// confirmHold stands in for a payment in trials; it does not exist unless dev payments are on.
func (s *server) confirmHold(c *gin.Context) {
	if !s.opts.DevPayments {
		s.fail(c, errNotFound)
		return
	}
	id, ok := s.pathHoldID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.Confirm(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toBookingResponse(b))
}
