// Package models owns slotwheel's durable schema: the GORM structs that describe MySQL (and, in
// embedded mode, SQLite) tables, and the migration that creates or upgrades them. It holds no business
// rules and imports no other slotwheel package; engine/ is the only package that reads or writes it.
package models

import (
	"time"
)

// Venue is a place with its own IANA time zone; slot grids are laid out in venue-local time.
type Venue struct {
	ID       uint64 `gorm:"primaryKey"`
	Name     string `gorm:"size:200;not null"`
	Timezone string `gorm:"size:64;not null"`
	// ReleaseMode is on, off or dry_run; empty means the deployment's default.
	ReleaseMode string    `gorm:"size:16;not null;default:''"`
	CreatedAt   time.Time `gorm:"precision:3"`
}

// Resource (and service) statuses.
const (
	ResourceActive   = "active"
	ResourceDisabled = "disabled"
)

// Resource is something sold by the slot: a court, a desk, a counsellor. Capacity is the number of
// parallel units each slot has (beds, seats; 1 for a court).
type Resource struct {
	ID         uint64    `gorm:"primaryKey"`
	VenueID    uint64    `gorm:"not null;index"`
	Name       string    `gorm:"size:200;not null"`
	Kind       string    `gorm:"size:64;not null"`
	Capacity   int       `gorm:"not null"`
	Category   string    `gorm:"size:64;not null;default:''"`
	PriceCents int64     `gorm:"not null;default:0"`
	Status     string    `gorm:"size:16;not null;default:'active'"`
	CreatedAt  time.Time `gorm:"precision:3"`
	UpdatedAt  time.Time `gorm:"precision:3"`
}

// Schedule is a resource's weekly opening rules with dated exceptions. Weekly and Exceptions are JSON
// documents owned by engine/; SQL never looks inside them. GeneratedUntil is the first venue-local
// date whose inventory has not been generated yet.
type Schedule struct {
	ResourceID     uint64    `gorm:"primaryKey;autoIncrement:false"`
	SlotMinutes    int       `gorm:"not null"`
	Weekly         string    `gorm:"type:text;not null"`
	Exceptions     string    `gorm:"type:text;not null"`
	HorizonDays    int       `gorm:"not null"`
	GeneratedUntil string    `gorm:"size:10;not null;default:''"`
	UpdatedAt      time.Time `gorm:"precision:3"`
}

// SlotInventory is one generated slot of a resource: the durable truth of what can be sold. A slot
// that has no row is closed. Start and End are stored in UTC.
type SlotInventory struct {
	ResourceID uint64    `gorm:"primaryKey;autoIncrement:false"`
	Start      time.Time `gorm:"primaryKey;precision:3"`
	End        time.Time `gorm:"precision:3;not null"`
	Day        string    `gorm:"size:10;not null"` // venue-local date, the unit Redis loads
	Capacity   int       `gorm:"not null"`
	// Occupied is the capacity ledger: the units the slot's occupying bookings take, changed in the
	// transaction of every booking change that takes or gives units, and never raised past Capacity
	// by one (internal/sqlstore, ledger.go).
	Occupied int `gorm:"not null;default:0"`
}

// Service is what a customer books on one of several resources; preparation and clean-up buffers take
// units around the customer's window but are not shown to the customer.
type Service struct {
	ID              uint64 `gorm:"primaryKey"`
	VenueID         uint64 `gorm:"not null;index"`
	Name            string `gorm:"size:200;not null"`
	DurationMinutes int    `gorm:"not null"`
	PrepMinutes     int    `gorm:"not null;default:0"`
	CleanupMinutes  int    `gorm:"not null;default:0"`
	PriceCents      int64  `gorm:"not null;default:0"`
	// Status is active or disabled (ResourceActive, ResourceDisabled): a disabled service takes no
	// new holds.
	Status    string    `gorm:"size:16;not null;default:'active'"`
	CreatedAt time.Time `gorm:"precision:3"`
}

// ServiceResource links a service to a resource that can deliver it. A service that needs several
// resources at once names a Role for each link (counsellor, room): a hold takes one resource of
// every role; a service without roles takes one of its resources.
type ServiceResource struct {
	ServiceID  uint64 `gorm:"primaryKey;autoIncrement:false"`
	ResourceID uint64 `gorm:"primaryKey;autoIncrement:false;index"`
	Role       string `gorm:"size:64;not null;default:''"`
	Position   int    `gorm:"not null;default:0"` // the role's place in the service's order
}

// BookingResource is a resource a booking of a multi-resource service took for one of its roles,
// written with the booking: it keeps the booking's resources whatever later happens to the
// service's roles, and lets a resource find every booking that occupies it.
type BookingResource struct {
	BookingID  uint64 `gorm:"primaryKey;autoIncrement:false"`
	ResourceID uint64 `gorm:"primaryKey;autoIncrement:false;index"`
	Role       string `gorm:"size:64;not null"`
	Position   int    `gorm:"not null"`
}

// GracePolicy sets how long after start a no-show keeps its slot, per resource category, with peak
// windows (JSON, owned by engine/) that override it.
type GracePolicy struct {
	Category     string    `gorm:"primaryKey;size:64"`
	GraceSeconds int       `gorm:"not null"`
	Peak         string    `gorm:"type:text;not null"`
	UpdatedAt    time.Time `gorm:"precision:3"`
}

// Booking is a paid (confirmed) hold. It is never deleted. OccupyStart/OccupyEnd is the physical
// window (buffers included) whose units it takes while its status occupies capacity. Status holds
// an engine/booking status; the rules about it live there.
type Booking struct {
	ID          uint64     `gorm:"primaryKey"`
	HoldID      string     `gorm:"size:40;not null;uniqueIndex"`
	UserID      string     `gorm:"size:64;not null;index"`
	VenueID     uint64     `gorm:"not null;index:idx_booking_due,priority:1;index:idx_booking_queue,priority:2"`
	ResourceID  uint64     `gorm:"not null;index:idx_booking_resource_occupy,priority:1"`
	ServiceID   *uint64    ``
	Quantity    int        `gorm:"not null"`
	Start       time.Time  `gorm:"precision:3;not null"`
	End         time.Time  `gorm:"precision:3;not null"`
	OccupyStart time.Time  `gorm:"precision:3;not null;index:idx_booking_resource_occupy,priority:2"`
	OccupyEnd   time.Time  `gorm:"precision:3;not null"`
	Slots       string     `gorm:"type:text;not null"` // the slot fields whose units it takes
	Status      string     `gorm:"size:24;not null;index:idx_booking_status_release,priority:1"`
	Version     int        `gorm:"not null"`
	ReleaseAt   time.Time  `gorm:"precision:3;not null;index:idx_booking_status_release,priority:2;index:idx_booking_queue,priority:3"`
	ConfirmedAt time.Time  `gorm:"precision:3;not null"`
	CheckedInAt *time.Time `gorm:"precision:3"`
	ReleasedAt  *time.Time `gorm:"precision:3"`
	CancelledAt *time.Time `gorm:"precision:3"`
	CheckinCode string     `gorm:"size:16;not null;uniqueIndex"`
	PaymentID   *string    `gorm:"size:128"`
	AmountCents int64      `gorm:"not null"`
	// QueueAt is the release_at of a booking whose release task is not in the queue yet, and NULL once
	// it is (or once the booking no longer needs one): the loader's index holds only what is newly due.
	// The index covers the loader's query (queue_at, and the venue and release_at it reads).
	QueueAt *time.Time `gorm:"precision:3;index:idx_booking_queue,priority:1"`
	// DueAt is the release_at of a CONFIRMED booking whose release is still to be decided, NULL once
	// it was (released, or held back by the venue's release mode) or when it no longer can be: the
	// overdue sweep's index holds only undecided bookings.
	DueAt *time.Time `gorm:"precision:3;index:idx_booking_due,priority:2;index:idx_booking_due_any"`
	// ReleaseHeldAt is when the venue's release mode (off or dry_run) held the booking's release back;
	// such a booking stays CONFIRMED and is not released later.
	ReleaseHeldAt *time.Time `gorm:"precision:3"`
	// RemindAt is when the owner is reminded, NULL once reminded or when no reminder is due.
	RemindAt *time.Time `gorm:"precision:3;index"`
	// Reschedules counts the booking's moves to another window.
	Reschedules int       `gorm:"not null;default:0"`
	CreatedAt   time.Time `gorm:"precision:3"`
	UpdatedAt   time.Time `gorm:"precision:3"`
}

// BookingHistory is one status transition, written in the same transaction as the change itself.
type BookingHistory struct {
	ID         uint64    `gorm:"primaryKey"`
	BookingID  uint64    `gorm:"not null;index"`
	FromStatus string    `gorm:"size:24;not null"`
	ToStatus   string    `gorm:"size:24;not null"`
	Version    int       `gorm:"not null"`
	Actor      string    `gorm:"size:80;not null"`
	Reason     string    `gorm:"size:200;not null;default:''"`
	At         time.Time `gorm:"precision:3;not null"`
}

// TableName keeps the history table's name readable.
func (BookingHistory) TableName() string { return "booking_status_history" }

// Payment outcomes.
const (
	PaymentBooked = "booked"
	PaymentRefund = "refund"
)

// Payment providers.
const (
	ProviderNotify    = "notify"    // POST /api/v1/payments/notify, any provider signing with the shared secret
	ProviderWechatPay = "wechatpay" // WeChat Pay API v3; PaymentID is its transaction_id
)

// Payment is one provider notification, deduplicated by PaymentID, so that a retried notification is
// answered as the first one and a payment for a hold whose units were gone is kept for refund.
type Payment struct {
	PaymentID   string    `gorm:"primaryKey;size:128"`
	HoldID      string    `gorm:"size:40;not null;index"`
	BookingID   *uint64   ``
	AmountCents int64     `gorm:"not null"`
	PaidAt      time.Time `gorm:"precision:3;not null"`
	Outcome     string    `gorm:"size:16;not null"`
	Provider    string    `gorm:"size:16;not null;default:'notify'"`
	CreatedAt   time.Time `gorm:"precision:3"`
}

// ResourcePolicy is a resource's booking rules (engine/booking.Policy); a resource without a row has
// the defaults. MaxDaysAhead 0 means the schedule's horizon.
type ResourcePolicy struct {
	ResourceID              uint64 `gorm:"primaryKey;autoIncrement:false"`
	MinNoticeMinutes        int    `gorm:"not null"`
	MaxDaysAhead            int    `gorm:"not null"`
	CancelCutoffMinutes     int    `gorm:"not null"`
	CancelRefundPercent     int    `gorm:"not null"`
	LateCancelRefundPercent int    `gorm:"not null"`
	NoshowRefundPercent     int    `gorm:"not null"`
	RescheduleCutoffMinutes int    `gorm:"not null"`
	MaxReschedules          int    `gorm:"not null"`
	// RequiresApproval: paid bookings wait for staff for up to ApprovalWindowMinutes (0: the
	// default window).
	RequiresApproval      bool      `gorm:"not null;default:false"`
	ApprovalWindowMinutes int       `gorm:"not null;default:0"`
	UpdatedAt             time.Time `gorm:"precision:3"`
}

// NoshowPolicy is the deployment's no-show freeze rule: one row (ID 1), absent while it is off.
type NoshowPolicy struct {
	ID         uint64    `gorm:"primaryKey;autoIncrement:false"`
	MaxNoshows int       `gorm:"not null"`
	WithinDays int       `gorm:"not null"`
	FreezeDays int       `gorm:"not null"`
	UpdatedAt  time.Time `gorm:"precision:3"`
}

// Refund statuses.
const (
	RefundRequested = "requested"
	RefundSucceeded = "succeeded"
	RefundFailed    = "failed"
)

// Refund is money to give back of a payment: written in the transaction that decided it (a cancel, a
// no-show, a payment that booked nothing), sent to the provider by a task when the provider can be
// asked (WeChat Pay), settled by the provider's notification. OutRefundNo is the provider's
// idempotency key for it, derived from the row.
type Refund struct {
	ID               uint64    `gorm:"primaryKey"`
	BookingID        *uint64   `gorm:"index"`
	HoldID           string    `gorm:"size:40;not null;index"`
	UserID           string    `gorm:"size:64;not null;default:''"`
	VenueID          uint64    `gorm:"not null;default:0"`
	PaymentID        string    `gorm:"size:128;not null;index"`
	Provider         string    `gorm:"size:16;not null"`
	PaidCents        int64     `gorm:"not null"`
	AmountCents      int64     `gorm:"not null"`
	Reason           string    `gorm:"size:32;not null"`
	Status           string    `gorm:"size:16;not null;index"`
	OutRefundNo      string    `gorm:"size:64;not null;uniqueIndex"`
	ProviderRefundID string    `gorm:"size:64;not null;default:''"`
	LastError        string    `gorm:"size:512;not null;default:''"`
	CreatedAt        time.Time `gorm:"precision:3;not null"`
	UpdatedAt        time.Time `gorm:"precision:3;not null"`
}

// WechatOrder is the WeChat Pay JSAPI order of a hold: one per hold, reused by repeated requests, and
// closed when the hold ends unpaid.
type WechatOrder struct {
	HoldID      string     `gorm:"primaryKey;size:40"`
	OutTradeNo  string     `gorm:"size:32;not null;uniqueIndex"`
	PrepayID    string     `gorm:"size:64;not null"`
	OpenID      string     `gorm:"size:128;not null"`
	AmountCents int64      `gorm:"not null"`
	ExpiresAt   time.Time  `gorm:"precision:3;not null"`
	CreatedAt   time.Time  `gorm:"precision:3;not null"`
	ClosedAt    *time.Time `gorm:"precision:3"`
}

// OutboxEvent is a fact other systems should hear of (a booking released, a hold expired, ...),
// written in the transaction that made it true so that no notification is lost or invented. Subject
// names what it is about ("booking:12", "hold:h3_…", "waitlist:5"); events of one subject are
// delivered in ID order. Data is the event body's data, as the API shows the subject.
type OutboxEvent struct {
	ID          uint64     `gorm:"primaryKey"`
	Type        string     `gorm:"size:40;not null"`
	Subject     string     `gorm:"size:64;not null;index"`
	VenueID     uint64     `gorm:"not null;default:0"`
	UserID      string     `gorm:"size:64;not null;default:'';index"`
	Data        string     `gorm:"type:text;not null"`
	CreatedAt   time.Time  `gorm:"precision:3;not null"`
	PublishedAt *time.Time `gorm:"precision:3;index"`
}

// WebhookEndpoint is a receiver of events: every event of its types (all when EventTypes is "[]")
// at its venue (all when VenueID is 0) is delivered to URL, signed with Secret.
type WebhookEndpoint struct {
	ID         uint64     `gorm:"primaryKey"`
	URL        string     `gorm:"size:2048;not null"`
	Secret     string     `gorm:"size:128;not null"`
	EventTypes string     `gorm:"type:text;not null"` // JSON array
	VenueID    uint64     `gorm:"not null;default:0"`
	CreatedAt  time.Time  `gorm:"precision:3;not null"`
	DeletedAt  *time.Time `gorm:"precision:3"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
	DeliverySkipped   = "skipped" // the sink will never take it (a WeChat user who did not subscribe)
)

// Delivery is one event on its way to one sink: a webhook endpoint ("webhook:<id>") or WeChat
// ("wechat"). The relay creates it once per event and sink (the unique index makes a repeat after a
// crash a no-op). Deliveries of one subject and sink go out in event order: only the earliest
// pending one (the head) is attempted, and finishing it starts the next. NextAttemptAt is when the
// head is due (its retry backoff); ClaimedUntil and ClaimToken mark an attempt in flight and who
// makes it, so that two workers never send one delivery at once and only the claimant records it.
type Delivery struct {
	ID            uint64     `gorm:"primaryKey"`
	Sink          string     `gorm:"size:32;not null;uniqueIndex:idx_delivery_event,priority:2;index:idx_delivery_chain,priority:2"`
	EndpointID    uint64     `gorm:"not null;index"`
	EventID       uint64     `gorm:"not null;uniqueIndex:idx_delivery_event,priority:1;index:idx_delivery_chain,priority:4"`
	Subject       string     `gorm:"size:64;not null;index:idx_delivery_chain,priority:1"`
	Status        string     `gorm:"size:16;not null;index:idx_delivery_chain,priority:3;index:idx_delivery_due,priority:1"`
	Attempts      int        `gorm:"not null;default:0"` // every attempt, ever
	Retries       int        `gorm:"not null;default:0"` // failed attempts since the series began (a retry by hand starts one)
	NextAttemptAt time.Time  `gorm:"precision:3;not null;index:idx_delivery_due,priority:2"`
	ClaimedUntil  *time.Time `gorm:"precision:3"`
	ClaimToken    string     `gorm:"size:32;not null;default:''"`
	LastStatus    int        `gorm:"not null;default:0"`
	LastError     string     `gorm:"size:512;not null;default:''"`
	CreatedAt     time.Time  `gorm:"precision:3;not null;index"`
	UpdatedAt     time.Time  `gorm:"precision:3;not null"`
	DoneAt        *time.Time `gorm:"precision:3;index"`
}

// WechatTemplate maps one event type to a WeChat subscribe-message template: Data maps template
// keys (thing1, time2, …) to booking fields (venue_name, start, …), as JSON.
type WechatTemplate struct {
	EventType  string    `gorm:"primaryKey;size:40"`
	TemplateID string    `gorm:"size:128;not null"`
	Page       string    `gorm:"size:512;not null;default:''"`
	Data       string    `gorm:"type:text;not null"`
	UpdatedAt  time.Time `gorm:"precision:3;not null"`
}

// IdempotencyKey remembers the answer to a POST made with an Idempotency-Key header, scoped to the
// caller, method and path, for at least 24 hours.
type IdempotencyKey struct {
	Scope       string    `gorm:"primaryKey;size:255"`
	RequestHash string    `gorm:"size:64;not null"`
	Done        bool      `gorm:"not null"`
	StatusCode  int       `gorm:"not null"`
	Body        []byte    `gorm:"type:blob"`
	CreatedAt   time.Time `gorm:"precision:3;not null"`
	ExpiresAt   time.Time `gorm:"precision:3;not null;index"`
}

// WaitlistEntry is a user waiting for units of a resource window; when units free up the first
// waiter is given a hold (PROMOTED, HoldID set) to pay like any other.
type WaitlistEntry struct {
	ID         uint64    `gorm:"primaryKey"`
	UserID     string    `gorm:"size:64;not null;index"`
	VenueID    uint64    `gorm:"not null"`
	ResourceID uint64    `gorm:"not null;index:idx_waitlist_resource_status,priority:1"`
	Status     string    `gorm:"size:16;not null;index:idx_waitlist_resource_status,priority:2"`
	Start      time.Time `gorm:"precision:3;not null"`
	End        time.Time `gorm:"precision:3;not null"`
	Quantity   int       `gorm:"not null"`
	HoldID     string    `gorm:"size:40;not null;default:''"`
	// WaitingKey is unique while the entry is WAITING or PROMOTED and NULL after, so that a user
	// has one claim on a window at a time, however many requests race.
	WaitingKey *string   `gorm:"size:191;uniqueIndex"`
	CreatedAt  time.Time `gorm:"precision:3;not null"`
	UpdatedAt  time.Time `gorm:"precision:3;not null"`
}

// TableName keeps the table's name readable.
func (WaitlistEntry) TableName() string { return "waitlist" }

// ReplicaHeartbeat is the row an instance with read replicas rewrites on the primary about once a
// second, stamped with its own clock; read back from a replica, it says how far behind that replica
// is. Seconds_Behind_Master cannot: it is NULL while the replica's SQL thread is stopped, 0 while its
// receiving thread falls behind, and needs a privilege an application account seldom has.
type ReplicaHeartbeat struct {
	Instance string    `gorm:"primaryKey;size:64"`
	At       time.Time `gorm:"precision:6;not null"`
}

// TableName keeps the table's name readable.
func (ReplicaHeartbeat) TableName() string { return "replica_heartbeats" }

// All lists every table, in creation order, for Migrate.
func All() []any {
	return []any{
		&Venue{}, &Resource{}, &Schedule{}, &SlotInventory{}, &Service{}, &ServiceResource{},
		&GracePolicy{}, &Booking{}, &BookingHistory{}, &Payment{}, &OutboxEvent{},
		&IdempotencyKey{}, &WaitlistEntry{}, &WebhookEndpoint{}, &Delivery{}, &WechatTemplate{},
		&ResourcePolicy{}, &NoshowPolicy{}, &Refund{}, &WechatOrder{}, &BookingResource{},
		&ReplicaHeartbeat{}, &UserPardon{},
	}
}

// UserPardon is the last time staff lifted a user's no-show freeze: no-shows up to PardonedAt no
// longer count toward a freeze (booking.NoshowPolicy.FrozenUntil).
type UserPardon struct {
	UserID     string    `gorm:"primaryKey;size:128"`
	PardonedAt time.Time `gorm:"precision:3;not null"`
	Actor      string    `gorm:"size:160;not null"`
	Reason     string    `gorm:"size:700;not null"`
}
