package api

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
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
	hr, err := holdRequestOf(c)
	key, keyed, kerr := idempotencyKeyOf(c)
	switch {
	case kerr != nil:
		s.fail(c, kerr)
		return
	case keyed:
		s.createHoldOnce(c, hr, key, err)
		return
	case err != nil:
		s.fail(c, err)
		return
	}
	h, err := s.eng.Hold(c.Request.Context(), hr)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusCreated, contentTypeJSON, holdJSON(toHoldResponse(h)))
}

// createHoldOnce is createHold with an Idempotency-Key: the engine keeps the record, written by the
// hold's own script (one round trip), and answers what to send — the first answer again for a
// repeat. badInput is the request's own failure, answered (and recorded) as the engine's would be.
func (s *server) createHoldOnce(c *gin.Context, hr engine.HoldRequest, key string, badInput error) {
	sum := sha256.Sum256(bodyOf(c))
	k := engine.IdempotentHold{Scope: idempotencyScope(callerOf(c), c.Request.Method, c.Request.URL.Path, key),
		Hash: hex.EncodeToString(sum[:]), Answer: func(h booking.Hold, err error) idem.Response {
			if err != nil {
				a, _ := s.errorAnswer(c, err)
				return a
			}
			return idem.Response{Status: http.StatusCreated, Body: holdJSON(toHoldResponse(h))}
		}}
	ctx := c.Request.Context()
	var a idem.Response
	var replayed bool
	var err error
	if badInput != nil {
		a, replayed, err = s.eng.AnswerOnce(ctx, k, badInput)
	} else {
		a, replayed, err = s.eng.HoldOnce(ctx, hr, k)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if replayed {
		c.Header(headerReplayed, "true")
	}
	send(c, a, "")
}

// holdRequestOf reads a hold's request; the error names what is wrong with it.
func holdRequestOf(c *gin.Context) (engine.HoldRequest, error) {
	var req holdRequest
	if err := decodeHoldRequest(bodyOf(c), &req); err != nil {
		return engine.HoldRequest{}, err
	}
	errs := []error{required("start", req.Start != nil)}
	if req.ServiceID == nil {
		// A service's duration decides its end; a resource hold names both.
		errs = append(errs, required("resource_id", req.ResourceID != nil), required("end", req.End != nil))
	}
	if err := firstError(errs...); err != nil {
		return engine.HoldRequest{}, err
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
	return hr, nil
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

// decodeHoldRequest is decodeStrict(raw, &req) for a hold's body. The bodies clients send — an
// object of resource_id, service_id, start, end and quantity, each once, ids and times in strings
// without escapes, a small quantity — are read by hand (holdFields), at a fraction of
// encoding/json's cost; anything else, the errors above all, goes through decodeStrict, so that
// what is refused and how stays the same (holds_test holds the two to that).
func decodeHoldRequest(raw []byte, req *holdRequest) error {
	if holdFields(raw, req) {
		return nil
	}
	*req = holdRequest{}
	return decodeStrict(raw, req)
}

// holdFields reads raw into req when raw is a body decodeStrict would accept whose every field is
// one it writes the same way; false when it is not sure (req is then left half written).
func holdFields(raw []byte, req *holdRequest) bool {
	vals := new(struct {
		res, svc   jsonID
		start, end jsonTime
		qty        int
	})
	return plainObject(raw, func(key string, i int) (int, bool) {
		switch key {
		case "resource_id":
			return plainOnce(raw, i, &req.ResourceID, &vals.res, idOf)
		case "service_id":
			return plainOnce(raw, i, &req.ServiceID, &vals.svc, idOf)
		case "start":
			return plainOnce(raw, i, &req.Start, &vals.start, timeOf)
		case "end":
			return plainOnce(raw, i, &req.End, &vals.end, timeOf)
		case "quantity":
			n, j, ok := plainUint(raw, i, 9) // fits an int
			if !ok || req.Quantity != nil {
				return 0, false
			}
			vals.qty, req.Quantity = int(n), &vals.qty
			return j, true
		}
		return 0, false
	})
}
