package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
)

// opsRoutes are the operations page's routes: what falls due and what failed, and the task
// queue's retrying and dead-letter tasks with their re-drive. Admin only (the engine checks).
type opsRoutes struct {
	request.Reader
	eng *engine.Engine
}

type queueCountResponse struct {
	Queue     string `json:"queue"`
	Pending   int    `json:"pending"`
	Active    int    `json:"active"`
	Scheduled int    `json:"scheduled"`
	Retry     int    `json:"retry"`
	Archived  int    `json:"archived"`
	Completed int    `json:"completed"`
}

type slotAlertResponse struct {
	ResourceID string `json:"resource_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
	Capacity   int    `json:"capacity"`
	Occupied   int    `json:"occupied"`
}

type operationsResponse struct {
	Now              string               `json:"now"`
	DueSoon          []bookingResponse    `json:"releases_due_soon"`
	Overdue          []bookingResponse    `json:"releases_overdue"`
	Queues           []queueCountResponse `json:"queues"`
	FailedRefunds    int64                `json:"failed_refunds"`
	FailedDeliveries int64                `json:"failed_deliveries"`
	OverCapacity     []slotAlertResponse  `json:"slots_over_capacity"`
	RefusedByLedger  []refundResponse     `json:"refunds_capacity_refused"`
}

type taskResponse struct {
	Queue         string `json:"queue"`
	TaskID        string `json:"task_id"`
	Type          string `json:"type"`
	State         string `json:"state"`
	BookingID     string `json:"booking_id,omitempty"`
	ReleaseAt     string `json:"release_at,omitempty"`
	Subject       string `json:"subject,omitempty"`
	Retried       int    `json:"retried"`
	MaxRetry      int    `json:"max_retry"`
	LastError     string `json:"last_error"`
	LastFailedAt  string `json:"last_failed_at,omitempty"`
	NextProcessAt string `json:"next_process_at,omitempty"`
}

type redriveResponse struct {
	Task    taskResponse `json:"task"`
	Done    bool         `json:"done"`
	Outcome string       `json:"outcome,omitempty"`
	Error   string       `json:"error,omitempty"`
}

func optionalTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t.UTC())
}

func toTaskResponse(t engine.Task) taskResponse {
	out := taskResponse{Queue: t.Queue, TaskID: t.ID, Type: t.Type, State: t.State, Subject: t.Subject,
		Retried: t.Retried, MaxRetry: t.MaxRetry, LastError: t.LastError,
		LastFailedAt: optionalTime(t.LastFailedAt), NextProcessAt: optionalTime(t.NextProcessAt)}
	if t.BookingID != 0 {
		out.BookingID, out.ReleaseAt = formatID(t.BookingID), optionalTime(t.ReleaseAt)
	}
	return out
}

func (rt *opsRoutes) operations(c *gin.Context) {
	venueID, ok := rt.QueryID(c, "venue_id")
	if !ok {
		return
	}
	o, err := rt.eng.Operations(c.Request.Context(), auth.Actor(c), venueID)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	out := operationsResponse{Now: formatTime(o.Now.UTC()), DueSoon: convertAll(o.DueSoon, toBookingResponse),
		Overdue: convertAll(o.Overdue, toBookingResponse), Queues: []queueCountResponse{},
		FailedRefunds: o.FailedRefunds, FailedDeliveries: o.FailedDeliveries, OverCapacity: []slotAlertResponse{},
		RefusedByLedger: o.RefusedByLedger}
	if out.RefusedByLedger == nil {
		out.RefusedByLedger = []refundResponse{}
	}
	for _, q := range o.Queues {
		out.Queues = append(out.Queues, queueCountResponse{Queue: q.Queue, Pending: q.Pending, Active: q.Active,
			Scheduled: q.Scheduled, Retry: q.Retry, Archived: q.Archived, Completed: q.Complete})
	}
	for _, s := range o.OverCapacity {
		out.OverCapacity = append(out.OverCapacity, slotAlertResponse{ResourceID: formatID(s.ResourceID),
			Start: formatTime(s.Start.UTC()), End: formatTime(s.End.UTC()), Capacity: s.Capacity, Occupied: s.Occupied})
	}
	c.JSON(http.StatusOK, out)
}

func (rt *opsRoutes) tasks(c *gin.Context) {
	limit, ok := rt.QueryLimit(c)
	if !ok {
		return
	}
	ts, err := rt.eng.Tasks(c.Request.Context(), auth.Actor(c), c.Query("state"), limit)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ts, "", toTaskResponse))
}

func (rt *opsRoutes) redrive(c *gin.Context) {
	if !rt.BindEmpty(c) {
		return
	}
	r, err := rt.eng.RedriveTask(c.Request.Context(), auth.Actor(c), c.Param("queue"), c.Param("task_id"))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, redriveResponse{Task: toTaskResponse(r.Task), Done: r.Done, Outcome: r.Outcome, Error: r.Error})
}

// userRoutes are the back office's routes of one guest: their no-show standing, and lifting a
// freeze.
type userRoutes struct {
	request.Reader
	holds *engine.Holds
}

type standingResponse struct {
	UserID       string `json:"user_id"`
	Noshows      int    `json:"noshows"`
	Counted      int    `json:"counted_noshows"`
	Frozen       bool   `json:"frozen"`
	FrozenUntil  string `json:"frozen_until,omitempty"`
	PardonedAt   string `json:"pardoned_at,omitempty"`
	PardonedBy   string `json:"pardoned_by,omitempty"`
	PardonReason string `json:"pardon_reason,omitempty"`
}

func toStandingResponse(s engine.UserStanding) standingResponse {
	out := standingResponse{UserID: s.UserID, Noshows: s.Noshows, Counted: s.Counted, Frozen: !s.FrozenUntil.IsZero()}
	if out.Frozen {
		out.FrozenUntil = formatTime(s.FrozenUntil.UTC())
	}
	if p := s.Pardon; p != nil {
		out.PardonedAt, out.PardonedBy, out.PardonReason = formatTime(p.PardonedAt.UTC()), p.Actor, p.Reason
	}
	return out
}

// pathUser is the user id the path names; false when it answered 404 instead (not a user id).
func (rt *userRoutes) pathUser(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !auth.ValidUserID(id) {
		rt.Fail(c, answer.ErrNotFound)
		return "", false
	}
	return id, true
}

func (rt *userRoutes) getUser(c *gin.Context) {
	id, ok := rt.pathUser(c)
	if !ok {
		return
	}
	s, err := rt.holds.UserStanding(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toStandingResponse(s))
}

func (rt *userRoutes) unfreeze(c *gin.Context) {
	id, ok := rt.pathUser(c)
	if !ok {
		return
	}
	var req decisionRequest
	if !rt.Bind(c, &req) {
		return
	}
	s, err := rt.holds.Unfreeze(c.Request.Context(), auth.Actor(c), id, req.Reason)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toStandingResponse(s))
}
