// Package redisstore is slotwheel's hot state in Redis: slot counters, unpaid holds, the deadline
// wheel, the owners of units and the days loaded from SQL. Every mutation is one Lua script (lua/,
// each headed by its KEYS/ARGV/Output contract) run by one typed method here; every key is built in
// keys.go; the hold record and the owner encoding are defined once, in Go, and handed to the scripts
// by a generated prelude. It decides nothing about bookings: the engine (and engine/booking) does.
// Redis failures come back wrapped in booking.ErrBackendUnavailable.
package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Store runs the scripts of one keyspace.
type Store struct {
	rdb     redis.UniversalClient
	keys    Keys
	scripts *scripts
	batch   *batcher // the hold path's scripts, sent together (batch.go)
}

// New builds a Store on rdb under prefix.
func New(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, keys: NewKeys(prefix), scripts: loadScripts(), batch: newBatcher(rdb)}
}

// Keys returns the store's keyspace.
func (s *Store) Keys() Keys { return s.keys }

// Client returns the Redis client, for readiness checks.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// unavailable wraps a Redis failure.
func unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redis %s: %w: %w", op, booking.ErrBackendUnavailable, err)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// HoldOutcome is what the hold script answered.
type HoldOutcome string

// Hold outcomes.
const (
	HoldOK     HoldOutcome = "ok"
	HoldCold   HoldOutcome = "cold"   // a day is not loaded: load it and try again
	HoldFull   HoldOutcome = "full"   // a unit is taken
	HoldClosed HoldOutcome = "closed" // a slot has no capacity
	HoldLimit  HoldOutcome = "limit"  // the user has too many live holds at the venue
)

// Hold takes the units of r (a new hold, status HELD) all or nothing and puts its deadline on the
// wheel. maxLive bounds the user's live holds at the venue (0: no bound). A cold answer names the
// resource-day to load.
func (s *Store) Hold(ctx context.Context, r *HoldRecord, now time.Time, maxLive int) (HoldOutcome, string, error) {
	out, day, _, err := s.HoldOnce(ctx, r, now, maxLive, nil)
	return out, day, err
}

// Idempotent holds: the outcomes of HoldOnce's idempotency step.
const (
	HoldDone    HoldOutcome = "done"    // the request was answered before: IdemAnswer has the answer
	HoldReused  HoldOutcome = "reused"  // the key came with another body
	HoldRunning HoldOutcome = "running" // the request with this key is still running elsewhere
)

// IdemStep is a keyed request's idempotency step run by the hold script itself, so that an
// idempotent hold costs one round trip: the scope and body hash (see IdemBegin) and the answers the
// script stores with its outcome.
type IdemStep struct {
	Scope, Hash string
	TTL, Stale  time.Duration // the record's lifetime; when an unfinished reservation is given up
	OK, Full    IdemAnswer    // the answers to a new hold and to a full slot (Status, Body)
}

// Clustered reports whether the client is a Redis Cluster's, where an idempotency record lives on
// another master than the venue's keys and no script can touch both.
func (s *Store) Clustered() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// HoldOnce is Hold with an idempotency step (step may be nil; not on a cluster): a request answered
// before takes nothing and answers HoldDone with its stored answer, or HoldReused/HoldRunning; a new
// hold and a full slot store step's answer; the other refusals (closed, limit) reserve the record,
// which the caller finishes with its answer (IdemFinish). A cold answer stores nothing.
func (s *Store) HoldOnce(ctx context.Context, r *HoldRecord, now time.Time, maxLive int, step *IdemStep) (HoldOutcome, string, IdemAnswer, error) {
	vk := s.keys.Venue(r.VenueID)
	keys := []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(), vk.Hold(r.ID),
		vk.UserHolds(r.UserID), vk.UserLive(r.UserID)}
	args := make([]any, 0, 15+len(r.pairs()))
	args = append(args, ms(now), ms(r.Deadline), r.Quantity, r.ID, Keep.Milliseconds(),
		strings.Join(r.Days, listSep), strings.Join(r.Fields, listSep), maxLive)
	if step != nil {
		keys = append(keys, s.keys.Idempotency(step.Scope))
		args = append(args, step.Hash, step.TTL.Milliseconds(), step.Stale.Milliseconds(),
			step.OK.Status, step.OK.Body, step.Full.Status, step.Full.Body)
	} else {
		args = append(args, "", 0, 0, 0, "", 0, "")
	}
	args = append(args, r.pairs()...)
	out, err := s.runMarked(ctx, s.scripts.holdSlots, keys, args, r.VenueID, r.Deadline, now)
	if err != nil {
		return "", "", IdemAnswer{}, unavailable("hold", err)
	}
	outcome := HoldOutcome(out[0])
	switch {
	case outcome == HoldDone && len(out) == 3:
		st, _ := strconv.Atoi(out[1])
		return outcome, "", IdemAnswer{Outcome: "done", Status: st, Body: []byte(out[2])}, nil
	case outcome == HoldCold && len(out) > 1:
		return outcome, out[1], IdemAnswer{}, nil
	}
	return outcome, "", IdemAnswer{}, nil
}

// RoleCandidate is one resource that could fill a role of a multi-resource hold: its slot fields for
// the hold's window, and the resource-days they lie in.
type RoleCandidate struct {
	ResourceID uint64
	Fields     []string
	Days       []string
}

// Role is one role of a multi-resource hold with its candidates, in order of preference.
type Role struct {
	Name       string
	Candidates []RoleCandidate
}

// HoldRoles takes a multi-resource hold: for every role the first candidate with room, all roles or
// none (see hold_roles.lua). It answers the resource chosen for each role; a cold answer names the
// resource-day to load. r's Fields, Days and Roles are set to what was taken.
func (s *Store) HoldRoles(ctx context.Context, r *HoldRecord, roles []Role, now time.Time, maxLive int) (HoldOutcome, string, error) {
	vk := s.keys.Venue(r.VenueID)
	keys := []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(), vk.Hold(r.ID),
		vk.UserHolds(r.UserID), vk.UserLive(r.UserID)}
	args := []any{ms(now), ms(r.Deadline), r.Quantity, r.ID, Keep.Milliseconds(), maxLive, len(roles)}
	for _, role := range roles {
		args = append(args, escapeRole.Replace(role.Name), len(role.Candidates))
		for _, c := range role.Candidates {
			args = append(args, c.ResourceID, strings.Join(c.Days, listSep), strings.Join(c.Fields, listSep))
		}
	}
	args = append(args, r.pairs()...)
	out, err := s.runMarked(ctx, s.scripts.holdRoles, keys, args, r.VenueID, r.Deadline, now)
	if err != nil {
		return "", "", unavailable("hold roles", err)
	}
	if out[0] == "cold" {
		return HoldCold, out[1], nil
	}
	if out[0] != "ok" {
		return HoldOutcome(out[0]), "", nil
	}
	r.Fields, r.Days, r.Roles = nil, nil, nil
	for i, role := range roles {
		rid, _ := strconv.ParseUint(out[1+i], 10, 64)
		for _, c := range role.Candidates {
			if c.ResourceID == rid {
				r.Fields = append(r.Fields, c.Fields...)
				r.Days = append(r.Days, c.Days...)
			}
		}
		r.Roles = append(r.Roles, booking.RoleResource{Role: role.Name, ResourceID: rid})
	}
	r.ResourceID = r.Roles[0].ResourceID
	return HoldOK, "", nil
}

// runMarked runs a script that may put a hold on a venue's wheel, and marks the venue's timer at at
// in the same round trip (a pipeline; in a Redis Cluster, one per master, sent together). The mark
// is made whatever the script answers: a needless mark costs the wheel one look at the venue.
func (s *Store) runMarked(ctx context.Context, sc *redis.Script, keys []string, args []any, venueID uint64, at, now time.Time) ([]string, error) {
	cmd, err := s.evalMarked(ctx, sc, keys, args, venueID, at, now)
	if err != nil {
		return nil, err
	}
	return replyStrings(cmd.Result())
}

// evalMarked is runMarked for a script whose answer is not a list of strings.
func (s *Store) evalMarked(ctx context.Context, sc *redis.Script, keys []string, args []any, venueID uint64, at, now time.Time) (*redis.Cmd, error) {
	for attempt := 0; ; attempt++ {
		// With the scripts of other requests running at the same time (batch.go).
		var cmd *redis.Cmd
		if err := s.batch.do(ctx, func(ctx context.Context, pipe redis.Pipeliner) {
			cmd = sc.EvalSha(ctx, pipe, keys, args...)
			s.markDue(ctx, pipe, venueID, at, now)
		}); err != nil {
			return nil, err
		}
		err := cmd.Err()
		if attempt == 0 && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// A pipeline sends EVALSHA only: load the script (on every master) and go again.
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				return nil, err
			}
			continue
		}
		return cmd, err
	}
}

// ReadSlots reads the capacity (-1 when closed) and units taken of fields of a venue, after expiring
// due holds. cold names a resource-day of days that is not loaded (nothing else is answered then).
func (s *Store) ReadSlots(ctx context.Context, venueID uint64, now time.Time, days, fields []string) (caps, used []int, cold string, err error) {
	vk := s.keys.Venue(venueID)
	args := make([]any, 0, 2+len(fields))
	args = append(args, ms(now), strings.Join(days, listSep))
	for _, f := range fields {
		args = append(args, f)
	}
	res, err := s.scripts.readSlots.Run(ctx, s.rdb, []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days()}, args...).Slice()
	if err != nil {
		return nil, nil, "", unavailable("read slots", err)
	}
	if res[0] == "cold" {
		return nil, nil, res[1].(string), nil
	}
	c, u := res[1].([]any), res[2].([]any)
	caps, used = make([]int, len(fields)), make([]int, len(fields))
	for i := range fields {
		caps[i] = -1
		if v, ok := c[i].(string); ok {
			caps[i], _ = strconv.Atoi(v)
		}
		if v, ok := u[i].(string); ok {
			used[i], _ = strconv.Atoi(v)
		}
	}
	return caps, used, "", nil
}

// ReadHold loads a hold record; false when it is unknown or gone.
func (s *Store) ReadHold(ctx context.Context, id string) (HoldRecord, bool, error) {
	v, ok := HoldVenue(id)
	if !ok {
		return HoldRecord{}, false, nil
	}
	m, err := s.rdb.HGetAll(ctx, s.keys.Venue(v).Hold(id)).Result()
	if err != nil {
		return HoldRecord{}, false, unavailable("read hold", err)
	}
	r, ok := decodeHold(m)
	return r, ok, nil
}

// UserHolds lists the ids of a user's holds of the last day at a venue, newest first.
func (s *Store) UserHolds(ctx context.Context, venueID uint64, userID string, limit int) ([]string, error) {
	ids, err := s.rdb.ZRevRange(ctx, s.keys.Venue(venueID).UserHolds(userID), 0, int64(limit)-1).Result()
	return ids, unavailable("list holds", err)
}

// ConfirmStep is what marking a hold CONFIRMING answered.
type ConfirmStep struct {
	Outcome   string // ok, retaken, confirmed, busy, missing, gone, cancelled, cold
	BookingID uint64 // confirmed: the booking the hold already became
	Detail    string // gone: 'full' or 'closed'; cold: the resource-day to load
}

// MarkConfirming is step one of a confirm (docs/DESIGN.md "Pay"): the hold leaves the wheel, or an
// expired (or, with revive, cancelled) hold re-takes its units if they are free. A CONFIRMING older
// than stale belongs to a dead process and is taken over.
func (s *Store) MarkConfirming(ctx context.Context, r *HoldRecord, now time.Time, revive bool, stale time.Duration) (ConfirmStep, error) {
	vk := s.keys.Venue(r.VenueID)
	flag := "0"
	if revive {
		flag = "1"
	}
	// The wheel looks again once the confirm could be abandoned (a process that died mid-confirm).
	out, err := s.runMarked(ctx, s.scripts.markConfirming,
		[]string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(), vk.Hold(r.ID), vk.Confirming(), vk.UserLive(r.UserID)},
		[]any{ms(now), flag, stale.Milliseconds()}, r.VenueID, now.Add(stale+time.Second), now)
	if err != nil {
		return ConfirmStep{}, unavailable("mark confirming", err)
	}
	st := ConfirmStep{Outcome: out[0]}
	if len(out) > 1 {
		st.Detail = out[1]
		if st.Outcome == "confirmed" {
			st.BookingID, _ = strconv.ParseUint(out[1], 10, 64)
		}
	}
	return st, nil
}

// Settle is the last step of a confirm: the hold's units become those of the booking at version
// (taken again if Redis lost them) and the hold record goes. It is idempotent.
func (s *Store) Settle(ctx context.Context, r *HoldRecord, bookingID uint64, version int) (string, error) {
	vk := s.keys.Venue(r.VenueID)
	out, err := s.scripts.settleHold.Run(ctx, s.rdb,
		[]string{vk.Owners(), vk.Used(), vk.Hold(r.ID), vk.Wheel(), vk.Gone(), vk.Confirming(), vk.Ended(),
			vk.UserHolds(r.UserID), vk.UserLive(r.UserID)},
		r.ID, bookingID, r.Quantity, strings.Join(r.Fields, listSep), version).Text()
	return out, unavailable("settle hold", err)
}

// Unconfirm puts a hold whose booking was certainly not committed back on the wheel.
func (s *Store) Unconfirm(ctx context.Context, r *HoldRecord, now time.Time) error {
	vk := s.keys.Venue(r.VenueID)
	_, err := s.evalMarked(ctx, s.scripts.unconfirm, []string{vk.Wheel(), vk.Hold(r.ID), vk.Confirming(), vk.UserLive(r.UserID)},
		[]any{ms(now), Keep.Milliseconds()}, r.VenueID, r.Deadline, now)
	return unavailable("unconfirm hold", err)
}

// CancelHold gives up a live hold. It answers "cancelled", "busy" (being confirmed), "missing", or
// the hold's effective status when it is no longer live.
func (s *Store) CancelHold(ctx context.Context, r *HoldRecord, now time.Time) (string, error) {
	vk := s.keys.Venue(r.VenueID)
	out, err := s.scripts.cancelHold.Run(ctx, s.rdb,
		[]string{vk.Owners(), vk.Used(), vk.Wheel(), vk.Ended(), vk.Hold(r.ID), vk.UserLive(r.UserID)},
		ms(now), Keep.Milliseconds()).Text()
	return out, unavailable("cancel hold", err)
}

// Refusals: why RefuseHold may end a hold.
const (
	// RefuseConfirming ends a CONFIRMING hold whose booking the capacity ledger refused.
	RefuseConfirming = "confirming"
	// RefuseOverfull ends a live HELD hold while one of its slots holds more units than it has.
	RefuseOverfull = "overfull"
)

// RefuseHold ends a hold whose units are sold (see refuse_hold.lua and the Refuse* modes): its units
// come back and its record says CANCELLED. It answers "refused", "missing", "fits" (RefuseOverfull:
// no slot of the hold is over capacity any more), or the hold's status when the mode does not
// refuse a hold in it.
func (s *Store) RefuseHold(ctx context.Context, r *HoldRecord, mode string, now time.Time) (string, error) {
	vk := s.keys.Venue(r.VenueID)
	out, err := s.scripts.refuseHold.Run(ctx, s.rdb,
		[]string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Confirming(), vk.Hold(r.ID), vk.UserLive(r.UserID)},
		ms(now), Keep.Milliseconds(), mode).Text()
	return out, unavailable("refuse hold", err)
}

// Freed is an owner whose units are to come back: a booking whose change at Version stopped it
// occupying (its units stay if a later change took them again), or a hold (Version 0).
type Freed struct {
	Owner   Owner
	Version int
}

// GiveBack returns the units of owners of one venue that no longer occupy, each exactly once, and
// tombstones the bookings among them. It answers how many gave units back.
func (s *Store) GiveBack(ctx context.Context, venueID uint64, freed []Freed, now time.Time) (int, error) {
	if len(freed) == 0 {
		return 0, nil
	}
	vk := s.keys.Venue(venueID)
	total := 0
	for len(freed) > 0 {
		n := min(len(freed), 1000) // one script call per thousand: a batch release is a few calls
		args := make([]any, 0, 2+2*n)
		args = append(args, ms(now), (2 * Keep).Milliseconds())
		for _, f := range freed[:n] {
			args = append(args, string(f.Owner), f.Version)
		}
		got, err := s.scripts.giveBack.Run(ctx, s.rdb, []string{vk.Owners(), vk.Used(), vk.Gone()}, args...).Int()
		if err != nil {
			return total, unavailable("give back units", err)
		}
		total += got
		freed = freed[n:]
	}
	return total, nil
}

// BookingUnits are an occupying booking's units as SQL knows them, held by its change at Version.
type BookingUnits struct {
	BookingID uint64
	HoldID    string
	Qty       int
	Fields    []string
	Version   int
}

// Restore takes a booking's units again for a restore or a late check-in, for its change at
// b.Version: they must be free. It answers
// "present", "moved", "added", or "full"/"closed" when they are not free.
func (s *Store) Restore(ctx context.Context, venueID uint64, b BookingUnits) (string, error) {
	out, err := s.ensureOwners(ctx, venueID, "restore", []BookingUnits{b})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// EnsureCounted makes sure the units of occupying bookings are counted once each (reconciliation:
// SQL is the truth, so no capacity check; a tombstoned booking was released meanwhile and is left
// alone). It answers how many were added.
func (s *Store) EnsureCounted(ctx context.Context, venueID uint64, bs []BookingUnits) (int, error) {
	added := 0
	for len(bs) > 0 {
		n := min(len(bs), 500)
		out, err := s.ensureOwners(ctx, venueID, "repair", bs[:n])
		if err != nil {
			return added, err
		}
		for _, o := range out {
			if o == "added" || o == "replaced" {
				added++
			}
		}
		bs = bs[n:]
	}
	return added, nil
}

func (s *Store) ensureOwners(ctx context.Context, venueID uint64, mode string, bs []BookingUnits) ([]string, error) {
	vk := s.keys.Venue(venueID)
	args := make([]any, 0, 1+5*len(bs))
	args = append(args, mode)
	for _, b := range bs {
		args = append(args, b.BookingID, b.HoldID, b.Qty, strings.Join(b.Fields, listSep), b.Version)
	}
	out, err := replyStrings(s.scripts.ensureOwners.Run(ctx, s.rdb, []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Gone(), vk.Moves()}, args...).Result())
	return out, unavailable("ensure owners", err)
}

// FieldCapacity is one slot's capacity, for loading a day.
type FieldCapacity struct {
	Field    string
	Capacity int
}

// LoadDay fills a cold resource-day: its capacity and the units of the bookings occupying it, in one
// step. A day already loaded is left as it is.
func (s *Store) LoadDay(ctx context.Context, venueID uint64, dayField string, caps []FieldCapacity, bookings []BookingUnits) error {
	vk := s.keys.Venue(venueID)
	args := make([]any, 0, 2+2*len(caps)+4*len(bookings))
	args = append(args, dayField, len(caps))
	for _, c := range caps {
		args = append(args, c.Field, c.Capacity)
	}
	for _, b := range bookings {
		args = append(args, b.BookingID, b.Qty, strings.Join(b.Fields, listSep), b.Version)
	}
	err := s.scripts.loadDay.Run(ctx, s.rdb, []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Gone(), vk.Days()}, args...).Err()
	return unavailable("load day", err)
}

// DayLoaded reports whether a resource-day is loaded.
func (s *Store) DayLoaded(ctx context.Context, venueID uint64, dayField string) (bool, error) {
	ok, err := s.rdb.SIsMember(ctx, s.keys.Venue(venueID).Days(), dayField).Result()
	return ok, unavailable("day loaded", err)
}

// Recount recomputes a venue's counters from its owners and answers how many were wrong, and the
// slots whose owners hold more units than the slot has.
func (s *Store) Recount(ctx context.Context, venueID uint64) (drift int, overfull []string, err error) {
	vk := s.keys.Venue(venueID)
	out, err := replyStrings(s.scripts.recount.Run(ctx, s.rdb, []string{vk.Used(), vk.Owners(), vk.Capacity()}).Result())
	if err != nil {
		return 0, nil, unavailable("recount", err)
	}
	if drift, err = strconv.Atoi(out[0]); err != nil {
		return 0, nil, unavailable("recount", err)
	}
	return drift, out[1:], nil
}

// Owners lists a venue's owners.
func (s *Store) Owners(ctx context.Context, venueID uint64) ([]Owner, error) {
	keys, err := s.rdb.HKeys(ctx, s.keys.Venue(venueID).Owners()).Result()
	if err != nil {
		return nil, unavailable("owners", err)
	}
	out := make([]Owner, len(keys))
	for i, k := range keys {
		out[i] = Owner(k)
	}
	return out, nil
}

// Move is an owner's units on a new grid.
type Move struct {
	Owner  Owner
	Fields []string
}

// Regrid switches a resource to a new grid in one step: its loaded days are forgotten (with the old
// capacity fields), and every owner moves onto its new fields.
func (s *Store) Regrid(ctx context.Context, venueID uint64, dayFields, oldFields []string, moves []Move) error {
	vk := s.keys.Venue(venueID)
	keys := []string{vk.Capacity(), vk.Days(), vk.Owners(), vk.Used()}
	args := make([]any, 0, 2+len(dayFields)+len(oldFields)+3*len(moves))
	args = append(args, len(dayFields))
	for _, d := range dayFields {
		args = append(args, d)
	}
	args = append(args, len(oldFields))
	for _, f := range oldFields {
		args = append(args, f)
	}
	for _, m := range moves {
		idx := 0
		if id, ok := m.Owner.Hold(); ok {
			keys = append(keys, vk.Hold(id))
			idx = len(keys)
		}
		args = append(args, string(m.Owner), strings.Join(m.Fields, listSep), idx)
	}
	return unavailable("regrid", s.scripts.regrid.Run(ctx, s.rdb, keys, args...).Err())
}

// CapacityFields lists the capacity fields of a resource whose slot starts in [from, to).
func (s *Store) CapacityFields(ctx context.Context, venueID, resourceID uint64, from, to time.Time) ([]string, error) {
	var out []string
	prefix := strconv.FormatUint(resourceID, 10) + ":"
	iter := s.rdb.HScan(ctx, s.keys.Venue(venueID).Capacity(), 0, prefix+"*", 1000).Iterator()
	lo, hi := from.Unix()/60, to.Unix()/60
	for i := 0; iter.Next(ctx); i++ {
		if i%2 == 1 { // values
			continue
		}
		f := iter.Val()
		m, err := strconv.ParseInt(strings.TrimPrefix(f, prefix), 10, 64)
		if err == nil && m >= lo && m < hi {
			out = append(out, f)
		}
	}
	return out, unavailable("scan capacity", iter.Err())
}

// ExpireDue gives back the units of a venue's due holds, at most limit of them, and answers how many
// and the earliest remaining deadline (zero when the wheel is empty).
func (s *Store) ExpireDue(ctx context.Context, venueID uint64, now time.Time, limit int) (int, time.Time, error) {
	vk := s.keys.Venue(venueID)
	out, err := s.scripts.expireDue.Run(ctx, s.rdb, []string{vk.Wheel(), vk.Ended(), vk.Owners(), vk.Used()}, ms(now), limit).Int64Slice()
	if err != nil {
		return 0, time.Time{}, unavailable("expire due holds", err)
	}
	var next time.Time
	if out[1] >= 0 {
		next = time.UnixMilli(out[1]).UTC()
	}
	return int(out[0]), next, nil
}

// EndedHolds reads up to limit holds of a venue whose units came back at their deadline and whose
// records are still to be written EXPIRED (and announced).
func (s *Store) EndedHolds(ctx context.Context, venueID uint64, now time.Time, limit int) ([]HoldRecord, error) {
	vk := s.keys.Venue(venueID)
	ids, err := s.rdb.ZRangeByScore(ctx, vk.Ended(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(ms(now), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, unavailable("ended holds", err)
	}
	out := make([]HoldRecord, 0, len(ids))
	for _, id := range ids {
		m, err := s.rdb.HGetAll(ctx, vk.Hold(id)).Result()
		if err != nil {
			return nil, unavailable("ended holds", err)
		}
		r, ok := decodeHold(m)
		if !ok {
			r = HoldRecord{ID: id, VenueID: venueID} // the record is gone: only its entry is left to clear
		}
		out = append(out, r)
	}
	return out, nil
}

// FinishExpired writes the records of ended holds EXPIRED (a hold re-taken by a late payment
// meanwhile is left as it is) and takes them off the ended set.
func (s *Store) FinishExpired(ctx context.Context, venueID uint64, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	vk := s.keys.Venue(venueID)
	keys := make([]string, 0, 1+len(ids))
	keys = append(keys, vk.Ended())
	args := make([]any, 0, 2+len(ids))
	args = append(args, ms(now), Keep.Milliseconds())
	for _, id := range ids {
		keys = append(keys, vk.Hold(id))
		args = append(args, id)
	}
	return unavailable("finish expired holds", s.scripts.finishExpired.Run(ctx, s.rdb, keys, args...).Err())
}

// StaleConfirming lists the holds of a venue CONFIRMING since before cutoff.
func (s *Store) StaleConfirming(ctx context.Context, venueID uint64, cutoff time.Time, limit int) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.keys.Venue(venueID).Confirming(),
		&redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(ms(cutoff), 10), Count: int64(limit)}).Result()
	return ids, unavailable("confirming holds", err)
}

// LiveHolds lists the holds on a venue's wheel (HELD, waiting for their deadline).
func (s *Store) LiveHolds(ctx context.Context, venueID uint64) ([]string, error) {
	ids, err := s.rdb.ZRange(ctx, s.keys.Venue(venueID).Wheel(), 0, -1).Result()
	return ids, unavailable("live holds", err)
}

// ForgetConfirming takes a hold that is no longer CONFIRMING off the confirming set.
func (s *Store) ForgetConfirming(ctx context.Context, venueID uint64, holdID string) error {
	return unavailable("forget confirming", s.rdb.ZRem(ctx, s.keys.Venue(venueID).Confirming(), holdID).Err())
}

// Requeue puts a HELD hold missing from the wheel back on it; true when it was missing.
func (s *Store) Requeue(ctx context.Context, r *HoldRecord, now time.Time) (bool, error) {
	n, err := s.rdb.ZAddNX(ctx, s.keys.Venue(r.VenueID).Wheel(), redis.Z{Score: float64(ms(r.Deadline)), Member: r.ID}).Result()
	if err == nil && n == 1 {
		err = s.MarkDue(ctx, r.VenueID, r.Deadline, now)
	}
	return n == 1, unavailable("requeue hold", err)
}

// Alive reports whether every marker of tags is present; false means Redis lost data since the last
// reconciliation.
func (s *Store) Alive(ctx context.Context, tags []string) (bool, error) {
	for _, t := range tags {
		n, err := s.rdb.Exists(ctx, s.keys.Alive(t)).Result()
		if err != nil {
			return false, unavailable("alive", err)
		}
		if n == 0 {
			return false, nil
		}
	}
	return true, nil
}

// MarkAlive sets the markers of tags.
func (s *Store) MarkAlive(ctx context.Context, tags []string, now time.Time) error {
	for _, t := range tags {
		if err := s.rdb.Set(ctx, s.keys.Alive(t), ms(now), 0).Err(); err != nil {
			return unavailable("mark alive", err)
		}
	}
	return nil
}

// Identity names the Redis primaries this client writes to: the run_id of the server, or of every
// master of a cluster, sorted and joined. A primary replaced by a promoted replica (a failover, which
// may have lost acknowledged writes, replication being asynchronous) or restarted changes it. An
// empty answer means the server does not say (the embedded Redis).
func (s *Store) Identity(ctx context.Context) (string, error) {
	var mu sync.Mutex
	var ids []string
	read := func(ctx context.Context, c *redis.Client) error {
		// INFO without a section: the embedded Redis refuses the "server" section (and has no run_id).
		info, err := c.Info(ctx).Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && id != "" {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		return "", nil
	}
	if err != nil {
		return "", unavailable("identity", err)
	}
	slices.Sort(ids)
	return strings.Join(ids, ","), nil
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return unavailable("ping", s.rdb.Ping(ctx).Err()) }

// DeleteVenue deletes every key of a venue (for tools and tests that clean up after themselves;
// the service never deletes a venue's keys). The keys share one hash tag, so one DEL of a batch
// touches one Cluster slot; on a cluster every master is scanned, as the slot's master is not known
// ahead.
func (s *Store) DeleteVenue(ctx context.Context, venueID uint64) error {
	return unavailable("delete venue keys", DeleteMatching(ctx, s.rdb, s.keys.VenuePattern(venueID)))
}

// DeleteMatching deletes the keys matching pattern, which must name keys of one hash tag, on every
// master.
func DeleteMatching(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				if err := c.Del(ctx, batch...).Err(); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			return c.Del(ctx, batch...).Err()
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, rdb)
}

// ReadHolds loads the records of some holds of one venue in one round trip (their keys share the
// venue's hash tag, so the pipeline goes to one node); a missing record is left out.
func (s *Store) ReadHolds(ctx context.Context, venueID uint64, ids []string) (map[string]HoldRecord, error) {
	vk := s.keys.Venue(venueID)
	out := make(map[string]HoldRecord, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 500)
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, n)
		for i, id := range ids[:n] {
			cmds[i] = pipe.HGetAll(ctx, vk.Hold(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, unavailable("read holds", err)
		}
		for i, c := range cmds {
			if r, ok := decodeHold(c.Val()); ok {
				out[ids[i]] = r
			}
		}
		ids = ids[n:]
	}
	return out, nil
}
