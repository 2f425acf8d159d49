package sqlstore

import (
	"context"
	"errors"
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

// Bookings is the bookings table and what a booking's change writes with it: a booking's creation
// with its payment, first history row, event and units on the capacity ledger (CreateBooking), its
// version-checked changes (UpdateBooking: the engine's Decide chooses, the store writes), the reads
// and lists of bookings and their history, the no-show counts, the reminders' index, and the
// occupancy reads of reconciliation and schedule changes. It writes every decided change of a
// booking, a release batch's too (writeReleases); which releases are due, and deciding them, is
// Releases'.
type Bookings struct {
	db       *sqldb.DB
	render   Renderer  // nil: booking changes announce nothing
	ledger   *Ledger   // the units a change takes and gives back
	payments *Payments // a refused booking's payment, and the refunds changes decide
}

// Booking is a booking row: the domain value plus what only storage and Redis need.
type Booking struct {
	booking.Booking
	Fields []string // the Redis slot fields whose units it takes
	// QueueAt is set while the booking's release task still has to be queued, DueAt while its
	// release is to be decided, RemindAt while its reminder is due. The engine decides them; the
	// store keeps them indexed.
	QueueAt  *time.Time
	DueAt    *time.Time
	RemindAt *time.Time
}

// Event is an outbox row.
type Event struct {
	Type    string
	Subject string
	VenueID uint64
	UserID  string
	Data    []byte
	At      time.Time
}

// Renderer renders the event of a booking change, as the API shows the booking; false when the
// change is not announced.
type Renderer func(b *Booking, c booking.Change) (Event, bool)

func toBooking(r *models.Booking) Booking {
	b := Booking{Booking: booking.Booking{ID: r.ID, HoldID: r.HoldID, UserID: r.UserID, VenueID: r.VenueID,
		ResourceID: r.ResourceID, Quantity: r.Quantity, Status: booking.Status(r.Status), Version: r.Version,
		Start: r.Start.UTC(), End: r.End.UTC(), OccupyStart: r.OccupyStart.UTC(), OccupyEnd: r.OccupyEnd.UTC(),
		ReleaseAt: r.ReleaseAt.UTC(), ConfirmedAt: r.ConfirmedAt.UTC(), CheckedInAt: utc(r.CheckedInAt),
		ReleasedAt: utc(r.ReleasedAt), CancelledAt: utc(r.CancelledAt), CheckinCode: r.CheckinCode,
		AmountCents: r.AmountCents, ReleaseHeldAt: utc(r.ReleaseHeldAt), Reschedules: r.Reschedules},
		Fields: splitFields(r.Slots), QueueAt: utc(r.QueueAt), DueAt: utc(r.DueAt), RemindAt: utc(r.RemindAt)}
	if r.ServiceID != nil {
		b.ServiceID = *r.ServiceID
	}
	if r.PaymentID != nil {
		b.PaymentID = *r.PaymentID
	}
	return b
}

func fromBooking(b *Booking) models.Booking {
	r := models.Booking{ID: b.ID, HoldID: b.HoldID, UserID: b.UserID, VenueID: b.VenueID, ResourceID: b.ResourceID,
		Quantity: b.Quantity, Start: b.Start, End: b.End, OccupyStart: b.OccupyStart, OccupyEnd: b.OccupyEnd,
		Slots: strings.Join(b.Fields, ","), Status: string(b.Status), Version: b.Version, ReleaseAt: b.ReleaseAt,
		ConfirmedAt: b.ConfirmedAt, CheckedInAt: b.CheckedInAt, ReleasedAt: b.ReleasedAt, CancelledAt: b.CancelledAt,
		CheckinCode: b.CheckinCode, AmountCents: b.AmountCents, QueueAt: b.QueueAt, DueAt: b.DueAt, RemindAt: b.RemindAt,
		ReleaseHeldAt: b.ReleaseHeldAt, Reschedules: b.Reschedules,
		CreatedAt: b.ConfirmedAt, UpdatedAt: b.ConfirmedAt}
	if b.ServiceID != 0 {
		sid := b.ServiceID
		r.ServiceID = &sid
	}
	if b.PaymentID != "" {
		pid := b.PaymentID
		r.PaymentID = &pid
	}
	return r
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func splitFields(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func statusStrings(ss []booking.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// Payment is a payment notification as stored.
type Payment struct {
	PaymentID   string
	HoldID      string
	BookingID   uint64 // 0: it made no booking (refund)
	AmountCents int64
	PaidAt      time.Time
	Booked      bool
	At          time.Time
	Provider    string // models.ProviderNotify when empty
	// UserID and VenueID say whose hold it paid, for the refund of a payment that booked nothing.
	UserID  string
	VenueID uint64
	// RefundReason is why a payment that booked nothing is refunded (booking.RefundLatePayment when
	// empty).
	RefundReason string
}

// Sentinels of CreateBooking.
var (
	// ErrHoldBooked: the hold already became a booking (another confirm won).
	ErrHoldBooked = errors.New("the hold already has a booking")
	// ErrPaymentTaken: the payment id is already recorded.
	ErrPaymentTaken = errors.New("the payment id is already recorded")
)

// NewBooking is a booking to create with what goes with it.
type NewBooking struct {
	Booking *Booking // ID and CheckinCode are filled in
	Payment *Payment // nil for a dev confirm
	// Change is the booking's first change (HELD → CONFIRMED); its event is rendered by the store's
	// Renderer once the row has its id and check-in code, which the event carries.
	Change booking.Change
	// Code draws a check-in code; it is called again when one collides.
	Code func() string
	// Refusal is what a refusal of the capacity ledger commits in the booking's place, in the same
	// transaction: its event, and the payment kept for refund.
	Refusal Refusal
}

// Refusal is what the store records when the capacity ledger refuses a booking.
type Refusal struct {
	Event   Event
	Payment *Payment // nil for a dev confirm; its RefundReason says why it is refunded
}

// CreateBooking commits a booking with its first history row (HELD → CONFIRMED), its payment, its
// event and its units on the capacity ledger in one transaction. ErrHoldBooked and ErrPaymentTaken
// say which one was already there; a failed COMMIT is ErrCommitUnknown. When the ledger refuses the
// booking's units (a slot would pass its capacity: Redis let the hold through, but MySQL decides),
// nothing of it is written; nb.Refusal is committed instead and a *CapacityError (ErrOverCapacity)
// answered.
func (s *Bookings) CreateBooking(ctx context.Context, nb NewBooking) error {
	err := s.db.Tx(ctx, "create booking", func(tx *gorm.DB) error {
		if err := s.insertBooking(tx, nb); err != nil {
			return err
		}
		// The ledger last: a rush on one slot puts every confirm on its row, whose lock each holds
		// from this UPDATE to the COMMIT right after it, and no longer.
		var l ledgerMoves
		if err := l.add(nb.Change, nb.Booking.Quantity, nil, nb.Booking.Fields); err != nil {
			return err
		}
		return s.ledger.apply(tx, &l)
	})
	if !errors.Is(err, ErrOverCapacity) {
		return err
	}
	if rerr := s.db.Tx(ctx, "record a refused booking", func(tx *gorm.DB) error {
		if p := nb.Refusal.Payment; p != nil {
			if err := s.payments.recordPayment(tx, *p); err != nil {
				return err
			}
		}
		return insertEvents(tx, []Event{nb.Refusal.Event})
	}); rerr != nil {
		return rerr
	}
	return err
}

// insertBooking writes a new booking with what goes with it (CreateBooking), inside tx. The unique
// keys on hold_id and payment_id answer a second confirm of the hold (ErrHoldBooked) or a payment
// recorded already (ErrPaymentTaken).
func (s *Bookings) insertBooking(tx *gorm.DB, nb NewBooking) error {
	b := nb.Booking
	var row models.Booking
	for i := 0; ; i++ {
		b.CheckinCode = nb.Code()
		row = fromBooking(b)
		err := tx.Create(&row).Error
		if err == nil {
			break
		}
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return err
		}
		// A unique key refused the row (the statement alone is undone): the hold was booked already
		// (a concurrent confirm committed), or the check-in code collided.
		var n int64
		if err := tx.Model(&models.Booking{}).Where("hold_id = ?", b.HoldID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return ErrHoldBooked
		}
		if i >= 5 {
			return errors.New("no free check-in code after 5 draws")
		}
	}
	b.ID = row.ID
	sqldb.MarkWrote(tx, b.UserID, b.ID)
	if len(b.Roles) > 0 {
		links := make([]models.BookingResource, len(b.Roles))
		for i, r := range b.Roles {
			links[i] = models.BookingResource{BookingID: b.ID, ResourceID: r.ResourceID, Role: r.Role, Position: i}
		}
		if err := tx.Create(&links).Error; err != nil {
			return err
		}
	}
	if err := tx.Create(&models.BookingHistory{BookingID: b.ID, FromStatus: string(booking.HoldHeld),
		ToStatus: string(b.Status), Version: b.Version, Actor: booking.ActorSystem, Reason: "confirmed", At: b.ConfirmedAt}).Error; err != nil {
		return err
	}
	if p := nb.Payment; p != nil {
		p.BookingID, p.Booked = b.ID, true
		if err := tx.Create(paymentRow(p)).Error; errors.Is(err, gorm.ErrDuplicatedKey) {
			return ErrPaymentTaken
		} else if err != nil {
			return err
		}
	}
	if s.render == nil {
		return nil
	}
	ev, ok := s.render(b, nb.Change)
	if !ok {
		return nil
	}
	return insertEvents(tx, []Event{ev})
}

// BookingSubject names a booking as the subject of its events.
func BookingSubject(id uint64) string { return "booking:" + strconv.FormatUint(id, 10) }

// Booking reads one booking; booking.ErrNotFound when there is none.
func (s *Bookings) Booking(ctx context.Context, id uint64) (Booking, error) {
	var r models.Booking
	if err := s.db.WithContext(ctx).First(&r, id).Error; err != nil {
		return Booking{}, sqldb.MapErr("read booking", err)
	}
	bs := []Booking{toBooking(&r)}
	err := s.withRoles(ctx, bs)
	return bs[0], err
}

// BookingByHold reads the booking a hold became, if any.
func (s *Bookings) BookingByHold(ctx context.Context, holdID string) (Booking, bool, error) {
	var r models.Booking
	err := s.db.WithContext(ctx).First(&r, "hold_id = ?", holdID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Booking{}, false, nil
	}
	if err != nil {
		return Booking{}, false, sqldb.MapErr("read booking by hold", err)
	}
	bs := []Booking{toBooking(&r)}
	if err := s.withRoles(ctx, bs); err != nil {
		return Booking{}, false, err
	}
	return bs[0], true, nil
}

// BookingsByHolds reads the bookings that holds became, by hold id (holds without one are left out).
func (s *Bookings) BookingsByHolds(ctx context.Context, holdIDs []string) (map[string]Booking, error) {
	out := map[string]Booking{}
	for chunk := range slices.Chunk(holdIDs, 1000) {
		var rows []models.Booking
		if err := s.db.WithContext(ctx).Where("hold_id IN ?", chunk).Find(&rows).Error; err != nil {
			return nil, sqldb.MapErr("read bookings by hold", err)
		}
		bs := make([]Booking, len(rows))
		for i := range rows {
			bs[i] = toBooking(&rows[i])
		}
		if err := s.withRoles(ctx, bs); err != nil {
			return nil, err
		}
		for _, b := range bs {
			out[b.HoldID] = b
		}
	}
	return out, nil
}

// BookingIDByCode finds a booking by its check-in code.
func (s *Bookings) BookingIDByCode(ctx context.Context, code string) (uint64, error) {
	var r models.Booking
	if err := s.db.WithContext(ctx).Select("id").First(&r, "checkin_code = ?", code).Error; err != nil {
		return 0, sqldb.MapErr("find check-in code", err)
	}
	return r.ID, nil
}

// Decide chooses a change of a booking (see UpdateBooking). It may change the booking's fields, and
// must set them only together with a non-zero change.
type Decide func(b *Booking) (booking.Change, error)

// UpdateBooking loads booking id, lets decide choose a change, and writes it onto the version it was
// decided on, with its history row and its event, in one transaction. When the booking changed
// meanwhile it loads it again and asks decide again; a zero change writes nothing.
func (s *Bookings) UpdateBooking(ctx context.Context, id uint64, decide Decide) (Booking, booking.Change, error) {
	for attempt := 0; ; attempt++ {
		b, err := s.Booking(ctx, id)
		if err != nil {
			return b, booking.Change{}, err
		}
		version, from := b.Version, b.Fields
		c, err := decide(&b)
		if err != nil || c.None() {
			return b, c, err
		}
		b.Version = version + 1
		err = s.db.Tx(ctx, "update booking "+strconv.FormatUint(id, 10), func(tx *gorm.DB) error {
			return s.writeChanges(tx, []changed{{&b, version, c, from}})
		})
		if errors.Is(err, sqldb.ErrStale) && attempt < 10 {
			continue
		}
		return b, c, err
	}
}

// changed is one decided change of a booking, to write onto version. from are the booking's slot
// fields before the change (a move changes them).
type changed struct {
	b       *Booking
	version int
	c       booking.Change
	from    []string
}

// writeChanges writes changes with their history rows, events, units on the capacity ledger and
// refunds. Each row update is checked against the version it was decided on. UpdateBooking writes
// through it, and so does a release batch that cannot be one UPDATE (writeReleases).
func (s *Bookings) writeChanges(tx *gorm.DB, cs []changed) error {
	hist := make([]models.BookingHistory, 0, len(cs))
	var events []Event
	var l ledgerMoves
	for _, x := range cs {
		if err := l.add(x.c, x.b.Quantity, x.from, x.b.Fields); err != nil {
			return err
		}
		b := x.b
		sqldb.MarkWrote(tx, b.UserID, b.ID)
		res := tx.Model(&models.Booking{}).Where("id = ? AND version = ?", b.ID, x.version).Updates(map[string]any{
			"status": string(b.Status), "version": b.Version, "updated_at": x.c.At, "release_at": b.ReleaseAt,
			"checked_in_at": b.CheckedInAt, "released_at": b.ReleasedAt, "cancelled_at": b.CancelledAt,
			"queue_at": b.QueueAt, "due_at": b.DueAt, "remind_at": b.RemindAt, "release_held_at": b.ReleaseHeldAt,
			"slots": strings.Join(b.Fields, ","),
			"start": b.Start, "end": b.End, "occupy_start": b.OccupyStart, "occupy_end": b.OccupyEnd,
			"resource_id": b.ResourceID, "reschedules": b.Reschedules,
		})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return sqldb.ErrStale
		}
		hist = append(hist, historyRow(b, x.c))
		if s.render != nil {
			if ev, ok := s.render(b, x.c); ok {
				events = append(events, ev)
			}
		}
	}
	if err := s.ledger.apply(tx, &l); err != nil {
		return err
	}
	if err := tx.CreateInBatches(hist, 500).Error; err != nil {
		return err
	}
	if err := insertEvents(tx, events); err != nil {
		return err
	}
	return s.payments.writeRefunds(tx, cs)
}

// writeReleases writes the changes of a release batch (ReleaseDue): those that set the same columns
// to the same values (a batch released at one moment) with one UPDATE; anything else goes row by
// row (writeChanges).
func (s *Bookings) writeReleases(tx *gorm.DB, cs []changed) error {
	first := cs[0]
	ids := make([]uint64, 0, len(cs))
	for _, x := range cs {
		if x.c.To != booking.Released || !x.c.At.Equal(first.c.At) || x.b.ReleasedAt == nil || !x.b.ReleasedAt.Equal(x.c.At) {
			return s.writeChanges(tx, cs) // held back by a release mode, or not one moment: row by row
		}
		ids = append(ids, x.b.ID)
	}
	// The rows are locked by this transaction (or, on SQLite, the whole database is), so the
	// status guard is the version check.
	res := tx.Model(&models.Booking{}).Where("id IN ? AND status = ?", ids, string(first.c.From)).Updates(map[string]any{
		"status": string(first.c.To), "version": gorm.Expr("version + 1"), "updated_at": first.c.At,
		"released_at": first.c.At, "queue_at": nil, "due_at": nil, "remind_at": nil,
	})
	if res.Error != nil {
		return res.Error
	}
	if int(res.RowsAffected) != len(ids) {
		return sqldb.ErrStale
	}
	hist := make([]models.BookingHistory, len(cs))
	var events []Event
	var l ledgerMoves
	for i, x := range cs {
		if err := l.add(x.c, x.b.Quantity, x.from, x.b.Fields); err != nil {
			return err
		}
		x.b.QueueAt, x.b.DueAt, x.b.RemindAt = nil, nil, nil
		sqldb.MarkWrote(tx, x.b.UserID, x.b.ID)
		hist[i] = historyRow(x.b, x.c)
		if s.render != nil {
			if ev, ok := s.render(x.b, x.c); ok {
				events = append(events, ev)
			}
		}
	}
	// One UPDATE per resource and number of units gives a batch's units back.
	if err := s.ledger.apply(tx, &l); err != nil {
		return err
	}
	if err := tx.CreateInBatches(hist, 1000).Error; err != nil {
		return err
	}
	if err := insertEvents(tx, events); err != nil {
		return err
	}
	return s.payments.writeRefunds(tx, cs)
}

func historyRow(b *Booking, c booking.Change) models.BookingHistory {
	return models.BookingHistory{BookingID: b.ID, FromStatus: string(c.From), ToStatus: string(c.To),
		Version: b.Version, Actor: storedActor(c.Actor), Reason: c.Reason, At: c.At}
}

// storedActor is an actor's name as the history's column keeps it: at most 80 bytes.
func storedActor(name string) string {
	if len(name) > 80 {
		return name[:80]
	}
	return name
}

// ListQuery selects bookings, newest first.
type ListQuery struct {
	UserID     string // "" for every user
	VenueID    uint64
	ResourceID uint64
	Status     booking.Status
	From, To   time.Time // bookings starting in [From, To), when set
	// Search, when set, matches a booking by its id, its check-in code or its user id exactly:
	// what a guest at the desk can tell.
	Search string
	Page
}

// ListBookings lists bookings matching q, newest first. It is a replica read (see
// sqldb.DB.StaleRead), except for a user who changed a booking within the freshness window: they
// read their own list from the primary.
func (s *Bookings) ListBookings(ctx context.Context, q ListQuery) ([]Booking, error) {
	fresh := q.UserID != "" && s.db.Replicas != nil && s.db.Replicas.UserWroteRecently(q.UserID)
	var out []Booking
	err := s.db.StaleRead(ctx, fresh, func(db *gorm.DB) error {
		var err error
		out, err = listBookings(db, q)
		return err
	})
	return out, sqldb.MapErr("list bookings", err)
}

// listBookings runs ListBookings' queries, the roles' included, on db.
func listBookings(db *gorm.DB, q ListQuery) ([]Booking, error) {
	roles := db
	db = newestFirst(db, "bookings", q.Page)
	if q.UserID != "" {
		db = db.Where("user_id = ?", q.UserID)
	}
	if q.VenueID != 0 {
		db = db.Where("venue_id = ?", q.VenueID)
	}
	if q.ResourceID != 0 {
		db = db.Where("resource_id = ?", q.ResourceID)
	}
	if q.Status != "" {
		db = db.Where("status = ?", string(q.Status))
	}
	if !q.From.IsZero() {
		db = db.Where("start >= ? AND start < ?", q.From.UTC(), q.To.UTC())
	}
	if q.Search != "" {
		id, err := strconv.ParseUint(q.Search, 10, 64)
		if err != nil {
			id = 0 // not an id: no booking has id 0
		}
		db = db.Where("(id = ? OR checkin_code = ? OR user_id = ?)", id, strings.ToUpper(q.Search), q.Search)
	}
	var rows []models.Booking
	if err := db.Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, rolesOn(roles, out)
}

// PaidHolds lists the bookings a user confirmed since, newest first: the paid half of their holds.
func (s *Bookings) PaidHolds(ctx context.Context, userID string, since time.Time, limit int) ([]Booking, error) {
	var rows []models.Booking
	if err := s.db.WithContext(ctx).Where("user_id = ? AND confirmed_at >= ?", userID, since.UTC()).
		Order("confirmed_at DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("paid holds", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, nil
}

// HistoryEntry is one status change.
type HistoryEntry struct {
	From, To string
	At       time.Time
	Actor    string
	Reason   string
}

// History lists a booking's status changes, oldest first. It is a replica read (see
// sqldb.DB.StaleRead), except for a booking changed within the freshness window.
func (s *Bookings) History(ctx context.Context, bookingID uint64) ([]HistoryEntry, error) {
	var rows []models.BookingHistory
	fresh := s.db.Replicas != nil && s.db.Replicas.BookingWroteRecently(bookingID)
	if err := s.db.StaleRead(ctx, fresh, func(db *gorm.DB) error {
		rows = nil
		return db.Where("booking_id = ?", bookingID).Order("version, id").Find(&rows).Error
	}); err != nil {
		return nil, sqldb.MapErr("history", err)
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = HistoryEntry{From: r.FromStatus, To: r.ToStatus, At: r.At.UTC(), Actor: r.Actor, Reason: r.Reason}
	}
	return out, nil
}

// NoShows counts a user's bookings in a status that counts as a no-show, released since (zero: ever).
func (s *Bookings) NoShows(ctx context.Context, userID string, since time.Time) (int, error) {
	var n int64
	db := s.db.WithContext(ctx).Model(&models.Booking{}).
		Where("user_id = ? AND status IN ?", userID, statusStrings(booking.NoShowStatuses()))
	if !since.IsZero() {
		db = db.Where("released_at >= ?", since.UTC())
	}
	err := db.Count(&n).Error
	return int(n), sqldb.MapErr("count no-shows", err)
}

// NoshowTimes lists, for each of users, when their no-shows (bookings still released) were released,
// since since: one query per thousand users, so that a burst's batch refreshes its users' freezes
// at once.
func (s *Bookings) NoshowTimes(ctx context.Context, users []string, since time.Time) (map[string][]time.Time, error) {
	out := make(map[string][]time.Time, len(users))
	for len(users) > 0 {
		n := min(len(users), 1000)
		var rows []struct {
			UserID     string
			ReleasedAt time.Time
		}
		err := s.db.WithContext(ctx).Model(&models.Booking{}).Select("user_id, released_at").
			Where("user_id IN ? AND status IN ? AND released_at >= ?", users[:n], statusStrings(booking.NoShowStatuses()), since.UTC()).
			Scan(&rows).Error
		if err != nil {
			return nil, sqldb.MapErr("no-show times", err)
		}
		for _, r := range rows {
			out[r.UserID] = append(out[r.UserID], r.ReleasedAt.UTC())
		}
		users = users[n:]
	}
	return out, nil
}

// UsersWithNoshows lists the users with a no-show released since since.
func (s *Bookings) UsersWithNoshows(ctx context.Context, since time.Time) ([]string, error) {
	var users []string
	err := s.db.WithContext(ctx).Model(&models.Booking{}).Distinct().
		Where("status IN ? AND released_at >= ?", statusStrings(booking.NoShowStatuses()), since.UTC()).
		Pluck("user_id", &users).Error
	return users, sqldb.MapErr("users with no-shows", err)
}

// Progressing lists checked-in bookings that have started, oldest start first.
func (s *Bookings) Progressing(ctx context.Context, now time.Time, limit int) ([]uint64, error) {
	var ids []uint64
	err := s.db.WithContext(ctx).Model(&models.Booking{}).
		Where("status IN ? AND start <= ?", []string{string(booking.Arrived), string(booking.InProgress)}, now.UTC()).
		Order("start").Limit(limit).Pluck("id", &ids).Error
	return ids, sqldb.MapErr("progressing", err)
}

// DueReminders lists CONFIRMED bookings whose reminder time has come.
func (s *Bookings) DueReminders(ctx context.Context, now time.Time, limit int) ([]Booking, error) {
	var rows []models.Booking
	if err := s.db.WithContext(ctx).Where("remind_at <= ?", now.UTC()).Order("remind_at").Limit(limit).
		Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("due reminders", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, nil
}

// NextReminder is the earliest remind_at still to come (zero when none is): one probe of its index.
func (s *Bookings) NextReminder(ctx context.Context) (time.Time, error) {
	var at []time.Time
	err := s.db.WithContext(ctx).Model(&models.Booking{}).Where("remind_at IS NOT NULL").
		Order("remind_at").Limit(1).Pluck("remind_at", &at).Error
	if err != nil || len(at) == 0 {
		return time.Time{}, sqldb.MapErr("next reminder", err)
	}
	return at[0].UTC(), nil
}

// MarkReminded sends the reminders of due bookings: each one still CONFIRMED at the version it was
// read at has its reminder cleared and its event (from events, by booking id) written, in one
// transaction. It answers how many were sent.
func (s *Bookings) MarkReminded(ctx context.Context, due []Booking, events map[uint64]Event) (int, error) {
	sent := 0
	err := s.db.Tx(ctx, "send reminders", func(tx *gorm.DB) error {
		sent = 0
		var evs []Event
		for _, b := range due {
			res := tx.Model(&models.Booking{}).Where("id = ? AND version = ? AND status = ?", b.ID, b.Version, string(booking.Confirmed)).
				Update("remind_at", nil)
			if res.Error != nil {
				return res.Error
			}
			if ev, ok := events[b.ID]; ok && res.RowsAffected == 1 {
				evs = append(evs, ev)
				sent++
			}
		}
		return insertEvents(tx, evs)
	})
	return sent, err
}

// Occupying lists the occupying bookings of a venue (reconciliation).
func (s *Bookings) Occupying(ctx context.Context, venueID uint64) ([]Booking, error) {
	var rows []models.Booking
	if err := s.db.WithContext(ctx).Select("id, hold_id, venue_id, quantity, slots, status, version").
		Where("venue_id = ? AND status IN ?", venueID, statusStrings(booking.OccupyingStatuses())).
		Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("occupying bookings", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, nil
}

// OccupyingBetween lists the occupying bookings of a resource whose physical window overlaps
// [from, to): those made on it, and those of multi-resource services that took it for a role.
func (s *Bookings) OccupyingBetween(ctx context.Context, resourceID uint64, from, to time.Time) ([]Booking, error) {
	occupying := func(db *gorm.DB) *gorm.DB {
		return db.Where("status IN ? AND occupy_start < ? AND occupy_end > ?",
			statusStrings(booking.OccupyingStatuses()), to.UTC(), from.UTC())
	}
	var rows []models.Booking
	if err := occupying(s.db.WithContext(ctx).Where("resource_id = ?", resourceID)).Order("occupy_start").Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("occupying bookings", err)
	}
	var roled []models.Booking
	sub := s.db.Primary.Model(&models.BookingResource{}).Select("booking_id").Where("resource_id = ?", resourceID)
	if err := occupying(s.db.WithContext(ctx).Where("resource_id <> ? AND id IN (?)", resourceID, sub)).Find(&roled).Error; err != nil {
		return nil, sqldb.MapErr("occupying bookings", err)
	}
	rows = append(rows, roled...)
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	err := s.withRoles(ctx, out)
	return out, err
}

// withRoles fills the roles of the multi-resource bookings among bs.
func (s *Bookings) withRoles(ctx context.Context, bs []Booking) error {
	return sqldb.MapErr("booking resources", rolesOn(s.db.WithContext(ctx), bs))
}

// rolesOn is withRoles on db.
func rolesOn(db *gorm.DB, bs []Booking) error {
	if len(bs) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(bs))
	for _, b := range bs {
		if b.ServiceID != 0 {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var rows []models.BookingResource
	if err := db.Where("booking_id IN ?", ids).Order("booking_id, position").Find(&rows).Error; err != nil {
		return err
	}
	by := map[uint64][]booking.RoleResource{}
	for _, r := range rows {
		by[r.BookingID] = append(by[r.BookingID], booking.RoleResource{Role: r.Role, ResourceID: r.ResourceID})
	}
	for i := range bs {
		bs[i].Roles = by[bs[i].ID]
	}
	return nil
}

// State is a booking's status at a version.
type State struct {
	Status  booking.Status
	Version int
}

// States reads the states of bookings by id (missing ids are left out).
func (s *Bookings) States(ctx context.Context, ids []uint64) (map[uint64]State, error) {
	out := make(map[uint64]State, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		var rows []models.Booking
		if err := s.db.WithContext(ctx).Select("id, status, version").Where("id IN ?", ids[:n]).Find(&rows).Error; err != nil {
			return nil, sqldb.MapErr("booking states", err)
		}
		for _, r := range rows {
			out[r.ID] = State{Status: booking.Status(r.Status), Version: r.Version}
		}
		ids = ids[n:]
	}
	return out, nil
}

// Releases is the release path: the due index (queue_at and due_at, which hold only the bookings
// whose release task is to be queued or whose release is undecided) that the queue loader,
// reconciliation and the overdue checks read, and the release batches (ReleaseDue), which take
// their rows with SKIP LOCKED and run on the release path's own connections (UseForReleases).
type Releases struct {
	db       *sqldb.DB
	bookings *Bookings // writes the changes a batch decides
}

// Ref names a booking and the release_at a task was (or is to be) scheduled for.
type Ref struct {
	BookingID uint64
	VenueID   uint64
	ReleaseAt time.Time
}

// refRow is what a ref query reads: scanning three columns into a small struct costs a fraction of
// scanning them into a whole booking row, which matters for queries the loops run every second.
type refRow struct {
	ID        uint64
	VenueID   uint64
	ReleaseAt time.Time
}

func (s *Releases) refQuery(ctx context.Context, op string, q func(db *gorm.DB) *gorm.DB, limit int) ([]Ref, error) {
	var rows []refRow
	if err := q(s.db.WithContext(ctx).Table("bookings").Select("id, venue_id, release_at")).Limit(limit).Scan(&rows).Error; err != nil {
		return nil, sqldb.MapErr(op, err)
	}
	out := make([]Ref, len(rows))
	for i, r := range rows {
		out[i] = Ref{BookingID: r.ID, VenueID: r.VenueID, ReleaseAt: r.ReleaseAt.UTC()}
	}
	return out, nil
}

// DueForQueue lists bookings whose release task is to be queued and whose release_at is before
// until, oldest first. It reads only the index of bookings not queued yet, so its cost does not grow
// with the bookings already in the queue.
func (s *Releases) DueForQueue(ctx context.Context, until time.Time, limit int) ([]Ref, error) {
	return s.refQuery(ctx, "due for queue", func(db *gorm.DB) *gorm.DB {
		return db.Where("queue_at <= ?", until.UTC()).Order("queue_at")
	}, limit)
}

// MarkQueued records that the release tasks of rs are in the queue. A booking whose release_at has
// changed meanwhile (a restore) stays to be queued for its new one.
func (s *Releases) MarkQueued(ctx context.Context, rs []Ref) error {
	if len(rs) == 0 {
		return nil
	}
	pairs := make([][]any, len(rs))
	// "id IN" first: MariaDB reads a row-constructor IN of one pair as a scan of the whole primary
	// key (locking every row), where the ids alone give it a range.
	ids := make([]uint64, len(rs))
	for i, r := range rs {
		ids[i] = r.BookingID
		pairs[i] = []any{r.BookingID, r.ReleaseAt.UTC()}
	}
	err := s.db.WithContext(ctx).Model(&models.Booking{}).Where("id IN ? AND (id, release_at) IN ?", ids, pairs).
		Update("queue_at", nil).Error
	return sqldb.MapErr("mark queued", err)
}

// Overdue lists CONFIRMED bookings whose release is undecided past their release_at, oldest first,
// from the due_at index.
func (s *Releases) Overdue(ctx context.Context, now time.Time, limit int) ([]Ref, error) {
	return s.refQuery(ctx, "overdue", func(db *gorm.DB) *gorm.DB {
		return db.Where("due_at <= ?", now.UTC()).Order("due_at")
	}, limit)
}

// Unreleased lists CONFIRMED bookings with an undecided release due before until, by id after
// afterID (reconciliation re-queues their tasks).
func (s *Releases) Unreleased(ctx context.Context, until time.Time, afterID uint64, limit int) ([]Ref, error) {
	return s.refQuery(ctx, "unreleased", func(db *gorm.DB) *gorm.DB {
		return db.Where("due_at <= ? AND id > ?", until.UTC(), afterID).Order("id")
	}, limit)
}

// RecentlyReleased lists the bookings RELEASED since since that fell due since then too (which
// bounds the (status, release_at) index range read): their ids, venues and versions.
func (s *Releases) RecentlyReleased(ctx context.Context, since time.Time) ([]Booking, error) {
	var rows []models.Booking
	err := s.db.Release.WithContext(ctx).Select("id, venue_id, version").
		Where("status = ? AND release_at >= ? AND released_at >= ?", string(booking.Released), since.UTC(), since.UTC()).
		Find(&rows).Error
	if err != nil {
		return nil, sqldb.MapErr("recently released", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = Booking{Booking: booking.Booking{ID: rows[i].ID, VenueID: rows[i].VenueID, Version: rows[i].Version}}
	}
	return out, nil
}

// NextDue is the earliest release_at of a CONFIRMED booking whose release is undecided (zero when
// there is none): one probe of the due_at index.
func (s *Releases) NextDue(ctx context.Context) (time.Time, error) {
	var at []time.Time
	err := s.db.Release.WithContext(ctx).Model(&models.Booking{}).Where("due_at IS NOT NULL").
		Order("due_at").Limit(1).Pluck("due_at", &at).Error
	if err != nil || len(at) == 0 {
		return time.Time{}, sqldb.MapErr("next due", err)
	}
	return at[0].UTC(), nil
}

// DueQuery selects CONFIRMED bookings whose release_at has come.
type DueQuery struct {
	Venues []uint64 // the venues whose bookings are taken; nil: every venue's
	Now    time.Time
	Limit  int
	// Rules, when set, is given the stored release mode of each venue among the locked bookings
	// (read in the same transaction, so that a mode change takes effect at the next batch), before
	// any booking is decided.
	Rules func(modes map[uint64]string) error
	// Written, when set, is told the releases the transaction wrote, before it commits (again if
	// it is retried): what it does must be safe should the commit fail.
	Written func(released []Booking, chs []booking.Change)
	// Locked, when set, is told how many bookings the transaction locked and the earliest release_at
	// among them, as soon as it has them (again if the transaction is retried): a full batch means
	// more may be waiting for another transaction. Only MySQL tells: its rows are locked for this
	// transaction alone, and another skips them; SQLite serialises writers, so a second transaction
	// would only wait for the first.
	Locked func(n int, earliest time.Time)
}

// ReleaseDue decides, in one transaction, the releases of up to q.Limit CONFIRMED bookings whose
// release is undecided at q.Now (due_at ≤ now): decide (the domain's Decide) is asked for each, and the chosen changes are
// written with one UPDATE, their history rows and events in bulk. Rows other transactions hold are
// skipped (SKIP LOCKED), so several releasers of one venue share a burst instead of queueing behind
// each other; a check-in that locked its booking first wins, and one that comes after finds the
// booking RELEASED and decides again. It answers the bookings released, with their changes.
func (s *Releases) ReleaseDue(ctx context.Context, q DueQuery, decide Decide) ([]Booking, []booking.Change, error) {
	var out []Booking
	var chs []booking.Change
	rulesRead := false
	if !s.db.MySQL && q.Rules != nil {
		// SQLite's transaction holds the database's write lock, and its pool is a few connections:
		// whatever Rules reads (a catalog cache miss) must not need a connection while writers wait
		// for that lock holding the others. Its writers are serialised, so the modes read first
		// cannot go stale before the batch.
		var rows []models.Booking
		if err := s.dueRows(s.db.Release.WithContext(ctx), q).Select("DISTINCT venue_id").Find(&rows).Error; err != nil {
			return nil, nil, sqldb.MapErr("release due bookings", err)
		}
		if len(rows) == 0 {
			return nil, nil, nil
		}
		if err := s.releaseModes(s.db.Release.WithContext(ctx), rows, q.Rules); err != nil {
			return nil, nil, sqldb.MapErr("release due bookings", err)
		}
		rulesRead = true
	}
	err := s.db.TxOn(ctx, s.db.Release, "release due bookings", func(tx *gorm.DB) error {
		out, chs = out[:0], chs[:0]
		// One read of the due index, locking as it goes, is the batch's first statement, so that
		// nothing else waits before the rows are held.
		db := s.dueRows(tx, q).Order("due_at").Limit(q.Limit)
		if s.db.MySQL {
			db = db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked})
		}
		var rows []models.Booking
		if err := db.Find(&rows).Error; err != nil {
			return err
		}
		if q.Locked != nil && s.db.MySQL {
			var earliest time.Time
			for i := range rows {
				if earliest.IsZero() || rows[i].ReleaseAt.Before(earliest) {
					earliest = rows[i].ReleaseAt
				}
			}
			q.Locked(len(rows), earliest.UTC())
		}
		if q.Rules != nil && !rulesRead && len(rows) > 0 {
			if err := s.releaseModes(tx, rows, q.Rules); err != nil {
				return err
			}
		}
		out = make([]Booking, 0, len(rows)) // cs points into it: it must not grow
		var cs []changed
		for i := range rows {
			b := toBooking(&rows[i])
			version := b.Version
			c, err := decide(&b)
			if err != nil {
				return err
			}
			if c.None() {
				continue
			}
			b.Version = version + 1
			out = append(out, b)
			chs = append(chs, c)
			cs = append(cs, changed{&out[len(out)-1], version, c, b.Fields})
		}
		if len(cs) == 0 {
			return nil
		}
		if err := s.bookings.writeReleases(tx, cs); err != nil {
			return err
		}
		if q.Written != nil {
			q.Written(out, chs)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, chs, nil
}

// dueRows narrows db to the bookings q selects.
func (s *Releases) dueRows(db *gorm.DB, q DueQuery) *gorm.DB {
	db = db.Model(&models.Booking{}).Where("due_at <= ?", q.Now.UTC())
	if q.Venues != nil {
		db = db.Where("venue_id IN ?", q.Venues)
	}
	return db
}

// releaseModes reads, through db, the release modes of the venues of rows ("" for a venue that has
// none) and gives them to rules.
func (s *Releases) releaseModes(db *gorm.DB, rows []models.Booking, rules func(map[uint64]string) error) error {
	var venues []uint64
	for i := range rows {
		if !slices.Contains(venues, rows[i].VenueID) {
			venues = append(venues, rows[i].VenueID)
		}
	}
	var vs []models.Venue
	if err := db.Select("id, release_mode").Where("id IN ?", venues).Find(&vs).Error; err != nil {
		return err
	}
	modes := make(map[uint64]string, len(venues))
	for _, v := range venues {
		modes[v] = ""
	}
	for _, v := range vs {
		modes[v.ID] = v.ReleaseMode
	}
	return rules(modes)
}

// Pardon records that staff lifted user p.UserID's no-show freeze at p.PardonedAt (replacing an
// earlier pardon).
func (s *Bookings) Pardon(ctx context.Context, p models.UserPardon) error {
	p.PardonedAt = p.PardonedAt.UTC()
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&p).Error
	return sqldb.MapErr("pardon", err)
}

// Pardons answers the last pardon of each of users that has one.
func (s *Bookings) Pardons(ctx context.Context, users []string) (map[string]models.UserPardon, error) {
	out := make(map[string]models.UserPardon, len(users))
	for len(users) > 0 {
		n := min(len(users), 1000)
		var rows []models.UserPardon
		if err := s.db.WithContext(ctx).Where("user_id IN ?", users[:n]).Find(&rows).Error; err != nil {
			return nil, sqldb.MapErr("pardons", err)
		}
		for _, r := range rows {
			r.PardonedAt = r.PardonedAt.UTC()
			out[r.UserID] = r
		}
		users = users[n:]
	}
	return out, nil
}

// DueBetween lists the bookings whose release (or approval deadline) is undecided and due in
// [from, to), of one venue when venueID != 0, soonest first.
func (s *Releases) DueBetween(ctx context.Context, venueID uint64, from, to time.Time, limit int) ([]Booking, error) {
	db := s.db.WithContext(ctx).Where("due_at >= ? AND due_at < ?", from.UTC(), to.UTC()).Order("due_at").Limit(limit)
	if venueID != 0 {
		db = db.Where("venue_id = ?", venueID)
	}
	var rows []models.Booking
	if err := db.Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("due between", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, nil
}
