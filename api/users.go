package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
)

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
