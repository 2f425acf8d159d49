package api

import (
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// Response shapes. They are the contract: snake_case, ids as strings, times RFC 3339 in the venue's
// offset, money in integer cents. Engine types cross into them only through the to*Response
// converters below, so that a change inside the engine does not ripple into the API.

// formatID writes an id as the API shows it.
var formatID = wire.ID

// formatTime writes a time as the API shows it: RFC 3339 in the time's own zone, which for booking
// times is the venue's.
var formatTime = wire.Time

// convertAll converts every element; never nil, so an empty list encodes as [].
func convertAll[E, R any](in []E, conv func(E) R) []R {
	out := make([]R, 0, len(in))
	for _, e := range in {
		out = append(out, conv(e))
	}
	return out
}

type venueResponse struct {
	VenueID     string `json:"venue_id"`
	Name        string `json:"name"`
	Timezone    string `json:"timezone"`
	ReleaseMode string `json:"release_mode"`
	CreatedAt   string `json:"created_at,omitempty"`
}

func toVenueResponse(v engine.Venue) venueResponse {
	r := venueResponse{VenueID: formatID(v.ID), Name: v.Name, Timezone: v.Timezone, ReleaseMode: v.ReleaseMode}
	if !v.CreatedAt.IsZero() {
		r.CreatedAt = formatTime(v.CreatedAt)
	}
	return r
}

type resourceResponse struct {
	ResourceID  string `json:"resource_id"`
	VenueID     string `json:"venue_id"`
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Capacity    int    `json:"capacity"`
	Category    string `json:"category"`
	PriceCents  int64  `json:"price_cents"`
	Status      string `json:"status"`
	SlotMinutes int    `json:"slot_minutes"`
	CreatedAt   string `json:"created_at,omitempty"`
}

func toResourceResponse(r engine.Resource) resourceResponse {
	out := resourceResponse{
		ResourceID:  formatID(r.ID),
		VenueID:     formatID(r.VenueID),
		Name:        r.Name,
		Kind:        r.Kind,
		Capacity:    r.Capacity,
		Category:    r.Category,
		PriceCents:  r.PriceCents,
		Status:      r.Status,
		SlotMinutes: r.SlotMinutes,
	}
	if !r.CreatedAt.IsZero() {
		out.CreatedAt = formatTime(r.CreatedAt)
	}
	return out
}

type weeklyRuleJSON struct {
	Weekdays []int  `json:"weekdays"`
	Open     string `json:"open"`
	Close    string `json:"close"`
}

type exceptionJSON struct {
	Date   string `json:"date"`
	Closed bool   `json:"closed,omitempty"`
	Open   string `json:"open,omitempty"`
	Close  string `json:"close,omitempty"`
}

type scheduleResponse struct {
	ResourceID     string           `json:"resource_id"`
	SlotMinutes    int              `json:"slot_minutes"`
	Weekly         []weeklyRuleJSON `json:"weekly"`
	Exceptions     []exceptionJSON  `json:"exceptions"`
	HorizonDays    int              `json:"horizon_days"`
	GeneratedUntil string           `json:"generated_until,omitempty"`
}

func toScheduleResponse(s engine.Schedule) scheduleResponse {
	out := scheduleResponse{
		ResourceID:     formatID(s.ResourceID),
		SlotMinutes:    s.SlotMinutes,
		Weekly:         make([]weeklyRuleJSON, 0, len(s.Weekly)),
		Exceptions:     make([]exceptionJSON, 0, len(s.Exceptions)),
		HorizonDays:    s.HorizonDays,
		GeneratedUntil: s.GeneratedUntil,
	}
	for _, w := range s.Weekly {
		out.Weekly = append(out.Weekly, weeklyRuleJSON{Weekdays: nonNilInts(w.Weekdays), Open: w.Open, Close: w.Close})
	}
	for _, e := range s.Exceptions {
		out.Exceptions = append(out.Exceptions, exceptionJSON{Date: e.Date, Closed: e.Closed, Open: e.Open, Close: e.Close})
	}
	return out
}

type serviceResponse struct {
	ServiceID       string            `json:"service_id"`
	VenueID         string            `json:"venue_id"`
	Name            string            `json:"name"`
	DurationMinutes int               `json:"duration_minutes"`
	PrepMinutes     int               `json:"prep_minutes"`
	CleanupMinutes  int               `json:"cleanup_minutes"`
	ResourceIDs     []string          `json:"resource_ids"`
	Roles           []serviceRoleJSON `json:"roles,omitempty"`
	PriceCents      int64             `json:"price_cents"`
	Status          string            `json:"status"`
	CreatedAt       string            `json:"created_at,omitempty"`
}

type serviceRoleJSON struct {
	Role        string   `json:"role"`
	ResourceIDs []string `json:"resource_ids"`
}

func toServiceResponse(s engine.Service) serviceResponse {
	out := serviceResponse{
		ServiceID:       formatID(s.ID),
		VenueID:         formatID(s.VenueID),
		Name:            s.Name,
		DurationMinutes: s.DurationMinutes,
		PrepMinutes:     s.PrepMinutes,
		CleanupMinutes:  s.CleanupMinutes,
		ResourceIDs:     make([]string, 0, len(s.ResourceIDs)),
		PriceCents:      s.PriceCents,
		Status:          s.Status,
	}
	for _, id := range s.ResourceIDs {
		out.ResourceIDs = append(out.ResourceIDs, formatID(id))
	}
	for _, r := range s.Roles {
		out.Roles = append(out.Roles, serviceRoleJSON{Role: r.Role, ResourceIDs: convertAll(r.ResourceIDs, formatID)})
	}
	if !s.CreatedAt.IsZero() {
		out.CreatedAt = formatTime(s.CreatedAt)
	}
	return out
}

type peakRuleJSON struct {
	Weekdays     []int  `json:"weekdays"`
	From         string `json:"from"`
	To           string `json:"to"`
	GraceSeconds int    `json:"grace_seconds"`
}

type gracePolicyResponse struct {
	Category     string         `json:"category"`
	GraceSeconds int            `json:"grace_seconds"`
	Peak         []peakRuleJSON `json:"peak"`
}

func toGracePolicyResponse(g engine.GracePolicy) gracePolicyResponse {
	out := gracePolicyResponse{Category: g.Category, GraceSeconds: g.GraceSeconds, Peak: make([]peakRuleJSON, 0, len(g.Peak))}
	for _, p := range g.Peak {
		out.Peak = append(out.Peak, peakRuleJSON{Weekdays: nonNilInts(p.Weekdays), From: p.From, To: p.To, GraceSeconds: p.GraceSeconds})
	}
	return out
}

type slotResponse struct {
	Start     string `json:"start"`
	End       string `json:"end"`
	Available bool   `json:"available"`
	Remaining int    `json:"remaining"`
	Reason    string `json:"reason,omitempty"`
	// ResourceID is the slot's resource; a service with roles answers each start once, without one.
	ResourceID string `json:"resource_id,omitempty"`
}

type availabilityResponse struct {
	Slots []slotResponse `json:"slots"`
}

func toSlotResponse(s engine.SlotAvailability) slotResponse {
	out := slotResponse{
		Start:     formatTime(s.Start),
		End:       formatTime(s.End),
		Available: s.Available,
		Remaining: s.Remaining,
	}
	if s.ResourceID != 0 {
		out.ResourceID = formatID(s.ResourceID)
	}
	if !s.Available {
		out.Reason = s.Reason
	}
	return out
}

func toAvailabilityResponse(slots []engine.SlotAvailability) availabilityResponse {
	return availabilityResponse{Slots: convertAll(slots, toSlotResponse)}
}

func nonNilInts(in []int) []int {
	if in == nil {
		return []int{}
	}
	return in
}
