package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatfake"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatpayfake"
	"github.com/slotwheel/slotwheel/models"
)

// refusingRefunds is a payment provider that refuses every refund with an error that quotes the
// payer, as a provider's error text may.
type refusingRefunds struct{}

func (refusingRefunds) Name() string { return models.ProviderNotify }

func (refusingRefunds) RequestRefund(_ context.Context, r models.Refund) (string, *RefundOutcome, error) {
	return "", nil, fmt.Errorf("refund %s refused: payer %s is not known here", r.OutRefundNo, r.UserID)
}

// personalLeft lists every place of the test's MySQL database and Redis keyspace where value still
// occurs: in any column of any table, in any key's name, and in any key's content.
func (tb *testBundle) personalLeft(t testing.TB, value string) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	for _, m := range models.All() {
		stmt := &gorm.Statement{DB: tb.db.Gorm}
		require.NoError(t, stmt.Parse(m))
		table := stmt.Schema.Table
		var rows []map[string]any
		require.NoError(t, tb.db.Gorm.Table(table).Find(&rows).Error)
		for _, row := range rows {
			for col, v := range row {
				var s string
				switch v := v.(type) {
				case string:
					s = v
				case []byte:
					s = string(v)
				}
				if strings.Contains(s, value) {
					found = append(found, fmt.Sprintf("mysql %s.%s: %s", table, col, s))
				}
			}
		}
	}
	rdb := tb.redis.Client
	keys, err := rdb.Keys(ctx, tb.redis.Prefix+":*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		var content []string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			content = []string{rdb.Get(ctx, k).Val()}
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				content = append(content, f, v)
			}
		case "zset":
			content = rdb.ZRange(ctx, k, 0, -1).Val()
		case "set":
			content = rdb.SMembers(ctx, k).Val()
		case "list":
			content = rdb.LRange(ctx, k, 0, -1).Val()
		default:
			t.Fatalf("redis key %s has type %s, which this scan does not read", k, typ)
		}
		for _, c := range append(content, k) {
			if strings.Contains(c, value) {
				found = append(found, fmt.Sprintf("redis %s: %s", k, c))
			}
		}
	}
	return found
}

// inventory is what slot accounting consists of at a venue: Redis's capacity, used units and owners.
func (tb *testBundle) inventory(t testing.TB, venueID uint64) [3]map[string]string {
	t.Helper()
	ctx := context.Background()
	vk := tb.e.rs.Keys().Venue(venueID)
	var out [3]map[string]string
	for i, k := range []string{vk.Capacity(), vk.Used(), vk.Owners()} {
		m, err := tb.redis.Client.HGetAll(ctx, k).Result()
		require.NoError(t, err)
		out[i] = m
	}
	return out
}

// After a user is erased, nothing of them is left in any MySQL row, Redis key or payload not yet
// delivered; what was already delivered stays with its receiver. Inventory, owners, availability and
// per-user counts are as before; the pseudonym still groups the user's no-shows and live holds. A
// repeat answers the same, and the id itself starts afresh.
func TestEraseUserLeavesNothingPersonal(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t, func(o *Options) { o.Refunds = refusingRefunds{} })
	ctx := context.Background()
	const openid = "o-erin-6c1f2a9b77d0"
	erin := booking.Actor{UserID: booking.WechatUserID(openid), Role: booking.RoleUser}
	bob := booking.Actor{UserID: "bob", Role: booking.RoleUser}
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	solo := tb.resourceAt(t, res.VenueID, 1, 60, "08:00", "22:00")
	_, err := tb.e.SetNoshowPolicy(ctx, booking.System, booking.NoshowPolicyInput{MaxNoshows: 1, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err)

	// Delivered before the erasure: the receiver keeps them. Two no-shows, to go over max_noshows 1.
	noShow := tb.book(t, erin, res, at("11:00"))
	noShow2 := tb.book(t, erin, res, at("11:00"))
	_, err = tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	require.Len(t, r.ackedBodies(), 2)

	// Everything after waits for a receiver that refuses, quoting what it refused.
	r.refuse = func(int, time.Time) bool { return true }
	r.echo = true
	later := tb.book(t, erin, res, at("13:00"))
	paid := tb.payFor(t, erin, res, at("14:00"), "pay-erin-14")
	_, err = tb.e.CancelBooking(ctx, erin, paid.ID)
	require.NoError(t, err)
	refunds := tb.refunds(t)
	require.Len(t, refunds, 1)
	require.Error(t, tb.e.SendRefund(ctx, refunds[0].ID), "the provider refuses, quoting the payer")
	bobs := tb.book(t, bob, solo, at("15:00"))
	waiting, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: erin.UserID, ResourceID: solo.ID, Start: at("15:00"), End: at("16:00")})
	require.NoError(t, err)
	require.Equal(t, booking.WaitWaiting, waiting.Status)
	promoted, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: erin.UserID, ResourceID: solo.ID, Start: at("18:00"), End: at("19:00")})
	require.NoError(t, err)
	require.Equal(t, booking.WaitPromoted, promoted.Status, "free at once: promoted to a hold")
	given, err := tb.e.Hold(ctx, HoldRequest{UserID: erin.UserID, ResourceID: res.ID, Start: at("17:00"), End: at("18:00")})
	require.NoError(t, err)
	_, err = tb.e.CancelHold(ctx, erin, given.ID)
	require.NoError(t, err)
	answers := idem.NewSQL(tb.db.Gorm, tb.clock)
	_, err = answers.Begin(ctx, "idem:erin-confirm", "hash")
	require.NoError(t, err)
	require.NoError(t, answers.Finish(ctx, "idem:erin-confirm", idem.Response{Status: 201, Body: mustJSON(wire.FromBooking(later))}))

	// A hold still live at the erasure, made just before the no-shows that freeze erin.
	tb.clock.Set(noShow.ReleaseAt.Add(-time.Minute))
	live, err := tb.e.Hold(ctx, HoldRequest{UserID: erin.UserID, ResourceID: res.ID, Start: at("16:00"), End: at("17:00")})
	require.NoError(t, err)
	tb.clock.Set(noShow.ReleaseAt)
	_, err = tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	frozen, err := tb.e.rs.FrozenUntil(ctx, erin.UserID)
	require.NoError(t, err)
	require.True(t, frozen.After(tb.clock.Now()), "two no-shows, over max_noshows 1, freeze erin")
	_, err = tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	for _, id := range q.due(tb.clock.Now()) {
		require.NoError(t, tb.e.Deliver(ctx, id))
	}
	require.Len(t, r.ackedBodies(), 2, "the rest is pending")
	require.NotEmpty(t, tb.personalLeft(t, openid))

	var events int64
	require.NoError(t, tb.db.Gorm.Model(&models.OutboxEvent{}).Where("user_id = ?", erin.UserID).Count(&events).Error)
	day := at("00:00").Format(booking.DayLayout)
	availBefore := map[uint64][]SlotAvailability{}
	for _, id := range []uint64{res.ID, solo.ID} {
		availBefore[id], err = tb.e.Availability(ctx, AvailabilityQuery{ResourceID: id, Date: day})
		require.NoError(t, err)
	}
	before := tb.inventory(t, res.VenueID) // after reading availability, which gives back what expired
	noShows, err := tb.e.NoShows(ctx, erin.UserID)
	require.NoError(t, err)
	require.Equal(t, 2, noShows)

	// Admins only, and only people's ids.
	for _, a := range []booking.Actor{erin, bob, {UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}} {
		_, err := tb.e.EraseUser(ctx, a, erin.UserID)
		require.ErrorIs(t, err, booking.ErrForbidden)
	}
	for _, id := range []string{"", booking.ActorSystem, booking.Pseudonym(tb.e.opts.ErasureKey, erin.UserID)} {
		_, err := tb.e.EraseUser(ctx, booking.System, id)
		require.ErrorIs(t, err, booking.Invalid("invalid_user_id", ""), "%q", id)
	}

	got, err := tb.e.EraseUser(ctx, booking.System, erin.UserID)
	require.NoError(t, err)
	pseudonym := booking.Pseudonym(tb.e.opts.ErasureKey, erin.UserID)
	require.Equal(t, Erased{Pseudonym: pseudonym, Bookings: 4, History: 1, Waitlist: 2, Refunds: 1, Events: int(events),
		StoredAnswers: 1, Holds: 3}, got)
	require.Empty(t, tb.personalLeft(t, openid), "nothing of erin is left")

	// Slot accounting is untouched; what is counted per user counts under the pseudonym.
	require.Equal(t, before, tb.inventory(t, res.VenueID))
	for id, want := range availBefore {
		slots, err := tb.e.Availability(ctx, AvailabilityQuery{ResourceID: id, Date: day})
		require.NoError(t, err)
		require.Equal(t, want, slots)
	}
	for id, status := range map[uint64]booking.Status{noShow.ID: booking.Released, noShow2.ID: booking.Released, later.ID: booking.Confirmed, paid.ID: booking.CancelledByUser} {
		b, err := tb.e.GetBooking(ctx, booking.System, id)
		require.NoError(t, err)
		require.Equal(t, status, b.Status)
		require.Equal(t, pseudonym, b.UserID)
	}
	n, err := tb.e.NoShows(ctx, pseudonym)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the no-shows count under the pseudonym")
	vk := tb.e.rs.Keys().Venue(res.VenueID)
	require.EqualValues(t, 1, tb.redis.Client.ZCount(ctx, vk.UserLive(pseudonym), strconv.FormatInt(tb.clock.Now().UnixMilli()+1, 10), "+inf").Val(),
		"the live hold counts under the pseudonym")
	require.EqualValues(t, 3, tb.redis.Client.ZCard(ctx, vk.UserHolds(pseudonym)).Val())
	h, err := tb.e.GetHold(ctx, booking.System, live.ID)
	require.NoError(t, err)
	require.Equal(t, pseudonym, h.UserID)
	require.Equal(t, booking.HoldHeld, h.Status, "the hold lives on, to be paid or to run out")
	b, err := tb.e.GetBooking(ctx, booking.System, bobs.ID)
	require.NoError(t, err)
	require.Equal(t, "bob", b.UserID, "nobody else is touched")
	w, err := tb.e.ss.WaitlistEntry(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, string(booking.WaitCancelled), w.Status, "erin no longer waits")
	w, err = tb.e.ss.WaitlistEntry(ctx, promoted.ID)
	require.NoError(t, err)
	require.Equal(t, string(booking.WaitPromoted), w.Status, "a promotion keeps its hold")

	// Pending deliveries go out as the events read now; the one delivered before keeps the id.
	r.refuse = nil
	tb.drain(t, q, tb.clock.Now().Add(time.Hour))
	bodies := r.ackedBodies()
	var all int64
	require.NoError(t, tb.db.Gorm.Model(&models.OutboxEvent{}).Count(&all).Error)
	require.Len(t, bodies, int(all), "every event went out (bob's too)")
	for _, body := range bodies[:2] {
		require.Contains(t, string(body), openid, "delivered before the erasure: cannot be recalled")
	}
	members := 0
	for _, body := range bodies[2:] {
		require.NotContains(t, string(body), openid)
		if bytes.Contains(body, []byte(`"user_id":"`+pseudonym+`"`)) {
			members++
		}
	}
	require.Equal(t, int(events)-3, members, "every booking event after the two delivered before shows the pseudonym (the refund's has no user)")

	// A repeat answers the same.
	again, err := tb.e.EraseUser(ctx, booking.System, erin.UserID)
	require.NoError(t, err)
	require.Equal(t, got, again)

	// The id starts afresh: no bookings, no freeze, no holds counted against it.
	mine, _, err := tb.e.ListBookings(ctx, erin, "", 0)
	require.NoError(t, err)
	require.Empty(t, mine)
	holds, err := tb.e.ListHolds(ctx, erin)
	require.NoError(t, err)
	require.Empty(t, holds)
	fresh, err := tb.e.Hold(ctx, HoldRequest{UserID: erin.UserID, ResourceID: res.ID, Start: at("19:00"), End: at("20:00")})
	require.NoError(t, err, "not frozen any more")
	require.Equal(t, erin.UserID, fresh.UserID)
	third, err := tb.e.EraseUser(ctx, booking.System, erin.UserID)
	require.NoError(t, err)
	require.Equal(t, got.Holds+1, third.Holds, "a later erasure takes the new hold too")
	require.Empty(t, tb.personalLeft(t, openid))
}

// A WeChat user's payer openid in their WeChat Pay order is erased; a subscribe message still pending
// for them is skipped rather than sent, a failed one keeps no quote of the openid in its error, and
// an event the relay publishes after the erasure makes no message at all.
func TestEraseWechatUser(t *testing.T) {
	t.Parallel()
	const openid = "o-wendy-41be0c"
	for _, tc := range []struct {
		name   string
		before func(msgs *wechatfake.Fake) // how the message's first attempt goes; nil: not published
		status string                      // the message's delivery in the end; "": there is none
	}{
		{"pending", func(msgs *wechatfake.Fake) { msgs.FailNextSend(503) }, models.DeliverySkipped},
		{"failed quoting the openid", func(msgs *wechatfake.Fake) {
			msgs.RejectNextSend(wechatmsg.CodeInvalidOpenID, "invalid openid "+openid+" rid: 6f0a")
		}, models.DeliveryFailed},
		{"unpublished", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb, q, fake, msgs := wechatBundle(t)
			ctx := context.Background()
			wx := booking.Actor{UserID: booking.WechatUserID(openid), Role: booking.RoleUser}
			res := tb.resource(t, 1, 60, "08:00", "22:00")
			tb.clock.Set(time.Now().UTC().Truncate(time.Millisecond)) // the fake signs with real time
			start := res.CreatedAt.Truncate(time.Hour).Add(48 * time.Hour)
			h, err := tb.e.Hold(ctx, HoldRequest{UserID: wx.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			require.NoError(t, err)
			_, err = tb.e.WechatPayParams(ctx, wx, h.ID)
			require.NoError(t, err)
			hdr, body := fake.PaymentNotification(fake.Orders()[0].OutTradeNo, h.AmountCents)
			require.NoError(t, tb.e.WechatPayNotify(ctx, hdr, body))
			if tc.before != nil {
				tc.before(msgs)
				_, err = tb.e.RelayOutbox(ctx)
				require.NoError(t, err)
			}
			require.Empty(t, msgs.Messages())
			require.NotEmpty(t, tb.personalLeft(t, openid))

			got, err := tb.e.EraseUser(ctx, booking.System, wx.UserID)
			require.NoError(t, err)
			require.Equal(t, 1, got.WechatOrders)
			require.Equal(t, 1, got.Bookings)
			require.Empty(t, tb.personalLeft(t, openid))

			_, err = tb.e.RelayOutbox(ctx)
			require.NoError(t, err)
			tb.drain(t, q, tb.clock.Now().Add(time.Hour))
			require.Empty(t, msgs.Messages(), "nobody to address")
			var ds []models.Delivery
			require.NoError(t, tb.db.Gorm.Where("sink = ?", sinkWechat).Find(&ds).Error)
			if tc.status == "" {
				require.Empty(t, ds, "an event published after the erasure makes no WeChat delivery")
				return
			}
			require.Len(t, ds, 1)
			require.Equal(t, tc.status, ds[0].Status)
		})
	}
}

// Erasure needs both backends; an outage answers unavailable and changes nothing that a retry
// would not finish.
func TestEraseUserOutage(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	if tb.redis.Mini == nil {
		t.Skip("needs the embedded Redis to simulate an outage")
	}
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	tb.redis.Mini.SetError("LOADING")
	_, err := tb.e.EraseUser(ctx, booking.System, alice.UserID)
	require.True(t, errors.Is(err, booking.ErrBackendUnavailable), "%v", err)
	tb.redis.Mini.SetError("")
	got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
	require.NoError(t, err)
	require.Equal(t, alice.UserID, got.UserID, "nothing was erased")
	erased, err := tb.e.EraseUser(ctx, booking.System, alice.UserID)
	require.NoError(t, err)
	require.Equal(t, 1, erased.Bookings)
}

// wechatBundle is an engine with WeChat Pay, WeChat subscribe messages (a template for
// booking.confirmed) and a fake queue.
func wechatBundle(t *testing.T) (*testBundle, *fakeQueue, *wechatpayfake.Fake, *wechatfake.Fake) {
	pay := wechatpayfake.New(t, wechatpayfake.WithClock(time.Now))
	msgs := wechatfake.New(t, "wx-app", "wx-secret")
	q := newFakeQueue()
	tb := setup(t, func(o *Options) {
		o.Scheduler = q
		o.WechatPay = pay.Client("https://slotwheel.invalid/notify")
		o.Notify.Wechat = &wechatmsg.Client{AppID: "wx-app", Secret: "wx-secret", APIBase: msgs.URL, HTTP: msgs.Client()}
	})
	_, err := tb.e.SetWechatTemplate(context.Background(), booking.System, WechatTemplate{EventType: booking.EventConfirmed,
		TemplateID: "tpl-confirmed", Page: "pages/booking", Data: map[string]string{"thing1": "resource_name"}})
	require.NoError(t, err)
	return tb, q, pay, msgs
}
