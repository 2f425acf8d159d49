package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// catalogAdminRoutes are the admin's routes that shape the catalog: venues, resources, their
// schedules, services, grace policies and release modes.
type catalogAdminRoutes struct {
	request.Reader
	catalog *engine.Catalog
}

type venueRequest struct {
	Name     *string `json:"name"`
	Timezone *string `json:"timezone"`
}

func (rt *catalogAdminRoutes) createVenue(c *gin.Context) {
	var req venueRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(request.Required("name", req.Name != nil), request.Required("timezone", req.Timezone != nil)); err != nil {
		rt.Fail(c, err)
		return
	}
	v, err := rt.catalog.CreateVenue(c.Request.Context(), auth.Actor(c), engine.VenueInput{Name: *req.Name, Timezone: *req.Timezone})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toVenueResponse(v))
}

type resourceRequest struct {
	VenueID    *request.ID `json:"venue_id"`
	Name       *string     `json:"name"`
	Kind       *string     `json:"kind"`
	Capacity   *int        `json:"capacity"`
	Category   string      `json:"category"`
	PriceCents *int64      `json:"price_cents"`
}

func (rt *catalogAdminRoutes) createResource(c *gin.Context) {
	var req resourceRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(
		request.Required("venue_id", req.VenueID != nil),
		request.Required("name", req.Name != nil),
		request.Required("kind", req.Kind != nil),
		request.Required("capacity", req.Capacity != nil),
		request.Required("price_cents", req.PriceCents != nil),
	); err != nil {
		rt.Fail(c, err)
		return
	}
	r, err := rt.catalog.CreateResource(c.Request.Context(), auth.Actor(c), engine.ResourceInput{
		VenueID: uint64(*req.VenueID), Name: *req.Name, Kind: *req.Kind, Capacity: *req.Capacity,
		Category: req.Category, PriceCents: *req.PriceCents,
	})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toResourceResponse(r))
}

type scheduleRequest struct {
	SlotMinutes    *int                        `json:"slot_minutes"`
	Weekly         *[]booking.WeeklyRule       `json:"weekly"`
	Exceptions     []booking.ScheduleException `json:"exceptions"`
	HorizonDays    *int                        `json:"horizon_days"`
	CancelAffected bool                        `json:"cancel_affected"`
}

func (rt *catalogAdminRoutes) setSchedule(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req scheduleRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(request.Required("slot_minutes", req.SlotMinutes != nil), request.Required("weekly", req.Weekly != nil)); err != nil {
		rt.Fail(c, err)
		return
	}
	horizon := booking.DefaultHorizonDays
	if req.HorizonDays != nil {
		horizon = *req.HorizonDays
	}
	sched, err := rt.catalog.ChangeSchedule(c.Request.Context(), auth.Actor(c), id, engine.ScheduleChange{
		ScheduleInput: booking.ScheduleInput{SlotMinutes: *req.SlotMinutes, Weekly: *req.Weekly, Exceptions: req.Exceptions,
			HorizonDays: horizon},
		CancelAffected: req.CancelAffected,
	})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toScheduleResponse(sched))
}

type serviceRequest struct {
	VenueID         *request.ID          `json:"venue_id"`
	Name            *string              `json:"name"`
	DurationMinutes *int                 `json:"duration_minutes"`
	PrepMinutes     int                  `json:"prep_minutes"`
	CleanupMinutes  int                  `json:"cleanup_minutes"`
	ResourceIDs     *[]request.ID        `json:"resource_ids"`
	Roles           []serviceRoleRequest `json:"roles"`
	PriceCents      *int64               `json:"price_cents"`
}

type serviceRoleRequest struct {
	Role        string       `json:"role"`
	ResourceIDs []request.ID `json:"resource_ids"`
}

func (rt *catalogAdminRoutes) createService(c *gin.Context) {
	var req serviceRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(
		request.Required("venue_id", req.VenueID != nil),
		request.Required("name", req.Name != nil),
		request.Required("duration_minutes", req.DurationMinutes != nil),
		request.Required("resource_ids", req.ResourceIDs != nil || req.Roles != nil),
		request.Required("price_cents", req.PriceCents != nil),
	); err != nil {
		rt.Fail(c, err)
		return
	}
	in := engine.ServiceInput{VenueID: uint64(*req.VenueID), Name: *req.Name, DurationMinutes: *req.DurationMinutes,
		PrepMinutes: req.PrepMinutes, CleanupMinutes: req.CleanupMinutes, PriceCents: *req.PriceCents}
	if req.ResourceIDs != nil {
		in.ResourceIDs = ids(*req.ResourceIDs)
	}
	for _, r := range req.Roles {
		in.Roles = append(in.Roles, engine.ServiceRole{Role: r.Role, ResourceIDs: ids(r.ResourceIDs)})
	}
	if req.Roles != nil && len(req.Roles) == 0 {
		in.Roles = []engine.ServiceRole{{}} // an explicit empty list is refused by the engine, not taken for "none"
	}
	svc, err := rt.catalog.CreateService(c.Request.Context(), auth.Actor(c), in)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toServiceResponse(svc))
}

func ids(in []request.ID) []uint64 {
	out := make([]uint64, len(in))
	for i, id := range in {
		out[i] = uint64(id)
	}
	return out
}

type peakRuleRequest struct {
	Weekdays     []int  `json:"weekdays"`
	From         string `json:"from"`
	To           string `json:"to"`
	GraceSeconds *int   `json:"grace_seconds"`
}

type gracePolicyRequest struct {
	Category     *string           `json:"category"`
	GraceSeconds *int              `json:"grace_seconds"`
	Peak         []peakRuleRequest `json:"peak"`
}

func (rt *catalogAdminRoutes) setGracePolicy(c *gin.Context) {
	var req gracePolicyRequest
	if !rt.Bind(c, &req) {
		return
	}
	errs := []error{request.Required("category", req.Category != nil), request.Required("grace_seconds", req.GraceSeconds != nil)}
	in := engine.GracePolicy{Category: request.Deref(req.Category), GraceSeconds: request.Deref(req.GraceSeconds)}
	for _, p := range req.Peak {
		errs = append(errs, request.Required("peak.grace_seconds", p.GraceSeconds != nil))
		in.Peak = append(in.Peak, booking.PeakRule{Weekdays: p.Weekdays, From: p.From, To: p.To, GraceSeconds: request.Deref(p.GraceSeconds)})
	}
	if err := request.FirstError(errs...); err != nil {
		rt.Fail(c, err)
		return
	}
	g, err := rt.catalog.SetGracePolicy(c.Request.Context(), auth.Actor(c), in)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toGracePolicyResponse(g))
}

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
