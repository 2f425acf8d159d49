package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/engine"
)

// The edits of a venue's catalog (PATCH: a field left out, or null, keeps its value) and the reads
// the console's forms start from.

type venuePatch struct {
	Name *string `json:"name"`
}

func (rt *catalogAdminRoutes) updateVenue(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req venuePatch
	if !rt.Bind(c, &req) {
		return
	}
	v, err := rt.catalog.UpdateVenue(c.Request.Context(), auth.Actor(c), id, engine.VenueChange(req))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toVenueResponse(v))
}

type resourcePatch struct {
	Name           *string `json:"name"`
	Kind           *string `json:"kind"`
	Category       *string `json:"category"`
	Capacity       *int    `json:"capacity"`
	PriceCents     *int64  `json:"price_cents"`
	Status         *string `json:"status"`
	CancelAffected bool    `json:"cancel_affected"`
}

func (rt *catalogAdminRoutes) updateResource(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req resourcePatch
	if !rt.Bind(c, &req) {
		return
	}
	r, err := rt.catalog.UpdateResource(c.Request.Context(), auth.Actor(c), id, engine.ResourceChange(req))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toResourceResponse(r))
}

type servicePatch struct {
	Name       *string `json:"name"`
	PriceCents *int64  `json:"price_cents"`
	Status     *string `json:"status"`
}

func (rt *catalogAdminRoutes) updateService(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req servicePatch
	if !rt.Bind(c, &req) {
		return
	}
	s, err := rt.catalog.UpdateService(c.Request.Context(), auth.Actor(c), id, engine.ServiceChange(req))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toServiceResponse(s))
}

func (rt *catalogAdminRoutes) getSchedule(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	s, err := rt.catalog.Schedule(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toScheduleResponse(s))
}

func (rt *catalogAdminRoutes) listGracePolicies(c *gin.Context) {
	gs, err := rt.catalog.ListGracePolicies(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(gs, "", toGracePolicyResponse))
}
