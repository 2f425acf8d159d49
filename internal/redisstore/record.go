package redisstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// The fields of a hold's HASH. They are defined here only: the scripts receive them through the
// prelude (scripts.go), so that Go and Lua cannot disagree about the record.
const (
	hfStatus    = "status"
	hfID        = "id"
	hfUser      = "user"
	hfVenue     = "venue"
	hfResource  = "resource"
	hfService   = "service"
	hfQty       = "qty"
	hfStart     = "start_ms"
	hfEnd       = "end_ms"
	hfOStart    = "ostart_ms"
	hfOEnd      = "oend_ms"
	hfDeadline  = "deadline_ms"
	hfCreated   = "created_ms"
	hfAmount    = "amount"
	hfSlots     = "slots"
	hfDays      = "days"
	hfSince     = "confirming_ms"
	hfBookingID = "booking_id"
	hfEnded     = "ended_ms"
	hfRetaken   = "was_retaken"
	hfOrderNo   = "order_no" // the payment provider's order for the hold, once one was opened
	hfRoles     = "roles"    // a multi-resource service's resource per role: "role=id,role=id"
	hfRefused   = "refused"  // "1" when the hold ended because its units were sold (refuse_hold.lua)
	listSep     = ","
	unitsSep    = "|"
)

// Keep is how long ended hold records stay readable (docs/API.md: 24 h after the hold ends);
// tombstones of removed booking owners last twice as long.
const Keep = 24 * time.Hour

// HoldRecord is a hold as stored in Redis.
type HoldRecord struct {
	// CatalogVersion is the venue's catalog version the hold was decided on (CatalogVersion); the
	// hold scripts refuse it as stale when the venue's has moved on. It is not stored.
	CatalogVersion string

	ID          string
	UserID      string
	VenueID     uint64
	ResourceID  uint64
	ServiceID   uint64
	Quantity    int
	Status      booking.HoldStatus // as written; see Effective
	Start, End  time.Time
	OccupyStart time.Time
	OccupyEnd   time.Time
	Deadline    time.Time
	Created     time.Time
	AmountCents int64
	Fields      []string // the slot fields whose units it takes
	Days        []string // the resource-days those slots lie in
	Since       time.Time
	BookingID   uint64
	Retaken     bool
	// Refused is set when the hold ended because the units it held were sold (RefuseHold).
	Refused bool
	OrderNo string
	// Roles are the resources a multi-resource service's hold took, in the service's role order.
	Roles []booking.RoleResource
}

// Effective is the record's status at now: a HELD hold stops occupying at its deadline even if the
// wheel has not written EXPIRED yet.
func (r *HoldRecord) Effective(now time.Time) booking.HoldStatus {
	return booking.EffectiveHoldStatus(r.Status, r.Deadline, now)
}

// pairs is the record as HSET field/value pairs (the status is written by the scripts).
func (r *HoldRecord) pairs() []any { return r.appendPairs(make([]any, 0, holdPairs)) }

// holdPairs is how many values pairs has.
const holdPairs = 28

// appendPairs appends pairs() to args.
func (r *HoldRecord) appendPairs(args []any) []any {
	return append(args,
		hfID, r.ID, hfUser, r.UserID, hfVenue, r.VenueID, hfResource, r.ResourceID, hfService, r.ServiceID,
		hfQty, r.Quantity, hfStart, r.Start.UnixMilli(), hfEnd, r.End.UnixMilli(), hfOStart, r.OccupyStart.UnixMilli(),
		hfOEnd, r.OccupyEnd.UnixMilli(), hfDeadline, r.Deadline.UnixMilli(), hfCreated, r.Created.UnixMilli(),
		hfAmount, r.AmountCents, hfDays, strings.Join(r.Days, listSep),
	)
}

func decodeHold(m map[string]string) (HoldRecord, bool) {
	if len(m) == 0 || m[hfID] == "" {
		return HoldRecord{}, false
	}
	u := func(k string) uint64 { n, _ := strconv.ParseUint(m[k], 10, 64); return n }
	i := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	ms := func(k string) time.Time {
		if m[k] == "" {
			return time.Time{}
		}
		return time.UnixMilli(i(k)).UTC()
	}
	return HoldRecord{
		ID: m[hfID], UserID: m[hfUser], VenueID: u(hfVenue), ResourceID: u(hfResource), ServiceID: u(hfService),
		Quantity: int(i(hfQty)), Status: booking.HoldStatus(m[hfStatus]), Start: ms(hfStart), End: ms(hfEnd),
		OccupyStart: ms(hfOStart), OccupyEnd: ms(hfOEnd), Deadline: ms(hfDeadline), Created: ms(hfCreated),
		AmountCents: i(hfAmount), Fields: splitList(m[hfSlots]), Days: splitList(m[hfDays]), Since: ms(hfSince),
		BookingID: u(hfBookingID), Retaken: m[hfRetaken] == "1", Refused: m[hfRefused] == "1", OrderNo: m[hfOrderNo], Roles: decodeRoles(m[hfRoles]),
	}, true
}

// A role's name may hold any character, the separators of "role=id,role=id" too: the hold scripts
// get it escaped (HoldRoles), and decodeRoles unescapes it, so that a name never splits the list.
var (
	escapeRole   = strings.NewReplacer("%", "%25", listSep, "%2C", "=", "%3D")
	unescapeRole = strings.NewReplacer("%2C", listSep, "%3D", "=", "%25", "%")
)

// decodeRoles reads "role=id,role=id".
func decodeRoles(s string) []booking.RoleResource {
	var out []booking.RoleResource
	for _, p := range splitList(s) {
		role, id, ok := strings.Cut(p, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if ok && err == nil {
			out = append(out, booking.RoleResource{Role: unescapeRole.Replace(role), ResourceID: n})
		}
	}
	return out
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, listSep)
}
