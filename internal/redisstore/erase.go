package redisstore

import (
	"context"
	"slices"
)

// eraseBatch bounds the holds one erase script rewrites, so that it stays short.
const eraseBatch = 500

// EraseHolds gives the holds of user at one venue to their pseudonym (see erase_holds.lua) and
// answers how many hold records there name the pseudonym: those given now and by an earlier erasure.
// It reads the user's list of holds again while holds appear on it meanwhile (a hold being made as
// the user is erased), a few times at most; left is what remained on the list after that.
//
// The list is trimmed by age only when the user makes another hold at the venue, and every record
// outlives its place on it by at most the hold's lifetime, so a record this misses ends within that.
// A paid hold has no record: the booking answers for it.
func (s *Holds) EraseHolds(ctx context.Context, venueID uint64, user, pseudonym string) (n, left int, err error) {
	vk := s.keys.Venue(venueID)
	lists := []string{vk.UserHolds(user), vk.UserLive(user), vk.UserHolds(pseudonym), vk.UserLive(pseudonym)}
	for range 3 {
		var ids []string
		for _, l := range []string{lists[0], lists[2]} {
			got, err := s.rdb.ZRange(ctx, l, 0, -1).Result()
			if err != nil {
				return 0, 0, unavailable("read holds to erase", err)
			}
			ids = append(ids, got...)
		}
		if len(ids) == 0 {
			return 0, 0, nil
		}
		n, left = 0, 0
		for batch := range slices.Chunk(slices.Compact(slices.Sorted(slices.Values(ids))), eraseBatch) {
			keys := slices.Clone(lists)
			args := []any{user, pseudonym}
			for _, id := range batch {
				keys = append(keys, vk.Hold(id))
				args = append(args, id)
			}
			out, err := s.scripts.eraseHolds.Run(ctx, s.rdb, keys, args...).Int64Slice()
			if err != nil {
				return 0, 0, unavailable("erase holds", err)
			}
			n, left = n+int(out[0]), int(out[1])
		}
		if left == 0 {
			return n, 0, nil
		}
	}
	return n, left, nil
}
