package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// Booking rules and money (docs/API.md "Booking rules" and "Payments with WeChat Pay"): resource
// policies, the no-show freeze, reschedules, refunds and the WeChat Pay routes.

// ruleRoutes are the routes of docs/API.md's "Booking rules" and "Payments with WeChat Pay".
type ruleRoutes struct {
	request.Reader
	catalog  *engine.Catalog  // resource and no-show policies
	bookings *engine.Bookings // reschedules
	payments *engine.Payments // refunds and WeChat Pay
}

type policyJSON struct {
	MinNoticeMinutes        *int  `json:"min_notice_minutes"`
	MaxDaysAhead            *int  `json:"max_days_ahead"`
	CancelCutoffMinutes     *int  `json:"cancel_cutoff_minutes"`
	CancelRefundPercent     *int  `json:"cancel_refund_percent"`
	LateCancelRefundPercent *int  `json:"late_cancel_refund_percent"`
	NoshowRefundPercent     *int  `json:"noshow_refund_percent"`
	RescheduleCutoffMinutes *int  `json:"reschedule_cutoff_minutes"`
	MaxReschedules          *int  `json:"max_reschedules"`
	RequiresApproval        *bool `json:"requires_approval"`
	ApprovalWindowMinutes   *int  `json:"approval_window_minutes"`
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
	RequiresApproval        bool   `json:"requires_approval"`
	ApprovalWindowMinutes   int    `json:"approval_window_minutes"` // the window in force
}

func toPolicyResponse(p engine.Policy) policyResponse {
	mins := func(d interface{ Minutes() float64 }) int { return int(d.Minutes()) }
	return policyResponse{ResourceID: formatID(p.ResourceID), MinNoticeMinutes: mins(p.MinNotice), MaxDaysAhead: p.MaxDaysAhead,
		CancelCutoffMinutes: mins(p.CancelCutoff), CancelRefundPercent: p.CancelRefund, LateCancelRefundPercent: p.LateCancelRefund,
		NoshowRefundPercent: p.NoshowRefund, RescheduleCutoffMinutes: mins(p.RescheduleCutoff), MaxReschedules: p.MaxReschedules,
		RequiresApproval: p.RequiresApproval, ApprovalWindowMinutes: mins(p.EffectiveApprovalWindow())}
}

func (rt *ruleRoutes) setPolicy(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req policyJSON
	if !rt.Bind(c, &req) {
		return
	}
	p, err := rt.catalog.SetResourcePolicy(c.Request.Context(), auth.Actor(c), id, booking.PolicyInput(req))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toPolicyResponse(p))
}

func (rt *ruleRoutes) getPolicy(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	p, err := rt.catalog.ResourcePolicy(c.Request.Context(), id)
	if err != nil {
		rt.Fail(c, err)
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

func (rt *ruleRoutes) setNoshowPolicy(c *gin.Context) {
	var req noshowPolicyJSON
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(request.Required("max_noshows", req.MaxNoshows != nil), request.Required("within_days", req.WithinDays != nil),
		request.Required("freeze_days", req.FreezeDays != nil)); err != nil {
		rt.Fail(c, err)
		return
	}
	p, err := rt.catalog.SetNoshowPolicy(c.Request.Context(), auth.Actor(c), booking.NoshowPolicyInput{MaxNoshows: *req.MaxNoshows,
		WithinDays: *req.WithinDays, FreezeDays: *req.FreezeDays})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, noshowPolicyResponse(p))
}

func (rt *ruleRoutes) getNoshowPolicy(c *gin.Context) {
	p, err := rt.catalog.NoshowPolicyView(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, noshowPolicyResponse(p))
}

type rescheduleRequest struct {
	Start      *request.Time      `json:"start"`
	End        *request.Time      `json:"end"`
	ResourceID request.OptionalID `json:"resource_id"`
}

func (rt *ruleRoutes) rescheduleBooking(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req rescheduleRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.Required("start", req.Start != nil); err != nil {
		rt.Fail(c, err)
		return
	}
	r := engine.RescheduleRequest{BookingID: id, Start: req.Start.Time, ResourceID: uint64(req.ResourceID)}
	if req.End != nil {
		r.End = req.End.Time
	}
	b, err := rt.bookings.Reschedule(c.Request.Context(), auth.Actor(c), r)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (rt *ruleRoutes) listRefunds(c *gin.Context) {
	limit, ok := rt.QueryLimit(c)
	if !ok {
		return
	}
	rs, next, err := rt.payments.ListRefunds(c.Request.Context(), auth.Actor(c), c.Query("status"), c.Query("cursor"), limit)
	if err != nil {
		rt.Fail(c, err)
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
func (rt *ruleRoutes) wechatPayParams(c *gin.Context) {
	id, ok := rt.PathHoldID(c)
	if !ok || !rt.BindEmpty(c) {
		return
	}
	p, err := rt.payments.WechatPayParams(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
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
func (rt *ruleRoutes) wechatPayNotify(c *gin.Context) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, request.MaxBody))
	if err != nil {
		c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, wechatPayFail{Code: "FAIL", Message: "body too large"})
		return
	}
	err = rt.payments.WechatPayNotify(c.Request.Context(), c.Request.Header, body)
	if err == nil {
		c.Status(http.StatusNoContent)
		return
	}
	status, code, fallback, _, _ := answer.Classify(err)
	if errors.Is(err, booking.ErrNotificationRefused) {
		status = http.StatusUnauthorized
	}
	if status >= 500 {
		rt.Log.ErrorContext(c.Request.Context(), "wechat pay notification failed", "request_id", answer.RequestIDOf(c), "err", err)
		c.Header("Retry-After", "5")
	} else {
		rt.Log.WarnContext(c.Request.Context(), "wechat pay notification refused", "request_id", answer.RequestIDOf(c), "code", code, "err", err)
	}
	c.AbortWithStatusJSON(status, wechatPayFail{Code: "FAIL", Message: code + ": " + fallback})
}
