package sqlstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Outbox is the delivery of events: the outbox events that commits wrote, their deliveries to each
// sink (claims, attempts, and the chain of a subject's deliveries to a sink, delivered in event
// order), the webhook endpoints and WeChat templates they go out through, and the pruning of what
// the retention no longer needs.
type Outbox struct{ db *sqldb.DB }

// insertEvents writes outbox events through tx; in a transaction of the store (sqldb.DB.Tx), its
// commit wakes the relay (sqldb.MarkEvents).
func insertEvents(tx *gorm.DB, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	sqldb.MarkEvents(tx)
	rows := make([]models.OutboxEvent, len(evs))
	for i, e := range evs {
		rows[i] = models.OutboxEvent{Type: e.Type, Subject: e.Subject, VenueID: e.VenueID, UserID: e.UserID,
			Data: string(e.Data), CreatedAt: e.At}
	}
	return tx.CreateInBatches(rows, 500).Error
}

// InsertEvents writes events that belong to no booking change (a hold expired, a waiter promoted).
func (s *Outbox) InsertEvents(ctx context.Context, evs []Event) error {
	err := insertEvents(s.db.WithContext(ctx), evs)
	if err == nil && len(evs) > 0 {
		s.db.EventsWritten()
	}
	return sqldb.MapErr("insert events", err)
}

// Unpublished lists outbox events not yet handed to their sinks, oldest first.
func (s *Outbox) Unpublished(ctx context.Context, limit int) ([]models.OutboxEvent, error) {
	var rows []models.OutboxEvent
	return rows, sqldb.MapErr("unpublished events", s.db.WithContext(ctx).Where("published_at IS NULL").Order("id").Limit(limit).Find(&rows).Error)
}

// NewDelivery is a delivery of an event to a sink (to a webhook endpoint, EndpointID; 0 for WeChat).
type NewDelivery struct {
	Sink       string
	EndpointID uint64
	EventID    uint64
	Subject    string
}

// Publish records the deliveries of events (a repeat of one already there is left as it is) and
// marks the events published, in one transaction. A delivery is created pending, due at at, and
// claimed by token until claimedUntil for its first attempt. It answers, in event order, the
// deliveries it created: those carrying token (another relay's, or one recorded before, are not its
// to send).
func (s *Outbox) Publish(ctx context.Context, eventIDs []uint64, nds []NewDelivery, at time.Time, token string, claimedUntil time.Time) ([]models.Delivery, error) {
	ds := make([]models.Delivery, len(nds))
	for i, d := range nds {
		until := claimedUntil
		ds[i] = models.Delivery{Sink: d.Sink, EndpointID: d.EndpointID, EventID: d.EventID, Subject: d.Subject,
			Status: models.DeliveryPending, NextAttemptAt: at, ClaimedUntil: &until, ClaimToken: token, CreatedAt: at, UpdatedAt: at}
	}
	var ours []models.Delivery
	err := s.db.Tx(ctx, "publish events", func(tx *gorm.DB) error {
		ours = ours[:0]
		if len(ds) > 0 {
			for i := range ds {
				ds[i].ID = 0 // a retried transaction inserts them again
			}
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(ds, 500).Error; err != nil {
				return err
			}
			if err := tx.Where("event_id IN ? AND claim_token = ?", eventIDs, token).Order("event_id").Order("id").
				Find(&ours).Error; err != nil {
				return err
			}
		}
		return tx.Model(&models.OutboxEvent{}).Where("id IN ?", eventIDs).Update("published_at", at).Error
	})
	return ours, err
}

// Chain names the deliveries of one subject to one sink.
type Chain struct{ Sink, Subject string }

// FirstPending answers, for every chain of subjects with a pending delivery, the event id of its
// earliest one.
func (s *Outbox) FirstPending(ctx context.Context, subjects []string) (map[Chain]uint64, error) {
	var rows []struct {
		Sink, Subject string
		First         uint64
	}
	out := map[Chain]uint64{}
	for chunk := range slices.Chunk(subjects, 500) {
		rows = rows[:0]
		err := s.db.WithContext(ctx).Model(&models.Delivery{}).Select("sink, subject, MIN(event_id) AS first").
			Where("subject IN ? AND status = ?", chunk, models.DeliveryPending).Group("sink, subject").Scan(&rows).Error
		if err != nil {
			return nil, sqldb.MapErr("first pending deliveries", err)
		}
		for _, r := range rows {
			out[Chain{r.Sink, r.Subject}] = r.First
		}
	}
	return out, nil
}

// Event reads one outbox event.
func (s *Outbox) Event(ctx context.Context, id uint64) (models.OutboxEvent, error) {
	var e models.OutboxEvent
	return e, sqldb.MapErr("read event", s.db.WithContext(ctx).First(&e, id).Error)
}

// EventHeads maps event ids to their types and venues (the rest of each event is left out).
func (s *Outbox) EventHeads(ctx context.Context, ids []uint64) (map[uint64]models.OutboxEvent, error) {
	var rows []models.OutboxEvent
	if err := s.db.WithContext(ctx).Select("id, type, venue_id").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("read event types", err)
	}
	out := make(map[uint64]models.OutboxEvent, len(rows))
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// Delivery reads one delivery.
func (s *Outbox) Delivery(ctx context.Context, id uint64) (models.Delivery, error) {
	var d models.Delivery
	return d, sqldb.MapErr("read delivery", s.db.WithContext(ctx).First(&d, id).Error)
}

// ClaimDelivery claims delivery id for one attempt, under token, until until. It answers false, and
// claims nothing, when the delivery is finished, not due yet, in flight elsewhere (claimed), or not
// the head of its chain: an earlier event of the same subject still waits for the same sink, and
// finishing that one starts this one.
func (s *Outbox) ClaimDelivery(ctx context.Context, id uint64, token string, now, until time.Time) (models.Delivery, bool, error) {
	d, err := s.Delivery(ctx, id)
	if errors.Is(err, sqldb.ErrNotFound) {
		return d, false, nil
	}
	if err != nil || d.Status != models.DeliveryPending || d.NextAttemptAt.After(now) ||
		(d.ClaimedUntil != nil && d.ClaimedUntil.After(now)) {
		return d, false, err
	}
	var n int64
	err = s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("subject = ? AND sink = ? AND status = ? AND event_id < ?", d.Subject, d.Sink, models.DeliveryPending, d.EventID).
		Limit(1).Count(&n).Error
	if err != nil || n > 0 {
		return d, false, sqldb.MapErr("earlier deliveries", err)
	}
	// In a transaction of its own: attempts racing for the row can deadlock on its index entries,
	// and a transaction the server rolled back for that is run again.
	var claimed bool
	err = s.db.Tx(ctx, "claim delivery", func(tx *gorm.DB) error {
		res := tx.Model(&models.Delivery{}).
			Where("id = ? AND status = ? AND (claimed_until IS NULL OR claimed_until < ?)", id, models.DeliveryPending, now.UTC()).
			Updates(map[string]any{"claimed_until": until.UTC(), "claim_token": token})
		claimed = res.RowsAffected == 1
		return res.Error
	})
	return d, claimed, err
}

// Unclaim gives up token's claims on deliveries without recording an attempt.
func (s *Outbox) Unclaim(ctx context.Context, token string, ids []uint64) error {
	return sqldb.MapErr("unclaim deliveries", s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id IN ? AND claim_token = ?", ids, token).
		Updates(map[string]any{"claimed_until": nil, "claim_token": ""}).Error)
}

// Attempt is the outcome of one delivery attempt.
type Attempt struct {
	Status     string    // pending (to be retried at Next), or a final status
	Retries    int       // failed attempts in the series so far
	Next       time.Time // when a pending delivery is tried again
	HTTPStatus int
	Err        string
}

// FinishDelivery records an attempt made under token's claim and ends the claim. A claim that ran
// out and was taken by another worker is not overwritten (sqldb.ErrStale).
func (s *Outbox) FinishDelivery(ctx context.Context, id uint64, token string, a Attempt, at time.Time) error {
	if len(a.Err) > 500 {
		a.Err = a.Err[:500]
	}
	upd := map[string]any{"status": a.Status, "attempts": gorm.Expr("attempts + 1"), "retries": a.Retries,
		"last_status": a.HTTPStatus, "last_error": a.Err, "updated_at": at, "claimed_until": nil, "claim_token": ""}
	if a.Status == models.DeliveryPending {
		upd["next_attempt_at"] = a.Next.UTC()
	} else {
		upd["done_at"] = at
	}
	res := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("id = ? AND claim_token = ?", id, token).Updates(upd)
	if res.Error == nil && res.RowsAffected == 0 {
		return sqldb.ErrStale
	}
	return sqldb.MapErr("finish delivery", res.Error)
}

// FinishSent records the first, successful attempt of deliveries claimed by token, each answered
// with the HTTP status httpStatus, in one statement.
func (s *Outbox) FinishSent(ctx context.Context, token string, httpStatus int, ids []uint64, at time.Time) error {
	return sqldb.MapErr("finish deliveries", s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id IN ? AND claim_token = ?", ids, token).
		Updates(map[string]any{"status": models.DeliverySucceeded, "attempts": gorm.Expr("attempts + 1"), "last_status": httpStatus,
			"last_error": "", "updated_at": at, "done_at": at, "claimed_until": nil, "claim_token": ""}).Error)
}

// NextInChain answers the head of a subject's deliveries to a sink: its earliest pending one.
func (s *Outbox) NextInChain(ctx context.Context, sink, subject string) (models.Delivery, bool, error) {
	var rows []models.Delivery
	err := s.db.WithContext(ctx).Where("subject = ? AND sink = ? AND status = ?", subject, sink, models.DeliveryPending).
		Order("event_id").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return models.Delivery{}, false, sqldb.MapErr("next delivery", err)
	}
	return rows[0], true, nil
}

// ReopenDelivery puts a failed (or skipped) delivery back to pending, due at once, with a new
// series of retries: a retry by hand.
func (s *Outbox) ReopenDelivery(ctx context.Context, id, endpointID uint64, at time.Time) (models.Delivery, error) {
	d, err := s.Delivery(ctx, id)
	if err != nil {
		return d, err
	}
	if d.EndpointID != endpointID {
		return d, sqldb.ErrNotFound
	}
	if d.Status == models.DeliverySucceeded {
		return d, nil
	}
	err = s.db.WithContext(ctx).Model(&models.Delivery{}).Where("id = ? AND status <> ?", id, models.DeliverySucceeded).
		Updates(map[string]any{"status": models.DeliveryPending, "done_at": nil, "updated_at": at, "retries": 0,
			"next_attempt_at": at.UTC(), "claimed_until": nil, "claim_token": ""}).Error
	if err != nil {
		return d, sqldb.MapErr("reopen delivery", err)
	}
	return s.Delivery(ctx, id)
}

// DeliveryQuery selects an endpoint's deliveries, newest first.
type DeliveryQuery struct {
	EndpointID uint64
	Status     string
	Page
}

// Deliveries lists deliveries matching q: an admin's list, a replica read (see sqldb.DB.StaleRead).
func (s *Outbox) Deliveries(ctx context.Context, q DeliveryQuery) ([]models.Delivery, error) {
	var rows []models.Delivery
	err := s.db.StaleRead(ctx, false, func(db *gorm.DB) error {
		db = newestFirst(db, "deliveries", q.Page).Where("endpoint_id = ?", q.EndpointID)
		if q.Status != "" {
			db = db.Where("status = ?", q.Status)
		}
		rows = nil
		return db.Find(&rows).Error
	})
	return rows, sqldb.MapErr("list deliveries", err)
}

// NewEndpoint is what a new webhook endpoint is made of: EventTypes empty for every type, VenueID 0
// for every venue.
type NewEndpoint struct {
	URL, Secret string
	EventTypes  []string
	VenueID     uint64
}

// CreateEndpoint stores a webhook endpoint created at at and answers its row.
func (s *Outbox) CreateEndpoint(ctx context.Context, in NewEndpoint, at time.Time) (models.WebhookEndpoint, error) {
	types := in.EventTypes
	if types == nil {
		types = []string{}
	}
	e := models.WebhookEndpoint{URL: in.URL, Secret: in.Secret, EventTypes: jsonText(types), VenueID: in.VenueID, CreatedAt: at}
	return e, sqldb.MapErr("create webhook", s.db.WithContext(ctx).Create(&e).Error)
}

// Endpoints lists the endpoints not deleted.
func (s *Outbox) Endpoints(ctx context.Context) ([]models.WebhookEndpoint, error) {
	var rows []models.WebhookEndpoint
	return rows, sqldb.MapErr("list webhooks", s.db.WithContext(ctx).Where("deleted_at IS NULL").Order("id").Find(&rows).Error)
}

// Endpoint reads one endpoint, deleted or not.
func (s *Outbox) Endpoint(ctx context.Context, id uint64) (models.WebhookEndpoint, error) {
	var e models.WebhookEndpoint
	return e, sqldb.MapErr("read webhook", s.db.WithContext(ctx).First(&e, id).Error)
}

// DeleteEndpoint marks an endpoint deleted and skips what still waited for it.
func (s *Outbox) DeleteEndpoint(ctx context.Context, id uint64, at time.Time) error {
	return s.db.Tx(ctx, "delete webhook", func(tx *gorm.DB) error {
		res := tx.Model(&models.WebhookEndpoint{}).Where("id = ? AND deleted_at IS NULL", id).Update("deleted_at", at)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return sqldb.ErrNotFound
		}
		return tx.Model(&models.Delivery{}).Where("endpoint_id = ? AND status = ?", id, models.DeliveryPending).
			Updates(map[string]any{"status": models.DeliverySkipped, "done_at": at, "updated_at": at, "last_error": "endpoint deleted"}).Error
	})
}

// Template is the WeChat subscribe-message template of an event type: its template id, the page it
// opens, and which of its keys shows which field.
type Template struct {
	EventType, TemplateID, Page string
	Data                        map[string]string
}

// SetTemplate stores the WeChat template of an event type, as of at.
func (s *Outbox) SetTemplate(ctx context.Context, in Template, at time.Time) error {
	t := models.WechatTemplate{EventType: in.EventType, TemplateID: in.TemplateID, Page: in.Page, Data: jsonText(in.Data), UpdatedAt: at}
	return sqldb.MapErr("set template", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&t).Error)
}

// Templates lists the WeChat templates by event type.
func (s *Outbox) Templates(ctx context.Context) (map[string]models.WechatTemplate, error) {
	var rows []models.WechatTemplate
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("list templates", err)
	}
	out := make(map[string]models.WechatTemplate, len(rows))
	for _, r := range rows {
		out[r.EventType] = r
	}
	return out, nil
}

// Prune deletes what the retention no longer needs: deliveries finished before done (failed ones
// before failed), and published events before done that no delivery waits for.
func (s *Outbox) Prune(ctx context.Context, done, failed time.Time) (int64, error) {
	var total int64
	res := s.db.WithContext(ctx).Where("(status IN ? AND done_at < ?) OR (status = ? AND done_at < ?)",
		[]string{models.DeliverySucceeded, models.DeliverySkipped}, done.UTC(), models.DeliveryFailed, failed.UTC()).
		Delete(&models.Delivery{})
	if res.Error != nil {
		return 0, sqldb.MapErr("prune deliveries", res.Error)
	}
	total += res.RowsAffected
	res = s.db.WithContext(ctx).Where("published_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = outbox_events.id)", done.UTC()).
		Delete(&models.OutboxEvent{})
	total += res.RowsAffected
	return total, sqldb.MapErr("prune events", res.Error)
}

// IsNotFound reports a missing row.
func IsNotFound(err error) bool { return errors.Is(err, sqldb.ErrNotFound) }

// StaleHeads lists pending deliveries that are the head of their subject and sink, due before
// before and not in flight at now: their task was lost (Redis lost its data, queuing failed, the
// process died between publishing and queuing).
func (s *Outbox) StaleHeads(ctx context.Context, before, now time.Time, limit int) ([]uint64, error) {
	var ids []uint64
	err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("status = ? AND next_attempt_at < ? AND (claimed_until IS NULL OR claimed_until < ?)",
			models.DeliveryPending, before.UTC(), now.UTC()).
		Where("NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.subject = deliveries.subject AND e.sink = deliveries.sink AND e.status = ? AND e.event_id < deliveries.event_id)",
			models.DeliveryPending).
		Order("next_attempt_at").Limit(limit).Pluck("id", &ids).Error
	return ids, sqldb.MapErr("stale deliveries", err)
}
