package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
)

// headerSignature carries a payment notification's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>". Several v1 entries may be sent
// while the provider rotates secrets; one must match.
const headerSignature = "X-Slotwheel-Signature"

// The failures of a payment notification.
var (
	errBadSignature   = answer.NewError(http.StatusUnauthorized, "bad_signature", "the payment notification's signature is wrong")
	errStaleSignature = answer.NewError(http.StatusUnauthorized, "stale_signature", "the payment notification's timestamp is over 5 minutes off")
	errInvalidHoldID  = answer.Unprocessable("invalid_hold_id", "hold_id is not a hold id").WithField("hold_id")
)

// signatureTolerance is how far a notification's timestamp may be from now.
const signatureTolerance = 5 * time.Minute

// Sign computes the X-Slotwheel-Signature value of body at t, as the payment provider does. It is
// exported for tools and tests that play the provider.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signature(secret, ts, body))
}

func signature(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature checks header against body: a bad or missing signature is bad_signature; an
// authentic one whose timestamp is over 5 minutes from now is stale_signature, so that a captured
// notification cannot be replayed later.
func verifySignature(secret []byte, header string, body []byte, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errBadSignature
	}
	want := signature(secret, ts, body)
	match := false
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			match = true
		}
	}
	if !match {
		return errBadSignature
	}
	if d := now.Sub(time.Unix(unix, 0)); d > signatureTolerance || d < -signatureTolerance {
		return errStaleSignature
	}
	return nil
}

// paymentRoutes take the signed notifications of the payment provider.
type paymentRoutes struct {
	request.Reader
	payments *engine.Payments
	secret   []byte           // HMAC secret of the notifications
	now      func() time.Time // checks the notification's timestamp
}

type paymentRequest struct {
	HoldID      *string       `json:"hold_id"`
	PaymentID   *string       `json:"payment_id"`
	AmountCents *int64        `json:"amount_cents"`
	PaidAt      *request.Time `json:"paid_at"`
}

// paymentNotify records a signed payment notification. A repeated payment_id is answered as the first
// time by the engine; the provider gets a 2xx for a refund outcome too, since it retries anything
// else.
func (rt *paymentRoutes) paymentNotify(c *gin.Context) {
	raw := request.Body(c)
	if err := verifySignature(rt.secret, c.GetHeader(headerSignature), raw, rt.now()); err != nil {
		rt.Fail(c, err)
		return
	}
	var req paymentRequest
	if !rt.Bind(c, &req) {
		return
	}
	errs := []error{request.Required("payment_id", req.PaymentID != nil), request.Required("amount_cents", req.AmountCents != nil)}
	if req.HoldID == nil {
		errs = append(errs, request.Missing("hold_id"))
	} else if !answer.SaneToken(*req.HoldID, 64) {
		// Only the characters are checked: a well-formed id the engine does not know is still
		// recorded (for refund), since the money was taken.
		errs = append(errs, errInvalidHoldID)
	}
	if req.PaidAt == nil {
		errs = append(errs, request.Missing("paid_at"))
	}
	if err := request.FirstError(errs...); err != nil {
		rt.Fail(c, err)
		return
	}
	res, err := rt.payments.Pay(c.Request.Context(), engine.PaymentNotice{
		HoldID:      *req.HoldID,
		PaymentID:   *req.PaymentID,
		AmountCents: *req.AmountCents,
		PaidAt:      req.PaidAt.Time,
	})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toPaymentResponse(res))
}
