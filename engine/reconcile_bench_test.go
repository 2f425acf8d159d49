package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/models"
)

// BenchmarkReconcileWarm times a reconciliation of 100,000 active bookings whose units Redis
// already counts (the hourly run), after a cold one that counted them (a start after Redis lost its
// data).
func BenchmarkReconcileWarm(b *testing.B) {
	const n = 100_000
	tb := setup(b)
	ctx := context.Background()
	res := tb.resource(b, n, 60, "00:00", "24:00")
	start := at("15:00").AddDate(0, 0, 1)
	field := redisstore.SlotField(res.ID, start.Unix()/60)
	rows := make([]models.Booking, 0, 2000)
	for i := range n {
		rows = append(rows, models.Booking{HoldID: fmt.Sprintf("h%d_%020d", res.VenueID, i), UserID: "u", VenueID: res.VenueID,
			ResourceID: res.ID, Quantity: 1, Start: start, End: start.Add(time.Hour), OccupyStart: start,
			OccupyEnd: start.Add(time.Hour), Slots: field, Status: string(booking.Confirmed), Version: 1,
			ReleaseAt: start.Add(15 * time.Minute), ConfirmedAt: tb.clock.Now(), CheckinCode: fmt.Sprintf("R%015d", i)})
		if len(rows) == cap(rows) {
			require.NoError(b, tb.db.Gorm.CreateInBatches(rows, 1000).Error)
			rows = rows[:0]
		}
	}
	cold := time.Now()
	rep, err := tb.e.Reconcile(ctx)
	require.NoError(b, err)
	require.Equal(b, n, rep.OwnersAdded)
	b.Logf("cold reconciliation of %d bookings: %s", n, time.Since(cold))
	b.ResetTimer()
	for b.Loop() {
		rep, err := tb.e.Reconcile(ctx)
		require.NoError(b, err)
		require.Zero(b, rep.OwnersAdded+rep.OwnersRemoved+rep.CounterDrift, "nothing to repair")
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "warm-s")
	require.Equal(b, n, tb.used(b, res.VenueID, res.ID, start))
}
