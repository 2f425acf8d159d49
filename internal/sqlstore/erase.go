package sqlstore

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Erasure is a user's erasure (EraseUser): the one operation that writes into the tables of every
// other capability, in one transaction, so that a user is erased everywhere or nowhere.
type Erasure struct{ db *sqldb.DB }

// ErasedRows counts, per table, the rows that carry an erased user's pseudonym.
type ErasedRows struct {
	Bookings      int // bookings.user_id
	History       int // booking_status_history.actor
	Waitlist      int // waitlist.user_id
	Refunds       int // refunds.user_id
	WechatOrders  int // wechat_orders.open_id
	Events        int // outbox_events.user_id (and the user_id member of their data)
	StoredAnswers int // idempotency_keys whose stored answer shows the pseudonym
}

// EraseUser applies the erasure x (engine/booking decides what is personal and what it becomes) to
// every table, in one transaction, and counts the rows that carry the pseudonym afterwards: rows
// erased now and by an earlier erasure alike, so that a repeat answers the same. Columns that only
// record when a row last changed are left alone (an erasure changes no booking); withdrawn waitlist
// entries get updated_at = at.
//
// The user id is not indexed in histories (actor), refunds, WeChat orders and stored answers: those
// tables are scanned once to erase and once to count.
func (s *Erasure) EraseUser(ctx context.Context, x booking.Erasure, at time.Time) (ErasedRows, error) {
	owner, member, text := x.Owner(), x.DocumentMember(), x.FreeText()
	var from, to []string // history actor names, as the column keeps them
	var actorCase strings.Builder
	var actorArgs []any
	actorCase.WriteString("CASE actor")
	for _, r := range x.ActorNames() {
		f, t := storedActor(r.From), storedActor(r.To)
		from, to = append(from, f), append(to, t)
		actorCase.WriteString(" WHEN ? THEN ?")
		actorArgs = append(actorArgs, f, t)
	}
	actorCase.WriteString(" ELSE actor END")
	waitFrom, waitTo := x.WithdrawnWaiting()

	var out ErasedRows
	err := s.db.Tx(ctx, "erase user", func(tx *gorm.DB) error {
		// Each step runs only if the ones before it succeeded: a statement after a deadlock, which
		// ends the transaction, would otherwise commit on its own.
		steps := []func() *gorm.DB{
			func() *gorm.DB {
				return tx.Model(&models.Booking{}).Where("user_id = ?", owner.From).UpdateColumn("user_id", owner.To)
			},
			// A pardon names the id and staff's words about the person; the pseudonym needs neither.
			func() *gorm.DB { return tx.Where("user_id = ?", owner.From).Delete(&models.UserPardon{}) },
			func() *gorm.DB {
				return tx.Model(&models.BookingHistory{}).Where("actor IN ?", from).
					UpdateColumn("actor", gorm.Expr(actorCase.String(), actorArgs...))
			},
			// Withdraw first, while the entries are found by the user id; then every entry (a PROMOTED
			// one too) gives up its claim on the window, which only kept one person from waiting twice.
			func() *gorm.DB {
				return tx.Model(&models.WaitlistEntry{}).Where("user_id = ? AND status = ?", owner.From, string(waitFrom)).
					UpdateColumns(map[string]any{"status": string(waitTo), "waiting_key": nil, "updated_at": at})
			},
			func() *gorm.DB {
				return tx.Model(&models.WaitlistEntry{}).Where("user_id = ?", owner.From).
					UpdateColumns(map[string]any{"user_id": owner.To, "waiting_key": nil})
			},
			func() *gorm.DB {
				return tx.Model(&models.Refund{}).Where("user_id = ?", owner.From).
					UpdateColumns(map[string]any{"user_id": owner.To, "last_error": replaceAll("last_error", text)})
			},
			func() *gorm.DB {
				return tx.Model(&models.OutboxEvent{}).Where("user_id = ?", owner.From).
					UpdateColumns(map[string]any{"user_id": owner.To, "data": replaceAll("data", []booking.Replacement{member})})
			},
			// A receiver's error message may quote the payload it refused. Only the user's events can
			// have carried their id, and those carry the pseudonym by now.
			func() *gorm.DB {
				events := s.db.Primary.Model(&models.OutboxEvent{}).Select("id").Where("user_id = ?", owner.To)
				return tx.Model(&models.Delivery{}).Where("last_error <> '' AND event_id IN (?)", events).
					UpdateColumn("last_error", replaceAll("last_error", text))
			},
			func() *gorm.DB {
				return tx.Model(&models.IdempotencyKey{}).Where("INSTR(body, ?) > 0", member.From).
					UpdateColumn("body", replaceAll("body", []booking.Replacement{member}))
			},
		}
		counts := map[*int]*gorm.DB{
			&out.Bookings:      tx.Model(&models.Booking{}).Where("user_id = ?", owner.To),
			&out.History:       tx.Model(&models.BookingHistory{}).Where("actor IN ?", to),
			&out.Waitlist:      tx.Model(&models.WaitlistEntry{}).Where("user_id = ?", owner.To),
			&out.Refunds:       tx.Model(&models.Refund{}).Where("user_id = ?", owner.To),
			&out.Events:        tx.Model(&models.OutboxEvent{}).Where("user_id = ?", owner.To),
			&out.StoredAnswers: tx.Model(&models.IdempotencyKey{}).Where("INSTR(body, ?) > 0", member.To),
		}
		if openid, wechat := x.OpenID(); wechat {
			steps = append(steps, func() *gorm.DB {
				return tx.Model(&models.WechatOrder{}).Where("open_id = ?", openid.From).UpdateColumn("open_id", openid.To)
			})
			counts[&out.WechatOrders] = tx.Model(&models.WechatOrder{}).Where("open_id = ?", openid.To)
		}
		for _, step := range steps {
			if err := step().Error; err != nil {
				return err
			}
		}
		for n, q := range counts {
			var c int64
			if err := q.Count(&c).Error; err != nil {
				return err
			}
			*n = int(c)
		}
		return nil
	})
	return out, err
}

// replaceAll is col with every From of rs replaced by its To, in order (REPLACE is the same function
// in MySQL and SQLite, and matches bytes exactly).
func replaceAll(col string, rs []booking.Replacement) clause.Expr {
	sql := col
	args := make([]any, 0, 2*len(rs))
	for _, r := range rs {
		sql = "REPLACE(" + sql + ", ?, ?)"
		args = append(args, r.From, r.To)
	}
	return gorm.Expr(sql, args...)
}
