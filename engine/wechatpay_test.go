package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatpayfake"
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
	wx := booking.Actor{UserID: booking.WechatUserID("o-dan"), Role: booking.RoleUser}
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: wx.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	_, err = tb.e.WechatPayParams(ctx, alice, h.ID)
	require.ErrorIs(t, err, booking.ErrNotFound, "another's hold")
	_, err = tb.e.WechatPayParams(ctx, wx, h.ID)
	require.NoError(t, err)
	no := fake.Orders()[0].OutTradeNo

	for _, mut := range []func(*wechatpayfake.NotifyOpts){wechatpayfake.WrongMchID, wechatpayfake.WrongAppID} {
		hdr, body := fake.PaymentNotification(no, h.AmountCents, mut)
		require.ErrorIs(t, tb.e.WechatPayNotify(ctx, hdr, body), booking.ErrNotificationRefused)
	}
	hdr, body := fake.PaymentNotification(no, h.AmountCents, wechatpayfake.WrongAmount(h.AmountCents-1))
	require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body), "acknowledged")
	got, err := tb.e.GetHold(ctx, wx, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldHeld, got.Status, "nothing booked")
	rs := tb.refunds(t)
	require.Len(t, rs, 1)
	require.Equal(t, booking.RefundAmountMismatch, rs[0].Reason)
	require.Equal(t, h.AmountCents-1, rs[0].AmountCents, "what was paid goes back")
	require.Equal(t, models.ProviderWechatPay, rs[0].Provider)

	hdr, body = fake.PaymentNotification("swunknown0000000000000", 100)
	require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body), "an order this deployment did not make is acknowledged")
}

// closeQueue records the order closes queued.
type closeQueue struct {
	fakeQueue
	mu     sync.Mutex
	closes []string
}

func (q *closeQueue) ScheduleCloseOrder(_ context.Context, holdID string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closes = append(q.closes, holdID)
	return nil
}

func (q *closeQueue) taken() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.closes
	q.closes = nil
	return out
}

// An order whose hold ended unpaid is closed even when the task that would have closed it was lost
// (with Redis, in a failover): a sweep finds it from its MySQL row once the wheel has had its time.
// A paid order is left open, and a closed one is not queued again.
func TestOrdersOfEndedHoldsAreSweptFromMySQL(t *testing.T) {
	t.Parallel()
	fake := wechatpayfake.New(t, wechatpayfake.WithClock(time.Now))
	q := &closeQueue{fakeQueue: *newFakeQueue()}
	tb := setup(t, func(o *Options) {
		o.WechatPay, o.Scheduler, o.HoldTTL = fake.Client("https://slotwheel.invalid/notify"), q, time.Minute
	})
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	tb.clock.Set(time.Now().UTC().Truncate(time.Millisecond)) // the fake signs with real time
	start := res.CreatedAt.Truncate(time.Hour).Add(48 * time.Hour)
	var holds []booking.Hold
	for _, u := range []string{"o-dan", "o-eve"} {
		wx := booking.Actor{UserID: booking.WechatUserID(u), Role: booking.RoleUser}
		h, err := tb.e.Hold(ctx, HoldRequest{UserID: wx.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
		require.NoError(t, err)
		_, err = tb.e.WechatPayParams(ctx, wx, h.ID)
		require.NoError(t, err)
		holds = append(holds, h)
	}
	unpaid, paid := holds[0], holds[1]
	hdr, body := fake.PaymentNotification(fake.Orders()[1].OutTradeNo, paid.AmountCents)
	require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body))

	require.NoError(t, tb.e.sweepOrders(ctx))
	require.Empty(t, q.taken(), "nothing before the holds' deadlines")
	// The wheel never ran: the close task it would have queued is lost. (An order expires at its
	// hold's deadline rounded up to the second, as WeChat takes it.)
	tb.clock.Advance(time.Minute + time.Second + orderCloseSlack)
	require.NoError(t, tb.e.sweepOrders(ctx))
	require.Equal(t, []string{unpaid.ID}, q.taken(), "the unpaid order, not the paid one")
	require.NoError(t, tb.e.CloseWechatOrder(ctx, unpaid.ID))
	require.Contains(t, fake.Closed(), fake.Orders()[0].OutTradeNo)
	require.NoError(t, tb.e.sweepOrders(ctx))
	require.Empty(t, q.taken(), "a closed order is not queued again")
}
