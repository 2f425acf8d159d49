package engine

import "strconv"

// Keys builds every Redis key slotwheel writes; no other file formats a key. All keys of one venue
// share the hash tag {v<id>}, so each Lua script — which only ever touches one venue — runs in one
// Redis Cluster slot. The prefix lets several deployments or test runs share one Redis.
type Keys struct {
	prefix string
}

// NewKeys builds a keyspace under prefix.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix returns the keyspace's prefix.
func (k Keys) Prefix() string { return k.prefix }

func (k Keys) venue(venueID uint64) string {
	return k.prefix + ":{v" + strconv.FormatUint(venueID, 10) + "}:"
}

// Alive is a plain key that reconciliation sets: when it is missing, Redis lost its data (a flush,
// a restart without persistence) and the wheel reconciles at once instead of within the hour.
func (k Keys) Alive() string { return k.prefix + ":alive" }

// Capacity is a HASH of slot field → units the slot has; a slot without a field is closed.
func (k Keys) Capacity(venueID uint64) string { return k.venue(venueID) + "cap" }

// Used is a HASH of slot field → units taken by live holds and occupying bookings.
func (k Keys) Used(venueID uint64) string { return k.venue(venueID) + "used" }

// Owners is a HASH of owner ("h:<hold>" or "b:<booking>") → "qty|field,field,…": who holds which
// units, so that giving units back is idempotent and counters can be recomputed.
func (k Keys) Owners(venueID uint64) string { return k.venue(venueID) + "owners" }

// Gone is a ZSET of booking owners removed on release or cancel (score: ms), so that a loader racing
// with the removal does not put them back.
func (k Keys) Gone(venueID uint64) string { return k.venue(venueID) + "gone" }

// Days is a SET of "resource:YYYY-MM-DD" whose capacity (and bookings) are loaded from SQL.
func (k Keys) Days(venueID uint64) string { return k.venue(venueID) + "days" }

// Wheel is the ZSET of live hold ids scored by their deadline in unix ms.
func (k Keys) Wheel(venueID uint64) string { return k.venue(venueID) + "wheel" }

// Confirming is the ZSET of holds being confirmed, scored by when the confirm began (ms), so that
// the wheel finds those a dead process left behind without waiting for the hourly reconciliation.
func (k Keys) Confirming(venueID uint64) string { return k.venue(venueID) + "confirming" }

// HoldPrefix is the prefix of hold HASH keys; scripts append the hold id to reach a due hold.
func (k Keys) HoldPrefix(venueID uint64) string { return k.venue(venueID) + "hold:" }

// Hold is the HASH of one hold.
func (k Keys) Hold(venueID uint64, holdID string) string { return k.HoldPrefix(venueID) + holdID }

// UserHolds is a ZSET of a user's hold ids at a venue, scored by creation ms.
func (k Keys) UserHolds(venueID uint64, userID string) string {
	return k.venue(venueID) + "uholds:" + userID
}

// VenuePattern matches every key of one venue (for tests and tools).
func (k Keys) VenuePattern(venueID uint64) string { return k.venue(venueID) + "*" }

// SlotField names one slot of a resource inside the venue's Capacity and Used hashes: the resource id
// and the slot's start in unix minutes.
func SlotField(resourceID uint64, startUnixMinute int64) string {
	return strconv.FormatUint(resourceID, 10) + ":" + strconv.FormatInt(startUnixMinute, 10)
}

// DayField names one resource-day inside the Days set.
func DayField(resourceID uint64, day string) string {
	return strconv.FormatUint(resourceID, 10) + ":" + day
}

// HoldOwner and BookingOwner name owners inside the Owners hash.
func HoldOwner(holdID string) string { return "h:" + holdID }

// BookingOwner names a booking's entry in the Owners hash.
func BookingOwner(bookingID uint64) string { return "b:" + strconv.FormatUint(bookingID, 10) }

func uintString(n uint64) string { return strconv.FormatUint(n, 10) }
