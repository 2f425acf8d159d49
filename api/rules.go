package api

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// Booking rules and money (docs/API.md "Booking rules" and "Payments with WeChat Pay"): resource
// policies, the no-show freeze, reschedules, refunds and the WeChat Pay routes.

type policyJSON struct {
	MinNoticeMinutes        *int `json:"min_notice_minutes"`
	MaxDaysAhead            *int `json:"max_days_ahead"`
	CancelCutoffMinutes     *int `json:"cancel_cutoff_minutes"`
	CancelRefundPercent     *int `json:"cancel_refund_percent"`
	LateCancelRefundPercent *int `json:"late_cancel_refund_percent"`
	NoshowRefundPercent     *int `json:"noshow_refund_percent"`
	RescheduleCutoffMinutes *int `json:"reschedule_cutoff_minutes"`
	MaxReschedules          *int `json:"max_reschedules"`
}

type policyResponse struct {
	ResourceID              string `json:"resource_id"`
	MinNoticeMinutes        int    `json:"min_notice_minutes"`
	MaxDaysAhead            int    `json:"max_days_ahead"` // 0: the schedule's horizon
	CancelCutoffMinutes     int    `json:"cancel_cutoff_minutes"`
	CancelRefundPercent     int    `json:"cancel_refund_percent"`
	LateCancelRefundPercent int    `json:"late_cancel_refund_percent"`
	NoshowRefundPercent     int    `json:"noshow_refund_percent"`
	RescheduleCutoffMinutes int    `json:"reschedule_cutoff_minutes"`
	MaxReschedules          int    `json:"max_reschedules"`
}

func toPolicyResponse(p engine.Policy) policyResponse {
	mins := func(d interface{ Minutes() float64 }) int { return int(d.Minutes()) }
	return policyResponse{ResourceID: formatID(p.ResourceID), MinNoticeMinutes: mins(p.MinNotice), MaxDaysAhead: p.MaxDaysAhead,
		CancelCutoffMinutes: mins(p.CancelCutoff), CancelRefundPercent: p.CancelRefund, LateCancelRefundPercent: p.LateCancelRefund,
		NoshowRefundPercent: p.NoshowRefund, RescheduleCutoffMinutes: mins(p.RescheduleCutoff), MaxReschedules: p.MaxReschedules}
}

func (s *server) setPolicy(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	var req policyJSON
	if !s.bind(c, &req) {
		return
	}
	p, err := s.eng.SetResourcePolicy(c.Request.Context(), actorOf(c), id, booking.PolicyInput(req))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toPolicyResponse(p))
}

func (s *server) getPolicy(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	p, err := s.eng.ResourcePolicy(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toPolicyResponse(p))
}

type noshowPolicyJSON struct {
	MaxNoshows *int `json:"max_noshows"`
	WithinDays *int `json:"within_days"`
	FreezeDays *int `json:"freeze_days"`
}

type noshowPolicyResponse struct {
	Enabled    bool `json:"enabled"`
	MaxNoshows int  `json:"max_noshows"`
	WithinDays int  `json:"within_days"`
	FreezeDays int  `json:"freeze_days"`
}

func (s *server) setNoshowPolicy(c *gin.Context) {
	var req noshowPolicyJSON
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(required("max_noshows", req.MaxNoshows != nil), required("within_days", req.WithinDays != nil),
		required("freeze_days", req.FreezeDays != nil)); err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.eng.SetNoshowPolicy(c.Request.Context(), actorOf(c), booking.NoshowPolicyInput{MaxNoshows: *req.MaxNoshows,
		WithinDays: *req.WithinDays, FreezeDays: *req.FreezeDays})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, noshowPolicyResponse(p))
}

func (s *server) getNoshowPolicy(c *gin.Context) {
	p, err := s.eng.NoshowPolicyView(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, noshowPolicyResponse(p))
}

type rescheduleRequest struct {
	Start      *jsonTime  `json:"start"`
	End        *jsonTime  `json:"end"`
	ResourceID optionalID `json:"resource_id"`
}

func (s *server) rescheduleBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	var req rescheduleRequest
	if !s.bind(c, &req) {
		return
	}
	if err := required("start", req.Start != nil); err != nil {
		s.fail(c, err)
		return
	}
	r := engine.RescheduleRequest{BookingID: id, Start: req.Start.Time, ResourceID: uint64(req.ResourceID)}
	if req.End != nil {
		r.End = req.End.Time
	}
	b, err := s.eng.Reschedule(c.Request.Context(), actorOf(c), r)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (s *server) listRefunds(c *gin.Context) {
	limit, ok := s.queryLimit(c)
	if !ok {
		return
	}
	rs, next, err := s.eng.ListRefunds(c.Request.Context(), actorOf(c), c.Query("status"), c.Query("cursor"), limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, listResponse[refundResponse]{Items: nonNil(rs), NextCursor: next})
}

func nonNil[T any](in []T) []T {
	if in == nil {
		return []T{}
	}
	return in
}

// wechatPayParams answers what wx.requestPayment takes, in WeChat's own camelCase.
func (s *server) wechatPayParams(c *gin.Context) {
	id, ok := s.pathHoldID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	p, err := s.eng.WechatPayParams(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

// wechatPayFail is WeChat Pay's own answer to a notification it must not consider handled.
type wechatPayFail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wechatPayNotify takes every WeChat Pay notification (payments and refunds). It answers 204 once the
// notification is durably handled; WeChat's body {"code": "FAIL"} otherwise: 4xx for one that cannot
// be verified or decrypted (it changes nothing), 5xx when a backend is away (WeChat retries).
func (s *server) wechatPayNotify(c *gin.Context) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, wechatPayFail{Code: "FAIL", Message: "body too large"})
		return
	}
	err = s.eng.WechatPayNotify(c.Request.Context(), c.Request.Header, body)
	if err == nil {
		c.Status(http.StatusNoContent)
		return
	}
	status, code, fallback, _, _ := classify(err)
	if errors.Is(err, booking.ErrNotificationRefused) {
		status = http.StatusUnauthorized
	}
	if status >= 500 {
		s.log.ErrorContext(c.Request.Context(), "wechat pay notification failed", "request_id", requestIDOf(c), "err", err)
		c.Header("Retry-After", "5")
	} else {
		s.log.WarnContext(c.Request.Context(), "wechat pay notification refused", "request_id", requestIDOf(c), "code", code, "err", err)
	}
	c.AbortWithStatusJSON(status, wechatPayFail{Code: "FAIL", Message: code + ": " + fallback})
}

// rateLimit answers 429 rate_limited to a client address over SLOTWHEEL_RATE_LIMIT_PER_IP, counted in
// Redis so that every instance applies the same number.
// Payment providers' notifications are exempt: a provider is one address sending for every payer,
// and refusing it would only make it retry.
func (s *server) rateLimit(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/api/v1/payments/") {
		return
	}
	if err := s.eng.AllowRequest(c.Request.Context(), c.ClientIP()); err != nil {
		s.fail(c, err)
	}
}
