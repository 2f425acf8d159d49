package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

type venueRequest struct {
	Name     *string `json:"name"`
	Timezone *string `json:"timezone"`
}

func (s *server) createVenue(c *gin.Context) {
	var req venueRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(required("name", req.Name != nil), required("timezone", req.Timezone != nil)); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.eng.CreateVenue(c.Request.Context(), actorOf(c), engine.VenueInput{Name: *req.Name, Timezone: *req.Timezone})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toVenueResponse(v))
}

type resourceRequest struct {
	VenueID    *jsonID `json:"venue_id"`
	Name       *string `json:"name"`
	Kind       *string `json:"kind"`
	Capacity   *int    `json:"capacity"`
	Category   string  `json:"category"`
	PriceCents *int64  `json:"price_cents"`
}

func (s *server) createResource(c *gin.Context) {
	var req resourceRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(
		required("venue_id", req.VenueID != nil),
		required("name", req.Name != nil),
		required("kind", req.Kind != nil),
		required("capacity", req.Capacity != nil),
		required("price_cents", req.PriceCents != nil),
	); err != nil {
		s.fail(c, err)
		return
	}
	r, err := s.eng.CreateResource(c.Request.Context(), actorOf(c), engine.ResourceInput{
		VenueID: uint64(*req.VenueID), Name: *req.Name, Kind: *req.Kind, Capacity: *req.Capacity,
		Category: req.Category, PriceCents: *req.PriceCents,
	})
	if err != nil {
		s.fail(c, err)
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

func (s *server) setSchedule(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	var req scheduleRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(required("slot_minutes", req.SlotMinutes != nil), required("weekly", req.Weekly != nil)); err != nil {
		s.fail(c, err)
		return
	}
	horizon := booking.DefaultHorizonDays
	if req.HorizonDays != nil {
		horizon = *req.HorizonDays
	}
	sched, err := s.eng.ChangeSchedule(c.Request.Context(), actorOf(c), id, engine.ScheduleChange{
		ScheduleInput: booking.ScheduleInput{SlotMinutes: *req.SlotMinutes, Weekly: *req.Weekly, Exceptions: req.Exceptions,
			HorizonDays: horizon},
		CancelAffected: req.CancelAffected,
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toScheduleResponse(sched))
}

type serviceRequest struct {
	VenueID         *jsonID              `json:"venue_id"`
	Name            *string              `json:"name"`
	DurationMinutes *int                 `json:"duration_minutes"`
	PrepMinutes     int                  `json:"prep_minutes"`
	CleanupMinutes  int                  `json:"cleanup_minutes"`
	ResourceIDs     *[]jsonID            `json:"resource_ids"`
	Roles           []serviceRoleRequest `json:"roles"`
	PriceCents      *int64               `json:"price_cents"`
}

type serviceRoleRequest struct {
	Role        string   `json:"role"`
	ResourceIDs []jsonID `json:"resource_ids"`
}

func (s *server) createService(c *gin.Context) {
	var req serviceRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(
		required("venue_id", req.VenueID != nil),
		required("name", req.Name != nil),
		required("duration_minutes", req.DurationMinutes != nil),
		required("resource_ids", req.ResourceIDs != nil || req.Roles != nil),
		required("price_cents", req.PriceCents != nil),
	); err != nil {
		s.fail(c, err)
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
	svc, err := s.eng.CreateService(c.Request.Context(), actorOf(c), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toServiceResponse(svc))
}

func ids(in []jsonID) []uint64 {
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

func (s *server) setGracePolicy(c *gin.Context) {
	var req gracePolicyRequest
	if !s.bind(c, &req) {
		return
	}
	errs := []error{required("category", req.Category != nil), required("grace_seconds", req.GraceSeconds != nil)}
	in := engine.GracePolicy{Category: deref(req.Category), GraceSeconds: deref(req.GraceSeconds)}
	for _, p := range req.Peak {
		errs = append(errs, required("peak.grace_seconds", p.GraceSeconds != nil))
		in.Peak = append(in.Peak, booking.PeakRule{Weekdays: p.Weekdays, From: p.From, To: p.To, GraceSeconds: deref(p.GraceSeconds)})
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	g, err := s.eng.SetGracePolicy(c.Request.Context(), actorOf(c), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toGracePolicyResponse(g))
}
