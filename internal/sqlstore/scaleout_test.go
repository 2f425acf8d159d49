package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// Stores that scale out hand out auto-increment ids per server, so ids do not follow creation
// time. Here rows get ids in the opposite order of their creation: lists still come newest first,
// page by page, and the waitlist still serves the first come first.
func TestListsFollowCreationTimeNotIds(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := New(db.Gorm, nil)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	// Created at t0, t0+1s, t0+2s with ids 30, 20, 10: the newest has the smallest id.
	created := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	id := func(i int) uint64 { return uint64(30 - 10*i) }
	for i := range 3 {
		at := created(i)
		require.NoError(t, db.Gorm.Create(&models.Booking{ID: id(i), HoldID: fmt.Sprintf("h1_%020d", i), UserID: "u", VenueID: 1,
			ResourceID: 1, Quantity: 1, Start: at, End: at.Add(time.Hour), OccupyStart: at, OccupyEnd: at.Add(time.Hour), Slots: "1:1",
			Status: string(booking.Confirmed), Version: 1, ReleaseAt: at, ConfirmedAt: at, CheckinCode: fmt.Sprintf("C%d", i),
			CreatedAt: at, UpdatedAt: at}).Error)
		require.NoError(t, db.Gorm.Create(&models.Refund{ID: id(i), HoldID: "h", PaymentID: "p", Provider: "notify", PaidCents: 1,
			AmountCents: 1, Reason: "cancel", Status: models.RefundRequested, OutRefundNo: fmt.Sprintf("r%d", i), CreatedAt: at, UpdatedAt: at}).Error)
		require.NoError(t, db.Gorm.Create(&models.Delivery{ID: id(i), Sink: "webhook:1", EndpointID: 1, EventID: uint64(i + 1), Subject: "s",
			Status: models.DeliveryPending, NextAttemptAt: at, CreatedAt: at, UpdatedAt: at}).Error)
		key := fmt.Sprintf("w%d", i)
		require.NoError(t, db.Gorm.Create(&models.WaitlistEntry{ID: id(i), UserID: fmt.Sprintf("u%d", i), VenueID: 1, ResourceID: 1,
			Status: string(booking.WaitWaiting), Start: at, End: at.Add(time.Hour), Quantity: 1, WaitingKey: &key, CreatedAt: at, UpdatedAt: at}).Error)
	}
	newestFirst := []uint64{10, 20, 30}

	// One row a page, following each page's last id as the cursor.
	var got []uint64
	var cursor uint64
	for range 4 {
		rows, err := s.ListBookings(ctx, ListQuery{UserID: "u", Page: Page{BeforeID: cursor, Limit: 1}})
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		got = append(got, rows[0].ID)
		cursor = rows[0].ID
	}
	require.Equal(t, newestFirst, got, "bookings newest first, page by page")

	got, cursor = nil, 0
	for range 4 {
		rows, err := s.Refunds(ctx, RefundQuery{Page: Page{BeforeID: cursor, Limit: 1}})
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		got = append(got, rows[0].ID)
		cursor = rows[0].ID
	}
	require.Equal(t, newestFirst, got, "refunds newest first, page by page")

	deliveries, err := s.Deliveries(ctx, DeliveryQuery{EndpointID: 1, Page: Page{Limit: 10}})
	require.NoError(t, err)
	require.Equal(t, newestFirst, ids(deliveries, func(d models.Delivery) uint64 { return d.ID }))
	deliveries, err = s.Deliveries(ctx, DeliveryQuery{EndpointID: 1, Page: Page{BeforeID: 10, Limit: 10}})
	require.NoError(t, err)
	require.Equal(t, []uint64{20, 30}, ids(deliveries, func(d models.Delivery) uint64 { return d.ID }))

	waiting, err := s.Waiting(ctx, 1, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{30, 20, 10}, ids(waiting, func(w models.WaitlistEntry) uint64 { return w.ID }), "first come, first served")

	rows, err := s.ListBookings(ctx, ListQuery{UserID: "u", Page: Page{BeforeID: 999, Limit: 10}})
	require.NoError(t, err)
	require.Empty(t, rows, "a cursor of no row ends the list")
}

func ids[T any](rows []T, id func(T) uint64) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = id(r)
	}
	return out
}
