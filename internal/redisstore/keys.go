package redisstore

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Keys builds every Redis key slotwheel writes; no other file formats a key. All keys of one venue
// share the hash tag {v<id>}, so each Lua script — which only ever touches one venue, and names every
// key it touches in KEYS — runs in one Redis Cluster slot. The prefix lets several deployments or
// test runs share one Redis.
type Keys struct {
	prefix string
}

// NewKeys builds a keyspace under prefix.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix returns the keyspace's prefix.
func (k Keys) Prefix() string { return k.prefix }

// Venue returns the keys of one venue.
func (k Keys) Venue(venueID uint64) VenueKeys {
	return VenueKeys{base: k.prefix + ":{v" + strconv.FormatUint(venueID, 10) + "}:"}
}

// VenuePattern matches every key of one venue (for tests and tools; never SCANned by the service).
func (k Keys) VenuePattern(venueID uint64) string { return k.Venue(venueID).base + "*" }

// Alive is a key that reconciliation sets: when it is missing, Redis lost its data (a flush, a
// restart without persistence) and the engine reconciles at once instead of within the hour. It
// carries the hash tag of the queue it vouches for, so that in a Redis Cluster it lives on the same
// master as that queue's tasks and disappears with them.
func (k Keys) Alive(queue string) string { return k.prefix + ":{" + queue + "}:alive" }

// Idempotency is the record of one idempotent request that touched only Redis (a hold), under the
// hash tag of its own scope.
func (k Keys) Idempotency(scope string) string { return k.prefix + ":idem:{" + scope + "}" }

// Frozen is the key that says a user is frozen for no-shows, until it expires (its value is the end
// of the freeze in unix ms). Every instance reads the same key, so all refuse the same users.
func (k Keys) Frozen(userID string) string { return k.prefix + ":frozen:{" + userID + "}" }

// RateLimit counts the requests of one client address in one second.
func (k Keys) RateLimit(addr string, unixSecond int64) string {
	return k.prefix + ":rate:{" + addr + "}:" + strconv.FormatInt(unixSecond, 10)
}

// DueBucket is the SET of venue ids with a timer due at one unix second, in one shard (see
// timers.go); each shard has a hash tag of its own.
func (k Keys) DueBucket(shard int, unixSecond int64) string {
	return k.prefix + ":{due" + strconv.Itoa(shard) + "}:" + strconv.FormatInt(unixSecond, 10)
}

// Lease is the key by which one instance holds a background loop (or a share of one) at a time.
func (k Keys) Lease(name string) string { return k.prefix + ":{lease}:" + name }

// Settled is the key where the holder of the lease named name says up to when its work is done
// (SetSettled); in the lease's hash slot, so that one read answers both.
func (k Keys) Settled(name string) string { return k.Lease(name) + ":settled" }

// CatalogGlobal is the version of the catalog settings that span venues (grace and no-show
// policies, the venue list); see catalog.go.
func (k Keys) CatalogGlobal() string { return k.prefix + ":{catalog}:ver" }

// VenueKeys are the keys of one venue.
type VenueKeys struct{ base string }

// CatalogVersion is the version of the venue's catalog (its venue row, resources, schedules,
// services and rules, and the settings that span venues): bumped after every admin change of them,
// compared by the hold scripts with the version the instance's copy was read at.
func (v VenueKeys) CatalogVersion() string { return v.base + "catver" }

// Capacity is a HASH of slot field → units the slot has; a slot without a field is closed.
func (v VenueKeys) Capacity() string { return v.base + "cap" }

// Used is a HASH of slot field → units taken by live holds and occupying bookings.
func (v VenueKeys) Used() string { return v.base + "used" }

// Owners is a HASH of owner → its units ("qty|field,field", written and read only by the scripts,
// from the separators of the prelude): who holds which units, so that giving
// units back is idempotent and counters can be recomputed.
func (v VenueKeys) Owners() string { return v.base + "owners" }

// Gone is a ZSET of booking owners removed on release or cancel (score: ms), so that a loader racing
// with the removal does not put them back.
func (v VenueKeys) Gone() string { return v.base + "gone" }

// Days is a SET of resource-days whose capacity (and bookings) are loaded from SQL.
func (v VenueKeys) Days() string { return v.base + "days" }

// Wheel is the ZSET of live hold ids scored by their deadline in unix ms.
func (v VenueKeys) Wheel() string { return v.base + "wheel" }

// Ended is the ZSET of holds whose deadline passed and whose units came back (scored by deadline),
// until the wheel has written their records EXPIRED and announced them.
func (v VenueKeys) Ended() string { return v.base + "ended" }

// Confirming is the ZSET of holds being confirmed, scored by when the confirm began (ms), so that
// the wheel finds those a dead process left behind without waiting for the hourly reconciliation.
func (v VenueKeys) Confirming() string { return v.base + "confirming" }

// Moves is a HASH of booking id → a move of the booking to another window under way
// ("version|qty|new fields|since ms"), whose extra units its own owner (OWNER_MOVE) holds meanwhile.
func (v VenueKeys) Moves() string { return v.base + "moves" }

// Hold is the HASH of one hold (see HoldRecord).
func (v VenueKeys) Hold(holdID string) string { return v.base + "hold:" + holdID }

// UserHolds is a ZSET of a user's hold ids at the venue, scored by creation ms, for listing them.
func (v VenueKeys) UserHolds(userID string) string { return v.base + "uholds:" + userID }

// UserLive is a ZSET of a user's unpaid holds at the venue, scored by deadline ms, for the limit of
// active holds.
func (v VenueKeys) UserLive(userID string) string { return v.base + "ulive:" + userID }

// Owner names a holder of units inside the Owners hash: a hold or a booking.
type Owner string

// The owner kinds; the scripts get them from the prelude.
const (
	ownerHold    = "h:"
	ownerBooking = "b:"
	ownerMove    = "m:" // the extra units of a booking's move under way (see Moves)
)

// HoldOwner names a hold's entry in the Owners hash.
func HoldOwner(holdID string) Owner { return Owner(ownerHold + holdID) }

// BookingOwner names a booking's entry in the Owners hash.
func BookingOwner(bookingID uint64) Owner {
	return Owner(ownerBooking + strconv.FormatUint(bookingID, 10))
}

// Hold returns the hold id of a hold owner.
func (o Owner) Hold() (string, bool) { return strings.CutPrefix(string(o), ownerHold) }

// Booking returns the booking id of a booking owner.
func (o Owner) Booking() (uint64, bool) {
	s, ok := strings.CutPrefix(string(o), ownerBooking)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}

// SlotField names one slot of a resource inside the venue's Capacity and Used hashes: the resource
// id and the slot's start in unix minutes.
func SlotField(resourceID uint64, startUnixMinute int64) string {
	return strconv.FormatUint(resourceID, 10) + ":" + strconv.FormatInt(startUnixMinute, 10)
}

// FieldResource is the resource of a SlotField.
func FieldResource(field string) uint64 {
	r, _, _ := strings.Cut(field, ":")
	id, _ := strconv.ParseUint(r, 10, 64)
	return id
}

// DayField names one resource-day inside the Days set.
func DayField(resourceID uint64, day string) string {
	return strconv.FormatUint(resourceID, 10) + ":" + day
}

// DayResource is the resource of a DayField.
func DayResource(dayField string) uint64 {
	r, _, _ := strings.Cut(dayField, ":")
	id, _ := strconv.ParseUint(r, 10, 64)
	return id
}

// DayOf is the date of a DayField.
func DayOf(dayField string) string {
	_, d, _ := strings.Cut(dayField, ":")
	return d
}

// NewHoldID makes an unguessable hold id that names its venue, so that a hold is found from its id
// alone.
func NewHoldID(venueID uint64) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "h" + strconv.FormatUint(venueID, 10) + "_" + hex.EncodeToString(b)
}

// HoldVenue reads the venue out of a hold id; false when id is not one this server makes.
func HoldVenue(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, "h")
	if !ok {
		return 0, false
	}
	v, tail, ok := strings.Cut(rest, "_")
	if !ok || len(tail) != 20 {
		return 0, false
	}
	if _, err := hex.DecodeString(tail); err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil && n > 0
}

// SlotFields names the slot fields of a resource's slots, and the resource-days they lie in.
func SlotFields(resourceID uint64, slots []booking.Slot) (fields []string, days []string) {
	fields = make([]string, len(slots))
	for i, s := range slots {
		fields[i] = SlotField(resourceID, s.Start.Unix()/60)
		if d := DayField(resourceID, s.Day); len(days) == 0 || days[len(days)-1] != d {
			days = append(days, d)
		}
	}
	return fields, days
}
