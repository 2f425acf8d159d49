package redisstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// These targets run the product's scripts (on the test's Redis: the server named by
// SLOTWHEEL_TEST_REDIS_URL, or miniredis) and read back through the Go decoders, so that what a
// script writes and what Go reads of it cannot drift apart.

// fuzzFields lays out n slot fields of a resource, step minutes apart from startMinute, and the
// resource-days they lie in, as the engine names them.
func fuzzFields(resourceID uint64, startMinute int64, n, step int) (fields, days []string) {
	for i := 0; i < n; i++ {
		m := startMinute + int64(i*step)
		fields = append(fields, redisstore.SlotField(resourceID, m))
		d := redisstore.DayField(resourceID, time.Unix(m*60, 0).UTC().Format(booking.DayLayout))
		if !slices.Contains(days, d) {
			days = append(days, d)
		}
	}
	return fields, days
}

// openDays loads the days of fields with room for qty units in each slot, and no bookings.
func openDays(t *testing.T, s *redisstore.Store, venueID uint64, fields, days []string, qty int) {
	t.Helper()
	for _, d := range days {
		var caps []redisstore.FieldCapacity
		for _, f := range fields {
			if redisstore.FieldResource(f) == redisstore.DayResource(d) {
				caps = append(caps, redisstore.FieldCapacity{Field: f, Capacity: qty})
			}
		}
		require.NoError(t, s.LoadDay(context.Background(), venueID, d, caps, nil))
	}
}

// fuzzVenue is the venue every exec works in; each exec deletes its keys when it ends.
const fuzzVenue = 4242

// FuzzHoldRecord takes a hold — of one resource, or of a service with roles named by any text the
// catalog accepts (one role a line) — through the hold scripts, and reads it back: the record
// ReadHold decodes is the one that was written, field for field.
func FuzzHoldRecord(f *testing.F) {
	rd := testenv.NewRedis(f)
	s := redisstore.New(rd.Client, rd.Prefix)
	f.Fuzz(func(t *testing.T, user string, resource, service uint64, qty uint16, startMinute int32, slots, step uint8,
		createdMs int64, ttlMs uint32, amount int64, roles string) {
		ctx := context.Background()
		t.Cleanup(func() { require.NoError(t, s.DeleteVenue(ctx, fuzzVenue)) })
		if user == "" || resource == 0 || qty == 0 || ttlMs == 0 || createdMs < 0 || createdMs > 1<<50 {
			return // the engine holds for a known user, on a resource, at least one unit, for a while
		}
		ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }
		start := int64(startMinute)
		n := int(slots%24) + 1
		fields, days := fuzzFields(resource, start, n, int(step)+1)
		r := redisstore.HoldRecord{ID: redisstore.NewHoldID(fuzzVenue), UserID: user, VenueID: fuzzVenue, ResourceID: resource,
			ServiceID: service, Quantity: int(qty), Status: booking.HoldHeld, Start: ms(start * 60000), End: ms((start + int64(n)) * 60000),
			OccupyStart: ms(start * 60000), OccupyEnd: ms((start + int64(n*(int(step)+1))) * 60000),
			Deadline: ms(createdMs + int64(ttlMs)), Created: ms(createdMs), AmountCents: amount}
		now := r.Created
		var err error
		r.CatalogVersion, err = s.CatalogVersion(ctx, fuzzVenue)
		require.NoError(t, err)

		var names []string
		for _, name := range strings.Split(roles, "\n") {
			if booking.CheckName("role", name, booking.MaxTagLen) == nil && !slices.Contains(names, name) && len(names) < 10 {
				names = append(names, name) // what the catalog takes as a service's roles
			}
		}
		if len(names) == 0 {
			r.Fields, r.Days = fields, days
			openDays(t, s, fuzzVenue, fields, days, int(qty))
			out, cold, err := s.Hold(ctx, &r, now, 0)
			require.NoError(t, err)
			require.Equal(t, redisstore.HoldOK, out, "cold: %s", cold)
		} else {
			rs := make([]redisstore.Role, len(names))
			for i, name := range names {
				rid := resource + uint64(i) // one resource a role, each with slots of its own
				fs, ds := fuzzFields(rid, start, n, int(step)+1)
				openDays(t, s, fuzzVenue, fs, ds, int(qty))
				rs[i] = redisstore.Role{Name: name, Candidates: []redisstore.RoleCandidate{{ResourceID: rid, Fields: fs, Days: ds}}}
			}
			out, cold, err := s.HoldRoles(ctx, &r, rs, now, 0)
			require.NoError(t, err)
			require.Equal(t, redisstore.HoldOK, out, "cold: %s", cold)
			require.Len(t, r.Roles, len(names))
		}

		got, ok, err := s.ReadHold(ctx, r.ID)
		require.NoError(t, err)
		require.True(t, ok, "the hold just taken is not found")
		r.CatalogVersion = "" // not stored: only the script compares it
		require.Equal(t, r, got)
		require.Equal(t, booking.HoldHeld, got.Effective(now))
	})
}

// FuzzOwnerUnits writes a booking's units (qty|fields|version, encoded and decoded only in Lua)
// through the scripts that load, move and give them back, and checks every decode by its effect on
// the counters: loading counts qty in each field; a move reserves only the fields not yet held and
// reads back (PendingMoves) as written; finishing it leaves the booking on exactly its new fields;
// giving back at a version older than the units' leaves them, at theirs or later frees them all.
func FuzzOwnerUnits(f *testing.F) {
	rd := testenv.NewRedis(f)
	s := redisstore.New(rd.Client, rd.Prefix)
	keys := s.Keys().Venue(fuzzVenue)
	f.Fuzz(func(t *testing.T, bookingID, resource uint64, qty uint16, startMinute int32, n, step, shift uint8,
		version, moveVersion, upto uint32, nowMs int64) {
		ctx := context.Background()
		t.Cleanup(func() { require.NoError(t, s.DeleteVenue(ctx, fuzzVenue)) })
		q := int(qty % 1001)
		if bookingID == 0 || resource == 0 || q == 0 || version == 0 || moveVersion <= version {
			return // a booking takes units at a version (1 on), and a move commits a later one
		}
		if nowMs < 0 || nowMs >= 1e13 {
			return // the scripts' Lua 5.1 writes a number of 15 digits or more (a ms time past 2286) as 1e+14
		}
		count := int(n%48) + 1
		old, days := fuzzFields(resource, int64(startMinute), count, int(step)+1)
		moved, movedDays := fuzzFields(resource, int64(startMinute)+int64(shift), count, int(step)+1)
		used := func() map[string]string {
			m, err := rd.Client.HGetAll(ctx, keys.Used()).Result()
			require.NoError(t, err)
			return m
		}
		counted := func(fields []string) map[string]string {
			m := map[string]string{}
			for _, f := range fields {
				m[f] = strconv.Itoa(q)
			}
			return m
		}

		// Load: the booking's units are counted once in each of its fields.
		all := append(slices.Clone(old), moved...)
		var caps []redisstore.FieldCapacity
		for _, f := range all {
			caps = append(caps, redisstore.FieldCapacity{Field: f, Capacity: 2 * q})
		}
		bu := redisstore.BookingUnits{BookingID: bookingID, Qty: q, Fields: old, Version: int(version)}
		for i, d := range append(slices.Clone(days), movedDays...) {
			var load []redisstore.BookingUnits
			if i == 0 {
				load = []redisstore.BookingUnits{bu}
			}
			require.NoError(t, s.LoadDay(ctx, fuzzVenue, d, caps, load))
		}
		require.Equal(t, counted(old), used())

		// Move: only the new window's fields the booking does not hold yet are taken, and the move
		// reads back as written.
		nowAt := time.UnixMilli(nowMs).UTC()
		out, cold, err := s.ReserveMove(ctx, fuzzVenue, redisstore.BookingUnits{BookingID: bookingID, Qty: q, Fields: moved,
			Version: int(moveVersion)}, movedDays, nowAt, time.Minute)
		require.NoError(t, err)
		require.Equal(t, redisstore.MoveOK, out, "cold: %s", cold)
		both := counted(old)
		for _, f := range moved {
			both[f] = strconv.Itoa(q)
		}
		require.Equal(t, both, used(), "the move takes each extra field once")
		pending, err := s.PendingMoves(ctx, fuzzVenue)
		require.NoError(t, err)
		require.Equal(t, []redisstore.PendingMove{{BookingID: bookingID, Version: int(moveVersion), Fields: moved, Since: nowAt}}, pending)
		end, err := s.FinishMove(ctx, fuzzVenue, bookingID, int(moveVersion))
		require.NoError(t, err)
		require.Equal(t, "finished", end)
		require.Equal(t, counted(moved), used(), "a finished move holds exactly the new window")

		// Give back: units taken by a later change than the one that freed them stay.
		freed, err := s.GiveBack(ctx, fuzzVenue, []redisstore.Freed{{Booking: bookingID, Version: int(upto)}}, nowAt)
		require.NoError(t, err)
		if upto != 0 && upto < moveVersion {
			require.Zero(t, freed)
			require.Equal(t, counted(moved), used(), "an older change gave back newer units")
			return
		}
		require.Equal(t, 1, freed)
		require.Empty(t, used(), "units left after they were given back")
	})
}
