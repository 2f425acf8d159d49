// Package wire is the JSON shape of what slotwheel shows its clients — a booking, a hold, a waitlist
// entry — written once, so that an API answer and the event announcing a change carry the same
// document. Ids are strings (a JavaScript client cannot hold a 64-bit number) and times RFC 3339 in
// the venue's offset (the values it converts are already in the venue's zone). It imports only
// engine/booking.
package wire

import (
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// ID writes an id as the API shows it.
func ID(v uint64) string { return strconv.FormatUint(v, 10) }

// Time writes a time as the API shows it: RFC 3339 in the time's own zone.
func Time(t time.Time) string { return t.Format(time.RFC3339) }

// TimePtr writes an optional time; "" when it is unset.
func TimePtr(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return Time(*t)
}

// Booking is a booking as GET /api/v1/bookings/{id} answers it.
type Booking struct {
	BookingID   string `json:"booking_id"`
	HoldID      string `json:"hold_id"`
	Status      string `json:"status"`
	UserID      string `json:"user_id"`
	VenueID     string `json:"venue_id"`
	ResourceID  string `json:"resource_id"`
	ServiceID   string `json:"service_id,omitempty"`
	Quantity    int    `json:"quantity"`
	Start       string `json:"start"`
	End         string `json:"end"`
	ReleaseAt   string `json:"release_at"`
	ConfirmedAt string `json:"confirmed_at"`
	CheckedInAt string `json:"checked_in_at,omitempty"`
	ReleasedAt  string `json:"released_at,omitempty"`
	CancelledAt string `json:"cancelled_at,omitempty"`
	CheckinCode string `json:"checkin_code"`
	// ApprovalDeadline is, while the booking is PENDING_APPROVAL, when it is declined unless staff
	// approve it first (its release_at until then).
	ApprovalDeadline string `json:"approval_deadline,omitempty"`
	PaymentID        string `json:"payment_id,omitempty"`
	AmountCents      int64  `json:"amount_cents"`
	Version          int    `json:"version"`
	// Resources are a multi-resource service's resources by role.
	Resources map[string]string `json:"resources,omitempty"`
}

// FromBooking converts a booking whose times are in the venue's zone.
func FromBooking(b booking.Booking) Booking {
	out := Booking{
		BookingID: ID(b.ID), HoldID: b.HoldID, Status: string(b.Status), UserID: b.UserID, VenueID: ID(b.VenueID),
		ResourceID: ID(b.ResourceID), Quantity: b.Quantity, Start: Time(b.Start), End: Time(b.End),
		ReleaseAt: Time(b.ReleaseAt), ConfirmedAt: Time(b.ConfirmedAt), CheckedInAt: TimePtr(b.CheckedInAt),
		ReleasedAt: TimePtr(b.ReleasedAt), CancelledAt: TimePtr(b.CancelledAt), CheckinCode: b.CheckinCode,
		PaymentID: b.PaymentID, AmountCents: b.AmountCents, Version: b.Version, Resources: roles(b.Roles),
	}
	if b.ServiceID != 0 {
		out.ServiceID = ID(b.ServiceID)
	}
	if at, ok := b.ApprovalDeadline(); ok {
		out.ApprovalDeadline = Time(at)
	}
	return out
}

func roles(rs []booking.RoleResource) map[string]string {
	if len(rs) == 0 {
		return nil
	}
	out := make(map[string]string, len(rs))
	for _, r := range rs {
		out[r.Role] = ID(r.ResourceID)
	}
	return out
}

// Hold is a hold as GET /api/v1/holds/{id} answers it.
type Hold struct {
	HoldID      string `json:"hold_id"`
	Status      string `json:"status"`
	UserID      string `json:"user_id"`
	VenueID     string `json:"venue_id"`
	ResourceID  string `json:"resource_id"`
	ServiceID   string `json:"service_id,omitempty"`
	Quantity    int    `json:"quantity"`
	Start       string `json:"start"`
	End         string `json:"end"`
	ExpiresAt   string `json:"expires_at"`
	AmountCents int64  `json:"amount_cents"`
	BookingID   string `json:"booking_id,omitempty"`
	// Resources are a multi-resource service's resources by role.
	Resources map[string]string `json:"resources,omitempty"`
}

// FromHold converts a hold whose times are in the venue's zone.
func FromHold(h booking.Hold) Hold {
	out := Hold{HoldID: h.ID, Status: string(h.Status), UserID: h.UserID, VenueID: ID(h.VenueID), ResourceID: ID(h.ResourceID),
		Quantity: h.Quantity, Start: Time(h.Start), End: Time(h.End), ExpiresAt: Time(h.ExpiresAt), AmountCents: h.AmountCents,
		Resources: roles(h.Roles)}
	if h.ServiceID != 0 {
		out.ServiceID = ID(h.ServiceID)
	}
	if h.BookingID != 0 {
		out.BookingID = ID(h.BookingID)
	}
	return out
}

// Waitlist is a waitlist entry as the API shows it.
type Waitlist struct {
	WaitlistID string `json:"waitlist_id"`
	Status     string `json:"status"`
	UserID     string `json:"user_id"`
	VenueID    string `json:"venue_id"`
	ResourceID string `json:"resource_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
	Quantity   int    `json:"quantity"`
	HoldID     string `json:"hold_id,omitempty"`
	CreatedAt  string `json:"created_at"`
}

// FromWaitlist converts an entry whose times are in the venue's zone.
func FromWaitlist(w booking.WaitlistEntry) Waitlist {
	return Waitlist{WaitlistID: ID(w.ID), Status: string(w.Status), UserID: w.UserID, VenueID: ID(w.VenueID),
		ResourceID: ID(w.ResourceID), Start: Time(w.Start), End: Time(w.End), Quantity: w.Quantity, HoldID: w.HoldID,
		CreatedAt: Time(w.CreatedAt)}
}

// Event is the body of an event as webhooks deliver it (docs/API.md "Events and webhooks"). Data is
// the subject as the API shows it, plus previous_status for a booking's transition.
type Event struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// EventID is the stable id of the outbox row id, the same on every delivery attempt.
func EventID(outboxID uint64) string { return "evt_" + ID(outboxID) }

// BookingChange is the data of a booking's transition event.
type BookingChange struct {
	Booking
	PreviousStatus string `json:"previous_status,omitempty"`
}

// Refund is a refund as GET /api/v1/admin/refunds lists it and refund.* events carry it.
type Refund struct {
	RefundID         string  `json:"refund_id"`
	BookingID        *string `json:"booking_id"` // nil: a payment that never became a booking
	HoldID           string  `json:"hold_id"`
	PaymentID        string  `json:"payment_id"`
	Provider         string  `json:"provider"`
	PaidCents        int64   `json:"paid_cents"`
	AmountCents      int64   `json:"amount_cents"`
	Reason           string  `json:"reason"`
	Status           string  `json:"status"`
	ProviderRefundID string  `json:"provider_refund_id"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}
