package api

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
)

// holdRoutes are a user's holds: made, listed, read and given up; and, in trials, confirmed without
// a payment.
type holdRoutes struct {
	request.Reader
	holds       *engine.Holds
	payments    *engine.Payments // Confirm, when devPayments
	devPayments bool
}

type holdRequest struct {
	ResourceID *request.ID           `json:"resource_id"`
	ServiceID  *request.ID           `json:"service_id"`
	Start      *request.Time         `json:"start"`
	End        *request.Time         `json:"end"`
	Quantity   *int                  `json:"quantity"`
	Resources  map[string]request.ID `json:"resources"`
}

func (rt *holdRoutes) createHold(c *gin.Context) {
	hr, err := holdRequestOf(c)
	key, keyed, kerr := idempotencyKeyOf(c)
	switch {
	case kerr != nil:
		rt.Fail(c, kerr)
		return
	case keyed:
		rt.createHoldOnce(c, hr, key, err)
		return
	case err != nil:
		rt.Fail(c, err)
		return
	}
	h, err := rt.holds.Hold(c.Request.Context(), hr)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.Data(http.StatusCreated, answer.ContentTypeJSON, answer.HoldJSON(toHoldResponse(h)))
}

// createHoldOnce is createHold with an Idempotency-Key: the engine keeps the record, written by the
// hold's own script (one round trip), and answers what to send — the first answer again for a
// repeat. badInput is the request's own failure, answered (and recorded) as the engine's would be.
func (rt *holdRoutes) createHoldOnce(c *gin.Context, hr engine.HoldRequest, key string, badInput error) {
	sum := sha256.Sum256(request.Body(c))
	k := engine.IdempotentHold{Scope: idempotencyScope(auth.Caller(c), c.Request.Method, c.Request.URL.Path, key),
		Hash: hex.EncodeToString(sum[:]), Answer: func(h booking.Hold, err error) idem.Response {
			if err != nil {
				a, _ := rt.ErrorAnswer(c, err)
				return a
			}
			return idem.Response{Status: http.StatusCreated, Body: answer.HoldJSON(toHoldResponse(h))}
		}}
	ctx := c.Request.Context()
	var a idem.Response
	var replayed bool
	var err error
	if badInput != nil {
		a, replayed, err = rt.holds.AnswerOnce(ctx, k, badInput)
	} else {
		a, replayed, err = rt.holds.HoldOnce(ctx, hr, k)
	}
	if err != nil {
		rt.Fail(c, err)
		return
	}
	if replayed {
		c.Header(headerReplayed, "true")
	}
	answer.Send(c, a, "")
}

// holdRequestOf reads a hold's request; the error names what is wrong with it.
func holdRequestOf(c *gin.Context) (engine.HoldRequest, error) {
	var req holdRequest
	if err := decodeHoldRequest(request.Body(c), &req); err != nil {
		return engine.HoldRequest{}, err
	}
	errs := []error{request.Required("start", req.Start != nil)}
	if req.ServiceID == nil {
		// A service's duration decides its end; a resource hold names both.
		errs = append(errs, request.Required("resource_id", req.ResourceID != nil), request.Required("end", req.End != nil))
	}
	if err := request.FirstError(errs...); err != nil {
		return engine.HoldRequest{}, err
	}
	hr := engine.HoldRequest{UserID: auth.Actor(c).UserID, Start: req.Start.Time, Quantity: request.Deref(req.Quantity)}
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
	return hr, nil
}

func (rt *holdRoutes) listHolds(c *gin.Context) {
	hs, err := rt.holds.ListHolds(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(hs, "", toHoldResponse))
}

func (rt *holdRoutes) getHold(c *gin.Context) {
	id, ok := rt.PathHoldID(c)
	if !ok {
		return
	}
	h, err := rt.holds.GetHold(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

func (rt *holdRoutes) cancelHold(c *gin.Context) {
	id, ok := rt.PathHoldID(c)
	if !ok {
		return
	}
	h, err := rt.holds.CancelHold(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

// confirmHold stands in for a payment in trials; it does not exist unless dev payments are on.
func (rt *holdRoutes) confirmHold(c *gin.Context) {
	if !rt.devPayments {
		rt.Fail(c, answer.ErrNotFound)
		return
	}
	id, ok := rt.PathHoldID(c)
	if !ok || !rt.BindEmpty(c) {
		return
	}
	b, err := rt.payments.Confirm(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toBookingResponse(b))
}

// decodeHoldRequest is request.Decode(raw, &req) for a hold's body. The bodies clients send — an
// object of resource_id, service_id, start, end and quantity, each once, ids and times in strings
// without escapes, a small quantity — are read by hand (holdFields), at a fraction of
// encoding/json's cost; anything else, the errors above all, goes through request.Decode, so that
// what is refused and how stays the same (holds_test holds the two to that).
func decodeHoldRequest(raw []byte, req *holdRequest) error {
	if holdFields(raw, req) {
		return nil
	}
	*req = holdRequest{}
	return request.Decode(raw, req)
}

// holdFields reads raw into req when raw is a body request.Decode would accept whose every field is
// one it writes the same way; false when it is not sure (req is then left half written).
func holdFields(raw []byte, req *holdRequest) bool {
	vals := new(struct {
		res, svc   request.ID
		start, end request.Time
		qty        int
	})
	return request.PlainObject(raw, func(key string, i int) (int, bool) {
		switch key {
		case "resource_id":
			return request.PlainOnce(raw, i, &req.ResourceID, &vals.res, request.IDOf)
		case "service_id":
			return request.PlainOnce(raw, i, &req.ServiceID, &vals.svc, request.IDOf)
		case "start":
			return request.PlainOnce(raw, i, &req.Start, &vals.start, request.TimeOf)
		case "end":
			return request.PlainOnce(raw, i, &req.End, &vals.end, request.TimeOf)
		case "quantity":
			n, j, ok := request.PlainUint(raw, i, 9) // fits an int
			if !ok || req.Quantity != nil {
				return 0, false
			}
			vals.qty, req.Quantity = int(n), &vals.qty
			return j, true
		}
		return 0, false
	})
}
