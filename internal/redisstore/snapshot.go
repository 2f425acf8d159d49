package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Inventory owns a venue's counted units beyond the hold path: the resource-days loaded from SQL,
// the units of bookings (restored, given back, repaired), the counters' recount, a resource's
// regrid, and the snapshot of it all for audits. Hold records it reads through Holds.
type Inventory struct {
	*shared
	holds *Holds
}

// Units are what one owner holds: Qty units of each of Fields, taken by the booking change Version
// (0 for a hold).
type Units struct {
	Qty     int
	Fields  []string
	Version int
}

// parseUnits reads an owner's "qty|fields|version" (the version may be missing, as the scripts
// allow).
func parseUnits(v string) (Units, bool) {
	parts := strings.Split(v, unitsSep)
	if len(parts) < 2 {
		return Units{}, false
	}
	qty, err := strconv.Atoi(parts[0])
	if err != nil {
		return Units{}, false
	}
	u := Units{Qty: qty, Fields: splitList(parts[1])}
	if len(parts) > 2 {
		u.Version, _ = strconv.Atoi(parts[2])
	}
	return u, true
}

// VenueState is what Redis holds of one venue's units, read in one transaction, for audits by tests
// and tools; the service never reads it.
type VenueState struct {
	Capacity   map[string]int       // slot field → units
	Used       map[string]int       // slot field → units taken
	Owners     map[Owner]Units      // who takes which units
	Days       map[string]bool      // resource-days loaded
	Wheel      map[string]time.Time // live holds → deadline
	Confirming map[string]time.Time // holds being confirmed → since
	Holds      map[string]HoldRecord
}

// ReadVenueState reads a venue's counters, owners, loaded days and timers in one MULTI (its keys
// share one hash tag), then the records of the holds among its owners.
func (s *Inventory) ReadVenueState(ctx context.Context, venueID uint64) (VenueState, error) {
	vk := s.keys.Venue(venueID)
	var capC, usedC, ownersC *redis.MapStringStringCmd
	var daysC *redis.StringSliceCmd
	var wheelC, confC *redis.ZSliceCmd
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		capC, usedC, ownersC = p.HGetAll(ctx, vk.Capacity()), p.HGetAll(ctx, vk.Used()), p.HGetAll(ctx, vk.Owners())
		daysC = p.SMembers(ctx, vk.Days())
		wheelC = p.ZRangeWithScores(ctx, vk.Wheel(), 0, -1)
		confC = p.ZRangeWithScores(ctx, vk.Confirming(), 0, -1)
		return nil
	}); err != nil {
		return VenueState{}, unavailable("read venue state", err)
	}
	st := VenueState{Capacity: ints(capC.Val()), Used: ints(usedC.Val()), Owners: map[Owner]Units{}, Days: map[string]bool{},
		Wheel: scores(wheelC.Val()), Confirming: scores(confC.Val())}
	var holds []string
	for o, v := range ownersC.Val() {
		u, _ := parseUnits(v)
		st.Owners[Owner(o)] = u
		if id, ok := Owner(o).Hold(); ok {
			holds = append(holds, id)
		}
	}
	for _, d := range daysC.Val() {
		st.Days[d] = true
	}
	var err error
	st.Holds, err = s.holds.ReadHolds(ctx, venueID, holds)
	return st, err
}

func ints(m map[string]string) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k], _ = strconv.Atoi(v)
	}
	return out
}

func scores(zs []redis.Z) map[string]time.Time {
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		out[z.Member.(string)] = time.UnixMilli(int64(z.Score)).UTC()
	}
	return out
}

// Freed names units that are to come back: those of Booking, whose change at Version stopped it
// occupying (its units stay if a later change took them again), or those of the hold Hold.
type Freed struct {
	Booking uint64
	Hold    string
	Version int // of Booking's change; 0 for a hold
}

// owner is f's entry in the Owners hash.
func (f Freed) owner() Owner {
	if f.Hold != "" {
		return HoldOwner(f.Hold)
	}
	return BookingOwner(f.Booking)
}

// GiveBack returns the units of owners of one venue that no longer occupy, each exactly once, and
// tombstones the bookings among them. It answers how many gave units back.
func (s *Inventory) GiveBack(ctx context.Context, venueID uint64, freed []Freed, now time.Time) (int, error) {
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
			args = append(args, string(f.owner()), f.Version)
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
func (s *Inventory) Restore(ctx context.Context, venueID uint64, b BookingUnits) (string, error) {
	out, err := s.ensureOwners(ctx, venueID, "restore", []BookingUnits{b})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// EnsureCounted makes sure the units of occupying bookings are counted once each (reconciliation:
// SQL is the truth, so no capacity check; a tombstoned booking was released meanwhile and is left
// alone). It answers how many were added.
func (s *Inventory) EnsureCounted(ctx context.Context, venueID uint64, bs []BookingUnits) (int, error) {
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

func (s *Inventory) ensureOwners(ctx context.Context, venueID uint64, mode string, bs []BookingUnits) ([]string, error) {
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
func (s *Inventory) LoadDay(ctx context.Context, venueID uint64, dayField string, caps []FieldCapacity, bookings []BookingUnits) error {
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
func (s *Inventory) DayLoaded(ctx context.Context, venueID uint64, dayField string) (bool, error) {
	ok, err := s.rdb.SIsMember(ctx, s.keys.Venue(venueID).Days(), dayField).Result()
	return ok, unavailable("day loaded", err)
}

// Recount recomputes a venue's counters from its owners and answers how many were wrong, and the
// slots whose owners hold more units than the slot has.
func (s *Inventory) Recount(ctx context.Context, venueID uint64) (drift int, overfull []string, err error) {
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
func (s *Inventory) Owners(ctx context.Context, venueID uint64) ([]Owner, error) {
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
func (s *Inventory) Regrid(ctx context.Context, venueID uint64, dayFields, oldFields []string, moves []Move) error {
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
func (s *Inventory) CapacityFields(ctx context.Context, venueID, resourceID uint64, from, to time.Time) ([]string, error) {
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

// DeleteVenue deletes every key of a venue (for tools and tests that clean up after themselves;
// the service never deletes a venue's keys). The keys share one hash tag, so one DEL of a batch
// touches one Cluster slot; on a cluster every master is scanned, as the slot's master is not known
// ahead.
func (s *Inventory) DeleteVenue(ctx context.Context, venueID uint64) error {
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
