package engine

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/models"
)

// Roles of an Actor, as carried by the JWT.
const (
	RoleUser  = "user"
	RoleStaff = "staff"
	RoleAdmin = "admin"
)

// Actor is who is asking. The engine, not the API, decides what an actor may see and change.
type Actor struct {
	UserID  string
	Role    string
	VenueID uint64 // staff only: the venue they work at
}

// System is the actor of the engine's own work (release, reconcile).
var System = Actor{UserID: "system", Role: RoleAdmin}

// Venue is a place with an IANA time zone.
type Venue struct {
	ID        uint64
	Name      string
	Timezone  string
	CreatedAt time.Time
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

// WeeklyRule opens a resource on some ISO weekdays (1 = Monday … 7 = Sunday) between venue-local
// times Open and Close ("HH:MM"; Close may be "24:00").
type WeeklyRule struct {
	Weekdays []int  `json:"weekdays"`
	Open     string `json:"open"`
	Close    string `json:"close"`
}

// ScheduleException overrides the weekly rules on one venue-local date: closed all day, or open
// between Open and Close only.
type ScheduleException struct {
	Date   string `json:"date"`
	Closed bool   `json:"closed,omitempty"`
	Open   string `json:"open,omitempty"`
	Close  string `json:"close,omitempty"`
}

// ScheduleInput sets a resource's opening rules; inventory is generated for HorizonDays ahead.
type ScheduleInput struct {
	SlotMinutes int
	Weekly      []WeeklyRule
	Exceptions  []ScheduleException
	HorizonDays int
}

// Schedule is a resource's opening rules.
type Schedule struct {
	ResourceID     uint64
	SlotMinutes    int
	Weekly         []WeeklyRule
	Exceptions     []ScheduleException
	HorizonDays    int
	GeneratedUntil string // first venue-local date without inventory
}

// Service is what a customer books on one of several resources.
type Service struct {
	ID              uint64
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64
	PriceCents      int64
	CreatedAt       time.Time
}

// ServiceInput creates a service.
type ServiceInput struct {
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64
	PriceCents      int64
}

// PeakRule overrides the grace on some weekdays between venue-local From and To ("HH:MM"), judged
// by the booking's start.
type PeakRule struct {
	Weekdays     []int  `json:"weekdays"`
	From         string `json:"from"`
	To           string `json:"to"`
	GraceSeconds int    `json:"grace_seconds"`
}

// GracePolicy is how long after start a no-show keeps its slot, for resources of one category.
type GracePolicy struct {
	Category     string
	GraceSeconds int
	Peak         []PeakRule
}

// AvailabilityQuery asks for one venue-local day of a resource, or of a service (optionally on one
// of its resources).
type AvailabilityQuery struct {
	ResourceID uint64
	ServiceID  uint64
	Date       string // YYYY-MM-DD, venue-local
}

// Slot reasons for not being available.
const (
	ReasonFull           = "full"
	ReasonClosed         = "closed"
	ReasonPast           = "past"
	ReasonBufferConflict = "buffer_conflict"
	ReasonTooSoon        = "too_soon"
	ReasonTooFar         = "too_far"
)

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
}

// Hold statuses; holds live in Redis only.
const (
	HoldHeld       = "HELD"
	HoldConfirming = "CONFIRMING"
	HoldConfirmed  = "CONFIRMED"
	HoldExpired    = "EXPIRED"
	HoldCancelled  = "CANCELLED"
)

// Hold is a user's unpaid claim on units, until ExpiresAt. Times are in the venue's zone.
type Hold struct {
	ID          string
	UserID      string
	VenueID     uint64
	ResourceID  uint64
	ServiceID   uint64
	Quantity    int
	Status      string
	Start       time.Time
	End         time.Time
	OccupyStart time.Time
	OccupyEnd   time.Time
	ExpiresAt   time.Time
	CreatedAt   time.Time
	AmountCents int64
	BookingID   uint64 // once confirmed
}

// PaymentNotice is a verified payment notification from the provider.
type PaymentNotice struct {
	HoldID      string
	PaymentID   string
	AmountCents int64
	PaidAt      time.Time
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
	Booking   *Booking
}

// Booking is a durable, confirmed booking. Times are in the venue's zone.
type Booking struct {
	ID          uint64
	HoldID      string
	UserID      string
	VenueID     uint64
	ResourceID  uint64
	ServiceID   uint64
	Quantity    int
	Status      string
	Version     int
	Start       time.Time
	End         time.Time
	OccupyStart time.Time
	OccupyEnd   time.Time
	ReleaseAt   time.Time
	ConfirmedAt time.Time
	CheckedInAt *time.Time
	ReleasedAt  *time.Time
	CancelledAt *time.Time
	CheckinCode string
	PaymentID   string
	AmountCents int64
}

// ReleaseRef names one scheduled release: a booking and the release_at it was scheduled for. A
// restored booking gets a new release_at and so a new ref; tasks of the old one do nothing.
type ReleaseRef struct {
	BookingID uint64
	ReleaseAt time.Time
}

// ReleaseScheduler puts release tasks into the durable queue. jobs/ implements it; the engine calls
// it when a booking's release_at comes within the horizon and when a booking no longer needs one.
type ReleaseScheduler interface {
	ScheduleRelease(ctx context.Context, ref ReleaseRef) error
	CancelRelease(ctx context.Context, ref ReleaseRef) error
}

// ReleaseOutcome says what Release did.
type ReleaseOutcome string

// Release outcomes.
const (
	Released        ReleaseOutcome = "released"         // CONFIRMED → RELEASED now
	AlreadyReleased ReleaseOutcome = "already_released" // a duplicate delivery
	NotApplicable   ReleaseOutcome = "not_applicable"   // checked in, cancelled, restored or rescheduled
)

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
}

// StoredResponse is the first answer to an idempotent request.
type StoredResponse struct {
	Status int
	Body   []byte
}

// WaitlistRequest asks to wait for units of a resource window.
type WaitlistRequest struct {
	UserID     string
	ResourceID uint64
	Start      time.Time
	End        time.Time
	Quantity   int
}

// Waitlist statuses.
const (
	WaitWaiting   = models.WaitWaiting
	WaitPromoted  = models.WaitPromoted
	WaitCancelled = models.WaitCancelled
	WaitExpired   = models.WaitExpired
)

// WaitlistEntry is a user waiting for a window; once promoted, HoldID names the hold made for them.
// Times are in the venue's zone.
type WaitlistEntry struct {
	ID         uint64
	UserID     string
	VenueID    uint64
	ResourceID uint64
	Status     string
	Start      time.Time
	End        time.Time
	Quantity   int
	HoldID     string
	CreatedAt  time.Time
}
