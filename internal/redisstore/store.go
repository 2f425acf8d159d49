// Package redisstore is slotwheel's hot state in Redis: slot counters, unpaid holds, the deadline
// wheel, the owners of units and the days loaded from SQL. Every mutation is one Lua script (lua/,
// each headed by its KEYS/ARGV/Output contract) run by one typed method here; every key is built in
// keys.go; the hold record and the owner encoding are defined once, in Go, and handed to the scripts
// by a generated prelude. It decides nothing about bookings: the engine (and engine/booking) does.
// Redis failures come back wrapped in booking.ErrBackendUnavailable.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// shared is the plumbing every capability of a Store runs on: one client, one keyspace, one set of
// scripts, and the batcher that sends the hold path's scripts together. The runner of scripts that
// mark a venue's timer (runMarked) is here too, as holds and moves both need it.
type shared struct {
	rdb     redis.UniversalClient
	keys    Keys
	scripts *scripts
	batch   *batcher // the hold path's scripts, sent together (batch.go)
}

// Store runs the scripts of one keyspace. It is the assembly of the capabilities below, each owning
// one part of the keyspace's state on the same shared plumbing; their methods are promoted, so a
// caller holds one Store and calls, say, Hold or Lease on it. Every method has one home.
type Store struct {
	*shared
	*Holds       // units taken by holds: hold, confirm, cancel, refuse, erase (store.go, erase.go)
	*Inventory   // loaded days and bookings' units: load, restore, give back, repair, regrid (snapshot.go)
	*Wheel       // hold deadlines and venue timers (timers.go)
	*Moves       // bookings moving to a new window (moves.go)
	*Idempotency // keyed requests' records (idempotency.go)
	*Limits      // rate limits and no-show freezes (limits.go)
	*Leases      // background loops' leases and progress notes (timers.go)
	*Recovery    // what tells that Redis lost data (timers.go)
}

// New builds a Store on rdb under prefix.
func New(rdb redis.UniversalClient, prefix string) *Store {
	sh := &shared{rdb: rdb, keys: NewKeys(prefix), scripts: loadScripts(), batch: newBatcher(rdb)}
	holds := &Holds{sh}
	return &Store{
		shared:      sh,
		Holds:       holds,
		Inventory:   &Inventory{shared: sh, holds: holds},
		Wheel:       &Wheel{sh},
		Moves:       &Moves{sh},
		Idempotency: &Idempotency{sh},
		Limits:      &Limits{sh},
		Leases:      &Leases{sh},
		Recovery:    &Recovery{sh},
	}
}

// Keys returns the store's keyspace.
func (s *Store) Keys() Keys { return s.keys }

// Client returns the Redis client, for readiness checks.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return unavailable("ping", s.rdb.Ping(ctx).Err()) }

// unavailable wraps a Redis failure.
func unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redis %s: %w: %w", op, booking.ErrBackendUnavailable, err)
}

// Unexpected is a Redis answer that should not happen (a script's outcome no caller expects, a day
// that would not load): to the caller it is Redis failing.
func Unexpected(msg string) error {
	return fmt.Errorf("redis: %w: %s", booking.ErrBackendUnavailable, msg)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Holds owns the units that holds take and the hold records: taking them (alone, with an
// idempotency step, or by roles), reading slots and holds, the steps of a confirm, cancelling,
// refusing, and erasing a user's holds. Expiring them at their deadlines is the Wheel's.
type Holds struct{ *shared }

// HoldOutcome is what the hold script answered.
type HoldOutcome string

// Hold outcomes.
const (
	HoldOK     HoldOutcome = "ok"
	HoldCold   HoldOutcome = "cold"   // a day is not loaded: load it and try again
	HoldFull   HoldOutcome = "full"   // a unit is taken
	HoldClosed HoldOutcome = "closed" // a slot has no capacity
	HoldLimit  HoldOutcome = "limit"  // the user has too many live holds at the venue
	HoldStale  HoldOutcome = "stale"  // the venue's catalog changed since the hold was decided: read it again
)

// Hold takes the units of r (a new hold, status HELD) all or nothing and puts its deadline on the
// wheel. maxLive bounds the user's live holds at the venue (0: no bound). A cold answer names the
// resource-day to load.
func (s *Holds) Hold(ctx context.Context, r *HoldRecord, now time.Time, maxLive int) (HoldOutcome, string, error) {
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
func (s *Holds) Clustered() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// HoldOnce is Hold with an idempotency step (step may be nil; not on a cluster): a request answered
// before takes nothing and answers HoldDone with its stored answer, or HoldReused/HoldRunning; a new
// hold and a full slot store step's answer; the other refusals (closed, limit) reserve the record,
// which the caller finishes with its answer (IdemFinish). A cold answer stores nothing.
func (s *Holds) HoldOnce(ctx context.Context, r *HoldRecord, now time.Time, maxLive int, step *IdemStep) (HoldOutcome, string, IdemAnswer, error) {
	vk := s.keys.Venue(r.VenueID)
	nkeys := 10
	if step != nil {
		nkeys++ // the idempotency record's
	}
	// The command is built in the one slice it is sent from: a rush is thousands of them.
	cmd := make([]any, 0, 3+nkeys+16+holdPairs)
	cmd = append(cmd, "evalsha", s.scripts.holdSlots.Hash(), nkeys,
		vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(),
		vk.Hold(r.ID), vk.UserHolds(r.UserID), vk.UserLive(r.UserID), vk.CatalogVersion())
	if step != nil {
		cmd = append(cmd, s.keys.Idempotency(step.Scope))
	}
	cmd = append(cmd, ms(now), ms(r.Deadline), r.Quantity, r.ID, Keep.Milliseconds(),
		strings.Join(r.Days, listSep), strings.Join(r.Fields, listSep), maxLive)
	if step != nil {
		cmd = append(cmd, step.Hash, step.TTL.Milliseconds(), step.Stale.Milliseconds(),
			step.OK.Status, step.OK.Body, step.Full.Status, step.Full.Body)
	} else {
		cmd = append(cmd, "", 0, 0, 0, "", 0, "")
	}
	cmd = append(cmd, r.CatalogVersion)
	cmd = r.appendPairs(cmd)
	out, err := s.runMarked(ctx, s.scripts.holdSlots, cmd, r.VenueID, r.Deadline, now)
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
func (s *Holds) HoldRoles(ctx context.Context, r *HoldRecord, roles []Role, now time.Time, maxLive int) (HoldOutcome, string, error) {
	vk := s.keys.Venue(r.VenueID)
	keys := []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(), vk.Hold(r.ID),
		vk.UserHolds(r.UserID), vk.UserLive(r.UserID), vk.CatalogVersion()}
	args := []any{ms(now), ms(r.Deadline), r.Quantity, r.ID, Keep.Milliseconds(), maxLive, len(roles)}
	for _, role := range roles {
		args = append(args, escapeRole.Replace(role.Name), len(role.Candidates))
		for _, c := range role.Candidates {
			args = append(args, c.ResourceID, strings.Join(c.Days, listSep), strings.Join(c.Fields, listSep))
		}
	}
	args = append(args, r.CatalogVersion)
	args = r.appendPairs(args)
	out, err := s.runMarked(ctx, s.scripts.holdRoles, evalsha(s.scripts.holdRoles, keys, args), r.VenueID, r.Deadline, now)
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

// runMarked runs sc's EVALSHA command cmd (see evalsha), a script that may put a hold on a venue's
// wheel, and marks the venue's timer at at in the same round trip (a pipeline; in a Redis Cluster,
// one per master, sent together). The mark is made whatever the script answers: a needless mark
// costs the wheel one look at the venue.
func (s *shared) runMarked(ctx context.Context, sc *redis.Script, cmd []any, venueID uint64, at, now time.Time) ([]string, error) {
	c, err := s.evalMarked(ctx, sc, cmd, venueID, at, now)
	if err != nil {
		return nil, err
	}
	return replyStrings(c.Result())
}

// evalsha is the EVALSHA command of sc on keys and args, as one slice of arguments. A hold builds
// its command in such a slice itself (HoldOnce): a rush is thousands of them.
func evalsha(sc *redis.Script, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// evalMarked is runMarked for a script whose answer is not a list of strings; cmd is sc's EVALSHA
// command (see evalsha).
func (s *shared) evalMarked(ctx context.Context, sc *redis.Script, cmd []any, venueID uint64, at, now time.Time) (*redis.Cmd, error) {
	for attempt := 0; ; attempt++ {
		// With the scripts of other requests running at the same time (batch.go).
		var c *redis.Cmd
		if err := s.batch.do(ctx, func(ctx context.Context, b *batch) {
			c = b.pipe.Do(ctx, cmd...)
			s.markDueOnce(ctx, b, venueID, at, now)
		}); err != nil {
			return nil, err
		}
		err := c.Err()
		if attempt == 0 && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// A pipeline sends EVALSHA only: load the script (on every master) and go again.
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				return nil, err
			}
			continue
		}
		return c, err
	}
}

// ReadSlots reads the capacity (-1 when closed) and units taken of fields of a venue, after expiring
// due holds. cold names a resource-day of days that is not loaded (nothing else is answered then).
func (s *Holds) ReadSlots(ctx context.Context, venueID uint64, now time.Time, days, fields []string) (caps, used []int, cold string, err error) {
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
func (s *Holds) ReadHold(ctx context.Context, id string) (HoldRecord, bool, error) {
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
func (s *Holds) UserHolds(ctx context.Context, venueID uint64, userID string, limit int) ([]string, error) {
	ids, err := s.rdb.ZRevRange(ctx, s.keys.Venue(venueID).UserHolds(userID), 0, int64(limit)-1).Result()
	return ids, unavailable("list holds", err)
}

// SetOrderNo notes on a hold's record the payment provider's order made for it.
func (s *Holds) SetOrderNo(ctx context.Context, venueID uint64, holdID, orderNo string) error {
	return unavailable("note order", s.scripts.setOrder.Run(ctx, s.rdb, []string{s.keys.Venue(venueID).Hold(holdID)}, orderNo).Err())
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
func (s *Holds) MarkConfirming(ctx context.Context, r *HoldRecord, now time.Time, revive bool, stale time.Duration) (ConfirmStep, error) {
	vk := s.keys.Venue(r.VenueID)
	flag := "0"
	if revive {
		flag = "1"
	}
	// The wheel looks again once the confirm could be abandoned (a process that died mid-confirm).
	out, err := s.runMarked(ctx, s.scripts.markConfirming, evalsha(s.scripts.markConfirming,
		[]string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Days(), vk.Hold(r.ID), vk.Confirming(), vk.UserLive(r.UserID)},
		[]any{ms(now), flag, stale.Milliseconds()}), r.VenueID, now.Add(stale+time.Second), now)
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
func (s *Holds) Settle(ctx context.Context, r *HoldRecord, bookingID uint64, version int) (string, error) {
	vk := s.keys.Venue(r.VenueID)
	out, err := s.scripts.settleHold.Run(ctx, s.rdb,
		[]string{vk.Owners(), vk.Used(), vk.Hold(r.ID), vk.Wheel(), vk.Gone(), vk.Confirming(), vk.Ended(),
			vk.UserHolds(r.UserID), vk.UserLive(r.UserID)},
		r.ID, bookingID, r.Quantity, strings.Join(r.Fields, listSep), version).Text()
	return out, unavailable("settle hold", err)
}

// Unconfirm puts a hold whose booking was certainly not committed back on the wheel.
func (s *Holds) Unconfirm(ctx context.Context, r *HoldRecord, now time.Time) error {
	vk := s.keys.Venue(r.VenueID)
	_, err := s.evalMarked(ctx, s.scripts.unconfirm, evalsha(s.scripts.unconfirm,
		[]string{vk.Wheel(), vk.Hold(r.ID), vk.Confirming(), vk.UserLive(r.UserID)},
		[]any{ms(now), Keep.Milliseconds()}), r.VenueID, r.Deadline, now)
	return unavailable("unconfirm hold", err)
}

// CancelHold gives up a live hold. It answers "cancelled", "busy" (being confirmed), "missing", or
// the hold's effective status when it is no longer live.
func (s *Holds) CancelHold(ctx context.Context, r *HoldRecord, now time.Time) (string, error) {
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
func (s *Holds) RefuseHold(ctx context.Context, r *HoldRecord, mode string, now time.Time) (string, error) {
	vk := s.keys.Venue(r.VenueID)
	out, err := s.scripts.refuseHold.Run(ctx, s.rdb,
		[]string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Wheel(), vk.Ended(), vk.Confirming(), vk.Hold(r.ID), vk.UserLive(r.UserID)},
		ms(now), Keep.Milliseconds(), mode).Text()
	return out, unavailable("refuse hold", err)
}

// ReadHolds loads the records of some holds of one venue in one round trip (their keys share the
// venue's hash tag, so the pipeline goes to one node); a missing record is left out.
func (s *Holds) ReadHolds(ctx context.Context, venueID uint64, ids []string) (map[string]HoldRecord, error) {
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

// Catalog versions: one string per venue, and one for the settings that span venues, so that every
// instance can tell whether its copy of the catalog (engine/catalog) is older than the last admin
// change another instance answered. A version starts at an epoch of the clock (unix µs) and counts
// up by one per change; when Redis loses it, it starts again at a later epoch, so that no copy read
// before the loss can match it again.

// CatalogVersion answers the catalog version of venue venueID (0: the global one), starting one when
// there is none.
func (s *Holds) CatalogVersion(ctx context.Context, venueID uint64) (string, error) {
	vs, err := s.CatalogVersions(ctx, venueID, 0)
	if err != nil {
		return "", err
	}
	return vs[0], nil
}

// CatalogVersions answers the catalog versions of venueIDs (0: the global one) in one round trip,
// starting those there are none of.
func (s *Holds) CatalogVersions(ctx context.Context, venueIDs ...uint64) ([]string, error) {
	keys := make([]string, len(venueIDs))
	for i, id := range venueIDs {
		keys[i] = s.catalogKey(id)
	}
	pipe := s.rdb.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("catalog version", err)
	}
	out := make([]string, len(keys))
	for i, g := range gets {
		v, err := g.Result()
		if errors.Is(err, redis.Nil) {
			// First read, or after a loss: a new epoch, unless another instance started one meanwhile.
			if err := s.rdb.SetNX(ctx, keys[i], epoch(), 0).Err(); err != nil {
				return nil, unavailable("catalog version", err)
			}
			v, err = s.rdb.Get(ctx, keys[i]).Result()
		}
		if err != nil {
			return nil, unavailable("catalog version", err)
		}
		out[i] = v
	}
	return out, nil
}

// BumpCatalog moves the catalog versions of venueIDs (0: the global one) on after a change, in one
// round trip; a version Redis lost starts at a new epoch.
func (s *Holds) BumpCatalog(ctx context.Context, venueIDs []uint64) error {
	if len(venueIDs) == 0 {
		return nil
	}
	if err := s.scripts.bumpVersion.Load(ctx, s.rdb).Err(); err != nil {
		return unavailable("bump catalog version", err)
	}
	pipe := s.rdb.Pipeline()
	e := epoch()
	for _, id := range venueIDs {
		s.scripts.bumpVersion.EvalSha(ctx, pipe, []string{s.catalogKey(id)}, e)
	}
	_, err := pipe.Exec(ctx)
	return unavailable("bump catalog version", err)
}

func (s *Holds) catalogKey(venueID uint64) string {
	if venueID == 0 {
		return s.keys.CatalogGlobal()
	}
	return s.keys.Venue(venueID).CatalogVersion()
}

// epoch is a new version's start: the clock in unix µs, so that a version started after a loss is
// past every version counted before it (a count never gains a million a second).
func epoch() string { return strconv.FormatInt(time.Now().UnixMicro(), 10) }
