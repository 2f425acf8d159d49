package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// queuedFixture fills a database with queued bookings inside the horizon (their tasks are in the
// queue: queue_at NULL) and a few newly due ones, on a store whose pool has one connection so that
// MySQL's session counters describe its queries.
func queuedFixture(t testing.TB, queued, fresh int) (*Store, *sql.DB, time.Time) {
	db := testenv.NewDB(t)
	if !db.MySQL {
		t.Skip("reads MySQL's handler counters")
	}
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	rows := make([]models.Booking, 0, 5000)
	flush := func() {
		require.NoError(t, db.Gorm.CreateInBatches(rows, 1000).Error)
		rows = rows[:0]
	}
	for i := range queued + fresh {
		at := now.Add(time.Duration(i%3600) * time.Second)
		b := models.Booking{HoldID: fmt.Sprintf("h1_%020d", i), UserID: "u", VenueID: 1, ResourceID: 1, Quantity: 1,
			Start: at, End: at.Add(time.Hour), OccupyStart: at, OccupyEnd: at.Add(time.Hour), Slots: "1:1",
			Status: string(booking.Confirmed), Version: 1, ReleaseAt: at, ConfirmedAt: now, CheckinCode: fmt.Sprintf("C%015d", i)}
		if i >= queued {
			q := at
			b.QueueAt = &q
		}
		rows = append(rows, b)
		if len(rows) == cap(rows) {
			flush()
		}
	}
	flush()
	conn, err := db.Gorm.DB()
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	g, err := gorm.Open(db.Gorm.Dialector, &gorm.Config{SkipDefaultTransaction: true, ConnPool: conn})
	require.NoError(t, err)
	return New(g, nil), conn, now
}

// handlerReads is how many rows the session's handlers read since the last FLUSH STATUS.
func handlerReads(t testing.TB, conn *sql.DB) int {
	rows, err := conn.Query("SHOW SESSION STATUS LIKE 'Handler_read%'")
	require.NoError(t, err)
	defer rows.Close()
	total := 0
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		total += n
	}
	return total
}

// The loader reads only what is newly due: with 100,000 bookings of the horizon already queued, its
// query reads about the rows it returns.
func TestLoaderQueryReadsOnlyWhatIsNewlyDue(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 rows")
	}
	t.Parallel()
	s, conn, now := queuedFixture(t, 100_000, 500)
	_, err := conn.Exec("FLUSH STATUS")
	require.NoError(t, err)
	refs, err := s.DueForQueue(context.Background(), now.Add(time.Hour), 500)
	require.NoError(t, err)
	require.Len(t, refs, 500)
	read := handlerReads(t, conn)
	t.Logf("loader query: %d handler reads for %d rows (100,000 queued)", read, len(refs))
	require.LessOrEqual(t, read, 1000)
}

// BenchmarkLoaderQuery times the loader's query with 100,000 bookings of the horizon queued.
func BenchmarkLoaderQuery(b *testing.B) {
	s, conn, now := queuedFixture(b, 100_000, 500)
	ctx := context.Background()
	_, err := conn.Exec("FLUSH STATUS")
	require.NoError(b, err)
	for b.Loop() {
		if _, err := s.DueForQueue(ctx, now.Add(time.Hour), 500); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(handlerReads(b, conn))/float64(b.N), "rows-read/op")
}
