package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// The capacity ledger is slot_inventories.occupied: per slot of a resource, the units its occupying
// bookings take. Every booking change that takes or gives units (booking.Change.Units) changes it in
// the change's own transaction, and a take is a guarded UPDATE (`occupied + q <= capacity`), so that
// MySQL itself refuses a booking that would take a slot past its capacity, whatever Redis — the fast
// gate in front of it, whose replication is asynchronous — believed. Redis decides who may hold;
// the ledger decides what is sold.

// ErrOverCapacity: the ledger refused a change, because a slot it takes would pass its capacity (or
// has no inventory row). The transaction was rolled back; a *CapacityError names the slots. It is
// sqldb's, whose error mapping lets it through as it is.
var ErrOverCapacity = sqldb.ErrOverCapacity

// CapacityError is a refusal of the ledger, naming the refused slots by their fields (and, where it
// is known, the bookings already on them).
type CapacityError struct {
	Slots    []string
	Bookings []uint64
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("%v: %s", ErrOverCapacity, strings.Join(e.Slots, ", "))
}

// Is makes a CapacityError match ErrOverCapacity.
func (e *CapacityError) Is(target error) bool { return target == ErrOverCapacity }

// slotKey is a slot as the ledger keys it: its resource and its start in unix minutes (the form of
// the Redis slot fields that bookings keep in their slots column).
type slotKey struct {
	resource uint64
	minute   int64
}

// parseSlot reads a slot field ("<resource>:<unix minute>").
func parseSlot(field string) (slotKey, error) {
	r, m, ok := strings.Cut(field, ":")
	res, err1 := strconv.ParseUint(r, 10, 64)
	min, err2 := strconv.ParseInt(m, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return slotKey{}, fmt.Errorf("ledger: %q is not a slot field", field)
	}
	return slotKey{res, min}, nil
}

func (k slotKey) field() string {
	return strconv.FormatUint(k.resource, 10) + ":" + strconv.FormatInt(k.minute, 10)
}

// start is the slot's start as the inventory stores it: UTC, which is also how the embedded SQLite
// compares it (as text).
func (k slotKey) start() time.Time { return time.Unix(k.minute*60, 0).UTC() }

// ledgerMoves are the units a transaction moves on the ledger: per slot, what it gives back and what
// it takes.
type ledgerMoves struct{ give, take map[slotKey]int }

// add records what change c of a booking of qty units does: it gives back the units of the window
// it leaves (from) and takes those of the window it enters (to); for anything but a move both are
// the booking's one window.
func (l *ledgerMoves) add(c booking.Change, qty int, from, to []string) error {
	u := c.Units()
	if u.Give {
		if err := l.count(&l.give, qty, from); err != nil {
			return err
		}
	}
	if u.Take {
		return l.count(&l.take, qty, to)
	}
	return nil
}

func (l *ledgerMoves) count(m *map[slotKey]int, qty int, fields []string) error {
	if *m == nil {
		*m = map[slotKey]int{}
	}
	for _, f := range fields {
		k, err := parseSlot(f)
		if err != nil {
			return err
		}
		(*m)[k] += qty
	}
	return nil
}

// apply writes the moves: the units given back first (so that a move onto slots it shares with its
// old window needs no room it already has), then the takes, each refused by MySQL itself when it
// would pass a slot's capacity (*CapacityError). It answers how many slots could not give back
// what the moves say (the ledger said fewer units: a drift that reconciliation repairs).
func (l *ledgerMoves) apply(tx *gorm.DB) (mismatched int, err error) {
	for _, g := range groups(l.give) {
		res := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND start IN ? AND occupied >= ?", g.resource, g.starts, g.qty).
			Update("occupied", gorm.Expr("occupied - ?", g.qty))
		if res.Error != nil {
			return 0, res.Error
		}
		mismatched += len(g.starts) - int(res.RowsAffected)
	}
	for _, g := range groups(l.take) {
		res := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND start IN ? AND occupied + ? <= capacity", g.resource, g.starts, g.qty).
			Update("occupied", gorm.Expr("occupied + ?", g.qty))
		if res.Error != nil {
			return 0, res.Error
		}
		if int(res.RowsAffected) != len(g.starts) {
			return 0, refused(tx, g)
		}
	}
	return mismatched, nil
}

// ledgerGroup is one guarded UPDATE: the slots of one resource that move by the same number of units.
// Slots are sorted, so that concurrent changes lock a resource's rows in one order.
type ledgerGroup struct {
	resource uint64
	qty      int
	starts   []time.Time
	keys     []slotKey
}

func groups(m map[slotKey]int) []ledgerGroup {
	type gk struct {
		resource uint64
		qty      int
	}
	by := map[gk]*ledgerGroup{}
	for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.minute, b.minute))
	}) {
		q := m[k]
		if q == 0 {
			continue
		}
		g := by[gk{k.resource, q}]
		if g == nil {
			g = &ledgerGroup{resource: k.resource, qty: q}
			by[gk{k.resource, q}] = g
		}
		g.starts = append(g.starts, k.start())
		g.keys = append(g.keys, k)
	}
	out := make([]ledgerGroup, 0, len(by))
	for _, g := range by {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b ledgerGroup) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.keys[0].minute, b.keys[0].minute), cmp.Compare(a.qty, b.qty))
	})
	return out
}

// refused names the slots of g that the guarded UPDATE did not take: those without room, and those
// without an inventory row.
func refused(tx *gorm.DB, g ledgerGroup) error {
	var rows []models.SlotInventory
	if err := tx.Select("resource_id, start").Where("resource_id = ? AND start IN ? AND occupied + ? <= capacity", g.resource, g.starts, g.qty).
		Find(&rows).Error; err != nil {
		return err
	}
	fit := map[int64]bool{}
	for _, r := range rows {
		fit[r.Start.Unix()/60] = true
	}
	e := &CapacityError{}
	for _, k := range g.keys {
		if !fit[k.minute] {
			e.Slots = append(e.Slots, k.field())
		}
	}
	return e
}

// SlotLedger is one slot as the ledger and the bookings see it.
type SlotLedger struct {
	Field    string // "<resource>:<unix minute>"
	Capacity int
	Occupied int // the ledger's count
	// Booked is what the slot's occupying bookings take (their units), and Bookings their ids.
	Booked   int
	Bookings []uint64
}

// Over reports whether the slot's bookings take more units than it has: an oversell.
func (s SlotLedger) Over() bool { return s.Booked > s.Capacity }

// Ledger is the capacity ledger as the store's other capabilities write it — the moves of booking
// changes (apply), in their transactions — and its check and repair against the bookings
// (CheckLedger). Its inventory rows are the catalog's.
type Ledger struct {
	db  *sqldb.DB
	off bool // MeasureWithoutLedger
}

// apply writes the moves of a transaction's changes onto the capacity ledger (see
// ledgerMoves.apply); a drift found on the way is reported once the transaction commits.
func (s *Ledger) apply(tx *gorm.DB, l *ledgerMoves) error {
	if s.off {
		return nil
	}
	n, err := l.apply(tx)
	if err != nil || n == 0 {
		return err
	}
	sqldb.MarkDrift(tx, n)
	return nil
}

// LedgerReport is what a check of the ledger found.
type LedgerReport struct {
	Slots    int          // slots looked at (with units on the ledger or under bookings)
	Repaired []SlotLedger // slots whose ledger count differed from their bookings, and was set to them
	Over     []SlotLedger // slots whose bookings take more units than the slot has
	Missing  []SlotLedger // slots that occupying bookings take but that have no inventory row
}

// CheckLedger compares the ledger of resourceIDs (nil: of every resource) with what their occupying
// bookings take, for the slots that start at or after from (zero: every slot), and repairs it: a
// slot whose count differs is set to its bookings' units, with its rows locked first (SELECT … FOR
// UPDATE) so that no change of a booking commits in between (a change takes the same row lock
// before it commits). Slots whose bookings take more units than the slot has are reported, never
// hidden: the ledger counts them as they are, so that nothing more is sold there. Each resource is
// checked in a transaction of its own.
func (s *Ledger) CheckLedger(ctx context.Context, resourceIDs []uint64, from time.Time) (LedgerReport, error) {
	var rep LedgerReport
	if resourceIDs == nil {
		var err error
		if err = s.db.WithContext(ctx).Model(&models.Resource{}).Order("id").Pluck("id", &resourceIDs).Error; err != nil {
			return rep, sqldb.MapErr("check ledger", err)
		}
	}
	for _, rid := range resourceIDs {
		var one LedgerReport
		err := s.db.Tx(ctx, "check ledger", func(tx *gorm.DB) error {
			var err error
			one, err = s.checkResource(tx, rid, from)
			return err
		})
		if err != nil {
			return rep, err
		}
		rep.Slots += one.Slots
		rep.Repaired = append(rep.Repaired, one.Repaired...)
		rep.Over = append(rep.Over, one.Over...)
		rep.Missing = append(rep.Missing, one.Missing...)
	}
	return rep, nil
}

// checkResource is CheckLedger for one resource, inside tx. SetSchedule counts the ledger of the
// resource's new slots again through it, in the schedule change's transaction.
func (s *Ledger) checkResource(tx *gorm.DB, rid uint64, from time.Time) (LedgerReport, error) {
	var rep LedgerReport
	// The rows with units on the ledger are locked before the bookings are read, so that a change
	// committing meanwhile (it locks its rows) is either seen below or waits for this transaction.
	lock := func(db *gorm.DB) *gorm.DB {
		if s.db.MySQL {
			return db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
		}
		return db
	}
	var counted []models.SlotInventory
	if err := lock(tx.Where("resource_id = ? AND start >= ? AND occupied <> 0", rid, from.UTC())).Find(&counted).Error; err != nil {
		return rep, err
	}
	booked, err := bookedSlots(tx, rid, from)
	if err != nil {
		return rep, err
	}
	slots := map[slotKey]*SlotLedger{}
	for k, b := range booked {
		slots[k] = &SlotLedger{Field: k.field(), Booked: b.units, Bookings: b.ids}
	}
	var starts []time.Time
	for k := range booked {
		starts = append(starts, k.start())
	}
	var rows []models.SlotInventory
	for chunk := range slices.Chunk(starts, 500) {
		var part []models.SlotInventory
		if err := lock(tx.Where("resource_id = ? AND start IN ?", rid, chunk)).Find(&part).Error; err != nil {
			return rep, err
		}
		rows = append(rows, part...)
	}
	rows = append(rows, counted...)
	seen := map[slotKey]bool{}
	for _, r := range rows {
		k := slotKey{rid, r.Start.Unix() / 60}
		if seen[k] {
			continue
		}
		seen[k] = true
		sl := slots[k]
		if sl == nil {
			sl = &SlotLedger{Field: k.field()}
			slots[k] = sl
		}
		sl.Capacity, sl.Occupied = r.Capacity, r.Occupied
	}
	rep.Slots = len(slots)
	for _, k := range slices.SortedFunc(maps.Keys(slots), func(a, b slotKey) int { return cmp.Compare(a.minute, b.minute) }) {
		sl := *slots[k]
		if !seen[k] {
			rep.Missing = append(rep.Missing, sl)
			continue
		}
		if sl.Over() {
			rep.Over = append(rep.Over, sl)
		}
		if sl.Occupied != sl.Booked {
			if err := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND start = ?", rid, k.start()).
				Update("occupied", sl.Booked).Error; err != nil {
				return rep, err
			}
			rep.Repaired = append(rep.Repaired, sl)
		}
	}
	return rep, nil
}

type bookedSlot struct {
	units int
	ids   []uint64
}

// bookedSlots sums, per slot of resource rid that starts at or after from, the units its occupying
// bookings take: bookings made on it, and bookings of multi-resource services that took it for a
// role.
func bookedSlots(tx *gorm.DB, rid uint64, from time.Time) (map[slotKey]bookedSlot, error) {
	var rows []models.Booking
	sub := tx.Model(&models.BookingResource{}).Select("booking_id").Where("resource_id = ?", rid)
	if err := tx.Select("id, quantity, slots").Where("status IN ? AND occupy_end > ? AND (resource_id = ? OR id IN (?))",
		statusStrings(booking.OccupyingStatuses()), from.UTC(), rid, sub).Order("id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := map[slotKey]bookedSlot{}
	for _, r := range rows {
		for _, f := range splitFields(r.Slots) {
			k, err := parseSlot(f)
			if err != nil {
				return nil, err
			}
			if k.resource != rid || k.start().Before(from) {
				continue
			}
			b := out[k]
			b.units += r.Quantity
			b.ids = append(b.ids, r.ID)
			out[k] = b
		}
	}
	return out, nil
}
