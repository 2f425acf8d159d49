package sqlstore

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// NewOrder is a hold's JSAPI order as WeChat Pay took it: its out_trade_no, the prepay_id WeChat
// answered, the payer and the amount, and when it expires.
type NewOrder struct {
	HoldID, OutTradeNo, PrepayID, OpenID string
	AmountCents                          int64
	ExpiresAt                            time.Time
}

// CreateOrder stores a hold's WeChat Pay order, made at at; when the hold has one already (a
// concurrent request made it), that one is answered.
func (s *Payments) CreateOrder(ctx context.Context, in NewOrder, at time.Time) (models.WechatOrder, error) {
	o := models.WechatOrder{HoldID: in.HoldID, OutTradeNo: in.OutTradeNo, PrepayID: in.PrepayID, OpenID: in.OpenID,
		AmountCents: in.AmountCents, ExpiresAt: in.ExpiresAt.UTC(), CreatedAt: at}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&o).Error; err != nil {
		return models.WechatOrder{}, sqldb.MapErr("create order", err)
	}
	return s.OrderByHold(ctx, o.HoldID)
}

// OrderByHold reads a hold's WeChat Pay order.
func (s *Payments) OrderByHold(ctx context.Context, holdID string) (models.WechatOrder, error) {
	var o models.WechatOrder
	return o, sqldb.MapErr("read order", s.db.WithContext(ctx).First(&o, "hold_id = ?", holdID).Error)
}

// OrderByTradeNo reads the order of an out_trade_no.
func (s *Payments) OrderByTradeNo(ctx context.Context, outTradeNo string) (models.WechatOrder, error) {
	var o models.WechatOrder
	return o, sqldb.MapErr("read order", s.db.WithContext(ctx).First(&o, "out_trade_no = ?", outTradeNo).Error)
}

// OpenOrders lists orders still open whose deadline lies in [from, to] and for whose hold no payment
// was recorded, by deadline.
func (s *Payments) OpenOrders(ctx context.Context, from, to time.Time, limit int) ([]models.WechatOrder, error) {
	var rows []models.WechatOrder
	paid := s.db.Primary.Model(&models.Payment{}).Select("hold_id")
	err := s.db.WithContext(ctx).Where("closed_at IS NULL AND expires_at >= ? AND expires_at <= ? AND hold_id NOT IN (?)",
		from.UTC(), to.UTC(), paid).Order("expires_at").Limit(limit).Find(&rows).Error
	return rows, sqldb.MapErr("open orders", err)
}

// OrderClosed records that a hold's order was closed.
func (s *Payments) OrderClosed(ctx context.Context, holdID string, at time.Time) error {
	return sqldb.MapErr("close order", s.db.WithContext(ctx).Model(&models.WechatOrder{}).
		Where("hold_id = ? AND closed_at IS NULL", holdID).Update("closed_at", at.UTC()).Error)
}
