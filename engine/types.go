package engine

import (
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Venue is a place with an IANA time zone.
type Venue struct {
	ID          uint64
	Name        string
	Timezone    string
	ReleaseMode string // on, off or dry_run
	CreatedAt   time.Time
}

// VenueInput creates a venue.
type VenueInput struct {
	Name     string
	Timezone string
}

// Resource is something sold by the slot.
type Resource struct {
	ID          uint64
	VenueID     uint64
	Name        string
	Kind        string
	Capacity    int
	Category    string
	PriceCents  int64
	Status      string
	SlotMinutes int // 0 until a schedule is set
	CreatedAt   time.Time
}

// ResourceInput creates a resource.
type ResourceInput struct {
	VenueID    uint64
	Name       string
	Kind       string
	Capacity   int
	Category   string
	PriceCents int64
}

// Schedule is a resource's opening rules.
type Schedule struct {
	ResourceID     uint64
	SlotMinutes    int
	Weekly         []booking.WeeklyRule
	Exceptions     []booking.ScheduleException
	HorizonDays    int
	GeneratedUntil string // first venue-local date without inventory
}

// ScheduleChange asks for new opening rules. CancelAffected cancels (as an admin cancels) the
// confirmed bookings that the new hours would no longer hold, instead of refusing the change.
type ScheduleChange struct {
	booking.ScheduleInput
	CancelAffected bool
}

// Service is what a customer books on one of several resources.
type Service struct {
	ID              uint64
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64      // every resource that delivers it
	Roles           []ServiceRole // a service that needs several resources at once; nil otherwise
	PriceCents      int64
	CreatedAt       time.Time
}

// ServiceRole is one role of a service that needs several resources at once (a counsellor and a
// room): a hold takes one of its resources.
type ServiceRole struct {
	Role        string
	ResourceIDs []uint64
}

// ServiceInput creates a service.
type ServiceInput struct {
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64      // any one of them delivers it, or
	Roles           []ServiceRole // one of every role's
	PriceCents      int64
}

// GracePolicy is how long after start a no-show keeps its slot, for resources of one category.
type GracePolicy struct {
	Category     string
	GraceSeconds int
	Peak         []booking.PeakRule
}

// AvailabilityQuery asks for one venue-local day of a resource, or of a service (optionally on one
// of its resources).
type AvailabilityQuery struct {
	ResourceID uint64
	ServiceID  uint64
	Date       string // YYYY-MM-DD, venue-local
}

// SlotAvailability is one bookable start of a day. Times are in the venue's zone.
type SlotAvailability struct {
	Start      time.Time
	End        time.Time
	ResourceID uint64
	Available  bool
	Remaining  int
	Reason     string
}

// HoldRequest takes units for a user: either a resource window (ResourceID, Start, End) or a service
// at Start on one of its resources (ServiceID, ResourceID, Start). Quantity 0 means 1.
type HoldRequest struct {
	UserID     string
	ResourceID uint64
	ServiceID  uint64
	Start      time.Time
	End        time.Time
	Quantity   int
	// Resources names, for a service with roles, the resource to take for some roles; the others
	// get the first of the role's resources with room.
	Resources map[string]uint64

	once *holdOnce // HoldOnce's idempotency step
}

// PaymentNotice is a verified payment notification from the provider.
type PaymentNotice struct {
	HoldID      string
	PaymentID   string
	AmountCents int64
	PaidAt      time.Time
	// Provider took the money: models.ProviderNotify (the default) or models.ProviderWechatPay, whose
	// refunds the engine can request itself.
	Provider string

	user string // the hold's owner, when its record was read
}

// Payment outcomes.
const (
	OutcomeBooked = "booked"
	OutcomeRefund = "refund"
)

// PaymentResult says what a payment became: a booking, or a refund because the hold expired and its
// units were taken.
type PaymentResult struct {
	Outcome   string
	PaymentID string
	HoldID    string
	Booking   *booking.Booking
}

// ReconcileReport counts what a reconciliation found and repaired.
type ReconcileReport struct {
	OverdueReleased   int
	OwnersAdded       int
	OwnersRemoved     int
	CounterDrift      int
	HoldsRequeued     int
	HoldsSettled      int
	TasksScheduled    int
	InventoryDays     int
	ConfirmingResumed int
	// HoldsRefused are live holds ended because Redis counted their slots over capacity (it had lost
	// writes, and let them through on units that bookings own).
	HoldsRefused int
	// LedgerRepaired are slots whose capacity-ledger count differed from their bookings' units.
	LedgerRepaired int
	// SlotsOverCapacity are slots whose occupying bookings take more units than they have: an
	// oversell, reported (and alerted on), never hidden. A finding, not a repair.
	SlotsOverCapacity int
}

// WaitlistRequest asks to wait for units of a resource window.
type WaitlistRequest struct {
	UserID     string
	ResourceID uint64
	Start      time.Time
	End        time.Time
	Quantity   int
}

// HistoryEntry is one status change of a booking. At is in the venue's zone.
type HistoryEntry struct {
	From, To string
	At       time.Time
	Actor    string
	Reason   string
}

// BookingQuery selects a venue's bookings for the front desk.
type BookingQuery struct {
	VenueID    uint64
	Date       string // venue-local YYYY-MM-DD of the start, optional
	Status     string // optional
	ResourceID uint64 // optional
	Cursor     string
	Limit      int
}
