package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wechatpay/wechatpayfake"
	"github.com/slotwheel/slotwheel/models"
)

// A verified payment of another amount than the order's books nothing and is kept for refund in
// full; a notification for another merchant or app is refused; one for an order this deployment did
// not make is acknowledged and ignored.
func TestWechatPayNotifications(t *testing.T) {
	t.Parallel()
	fake := wechatpayfake.New(t, wechatpayfake.WithClock(time.Now))
	tb := setup(t, func(o *Options) { o.WechatPay = fake.Client("https://slotwheel.invalid/notify") })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.clock.Set(time.Now().UTC().Truncate(time.Millisecond)) // the fake signs with real time
	start := res.CreatedAt.Truncate(time.Hour).Add(48 * time.Hour)
	wx := Actor{UserID: booking.WechatUserID("o-dan"), Role: RoleUser}
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: wx.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	_, err = tb.e.WechatPayParams(ctx, alice, h.ID)
	require.ErrorIs(t, err, ErrNotFound, "another's hold")
	_, err = tb.e.WechatPayParams(ctx, wx, h.ID)
	require.NoError(t, err)
	no := fake.Orders()[0].OutTradeNo

	for _, mut := range []func(*wechatpayfake.NotifyOpts){wechatpayfake.WrongMchID, wechatpayfake.WrongAppID} {
		hdr, body := fake.PaymentNotification(no, h.AmountCents, mut)
		require.ErrorIs(t, tb.e.WechatPayNotify(ctx, hdr, body), ErrNotificationRefuse)
	}
	hdr, body := fake.PaymentNotification(no, h.AmountCents, wechatpayfake.WrongAmount(h.AmountCents-1))
	require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body), "acknowledged")
	got, err := tb.e.GetHold(ctx, wx, h.ID)
	require.NoError(t, err)
	require.Equal(t, HoldHeld, got.Status, "nothing booked")
	rs := tb.refunds(t)
	require.Len(t, rs, 1)
	require.Equal(t, booking.RefundAmountMismatch, rs[0].Reason)
	require.Equal(t, h.AmountCents-1, rs[0].AmountCents, "what was paid goes back")
	require.Equal(t, models.ProviderWechatPay, rs[0].Provider)

	hdr, body = fake.PaymentNotification("swunknown0000000000000", 100)
	require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body), "an order this deployment did not make is acknowledged")
}
