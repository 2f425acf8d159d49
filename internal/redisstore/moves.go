package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Moves owns the moves of bookings to a new window: reserving the new window's units next to the
// old ones, ending the move either way, and listing the moves under way.
type Moves struct{ *shared }

// MoveOutcome is what reserving a booking's move answered.
type MoveOutcome string

// Move outcomes.
const (
	MoveOK      MoveOutcome = "ok"
	MoveCold    MoveOutcome = "cold"    // a day of the new window is not loaded: load it and try again
	MoveFull    MoveOutcome = "full"    // a unit of the new window is taken
	MoveClosed  MoveOutcome = "closed"  // a slot of the new window has no capacity
	MoveMissing MoveOutcome = "missing" // the booking holds no units (Redis lost them: reconcile)
	MoveBusy    MoveOutcome = "busy"    // another move of the booking is under way
)

// ReserveMove takes, for booking b's move to fields (in days) committing at version, the units the
// new window needs beyond those b already holds. The booking's old units stay until EndMove; a move
// still reserved after stale was left behind, and the wheel looks at the venue then.
func (s *Moves) ReserveMove(ctx context.Context, venueID uint64, b BookingUnits, days []string, now time.Time, stale time.Duration) (MoveOutcome, string, error) {
	vk := s.keys.Venue(venueID)
	// The wheel looks again once the move could be abandoned (a process that died mid-move).
	out, err := s.runMarked(ctx, s.scripts.reserveMove, evalsha(s.scripts.reserveMove,
		[]string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Moves(), vk.Wheel(), vk.Ended(), vk.Days()},
		[]any{ms(now), b.BookingID, b.Qty, strings.Join(b.Fields, listSep), strings.Join(days, listSep), b.Version}),
		venueID, now.Add(stale+time.Second), now)
	if err != nil {
		return "", "", unavailable("reserve move", err)
	}
	day := ""
	if len(out) > 1 {
		day = out[1]
	}
	return MoveOutcome(out[0]), day, nil
}

// FinishMove leaves a booking holding exactly its move's new window (MySQL committed the move);
// AbortMove exactly its old one (MySQL did not). version 0 ends whatever move the booking has.
func (s *Moves) FinishMove(ctx context.Context, venueID, bookingID uint64, version int) (string, error) {
	return s.endMove(ctx, venueID, bookingID, "finish", version)
}

// AbortMove gives back a move's own units; see FinishMove.
func (s *Moves) AbortMove(ctx context.Context, venueID, bookingID uint64, version int) (string, error) {
	return s.endMove(ctx, venueID, bookingID, "abort", version)
}

func (s *Moves) endMove(ctx context.Context, venueID, bookingID uint64, how string, version int) (string, error) {
	vk := s.keys.Venue(venueID)
	out, err := s.scripts.endMove.Run(ctx, s.rdb, []string{vk.Owners(), vk.Used(), vk.Moves()}, bookingID, how, version).Text()
	return out, unavailable("end move", err)
}

// PendingMove is a move under way (or left behind by a process that died).
type PendingMove struct {
	BookingID uint64
	Version   int
	Fields    []string
	Since     time.Time
}

// PendingMoves lists a venue's moves under way.
func (s *Moves) PendingMoves(ctx context.Context, venueID uint64) ([]PendingMove, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Venue(venueID).Moves()).Result()
	if err != nil {
		return nil, unavailable("pending moves", err)
	}
	out := make([]PendingMove, 0, len(m))
	for id, v := range m {
		parts := strings.Split(v, unitsSep)
		bid, err := strconv.ParseUint(id, 10, 64)
		if err != nil || len(parts) != 4 {
			continue
		}
		ver, _ := strconv.Atoi(parts[0])
		since, _ := strconv.ParseInt(parts[3], 10, 64)
		out = append(out, PendingMove{BookingID: bid, Version: ver, Fields: splitList(parts[2]), Since: time.UnixMilli(since).UTC()})
	}
	return out, nil
}
