package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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
func (s *Store) ReadVenueState(ctx context.Context, venueID uint64) (VenueState, error) {
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
	st.Holds, err = s.ReadHolds(ctx, venueID, holds)
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
