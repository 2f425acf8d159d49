package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

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

// Two transactions that lock the same rows in opposite orders deadlock on a real server; the one
// the server rolls back (error 1213) runs again, and both changes are made, once each.
func TestTransactionRetriedAfterDeadlock(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	if !db.MySQL {
		t.Skip("a deadlock needs InnoDB's row locks")
	}
	s := New(db.Gorm, nil)
	ctx := context.Background()
	a, b := models.Venue{Name: "a", Timezone: "UTC"}, models.Venue{Name: "b", Timezone: "UTC"}
	require.NoError(t, db.Gorm.Create(&a).Error)
	require.NoError(t, db.Gorm.Create(&b).Error)

	var runs atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	var arrived atomic.Int32
	lockBoth := func(first, second uint64, name string) func(tx *gorm.DB) error {
		attempt := 0
		return func(tx *gorm.DB) error {
			runs.Add(1)
			attempt++
			if err := tx.Model(&models.Venue{}).Where("id = ?", first).Update("name", name).Error; err != nil {
				return err
			}
			if attempt == 1 {
				// Both hold their first row before either asks for its second.
				if arrived.Add(1) == 2 {
					once.Do(func() { close(both) })
				}
				<-both
			}
			return tx.Model(&models.Venue{}).Where("id = ?", second).Update("name", name+"+").Error
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- s.tx(ctx, "ab", lockBoth(a.ID, b.ID, "ab")) }()
	go func() { errs <- s.tx(ctx, "ba", lockBoth(b.ID, a.ID, "ba")) }()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.EqualValues(t, 3, runs.Load(), "the deadlock's victim ran once more")
	var names []string
	require.NoError(t, db.Gorm.Model(&models.Venue{}).Order("id").Pluck("name", &names).Error)
	require.Contains(t, [][]string{{"ab", "ab+"}, {"ba+", "ba"}}, names, "the transaction that ran last wrote both rows")
}

// An optimistic store (TiDB) reports a write conflict at COMMIT, having rolled the transaction back:
// the transaction runs again and commits once. A COMMIT that fails otherwise has an unknown outcome.
func TestCommitConflictRetried(t *testing.T) {
	t.Parallel()
	dsn := testenv.NewDB(t)
	if !dsn.MySQL {
		t.Skip("the conflicts are MySQL-protocol errors")
	}
	for _, c := range []struct {
		name      string
		number    uint16
		retried   bool
		committed int64
	}{
		{"TiDB write conflict", 9007, true, 1},
		{"deadlock at commit", 1213, true, 1},
		{"lost connection", 2013, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, failing := failCommits(t, dsn.DSN, c.number)
			gdb, err := models.MySQLGorm(conn)
			require.NoError(t, err)
			s := New(gdb, nil)
			name := testenv.Unique("venue-")
			failing.Store(1)
			runs := 0
			err = s.tx(context.Background(), "create venue", func(tx *gorm.DB) error {
				runs++
				return tx.Create(&models.Venue{Name: name, Timezone: "UTC"}).Error
			})
			if c.retried {
				require.NoError(t, err)
				require.Equal(t, 2, runs)
			} else {
				require.ErrorIs(t, err, ErrCommitUnknown)
				require.ErrorIs(t, err, booking.ErrStorageUnavailable, "a retryable 503 where the caller cannot resolve it")
				require.Equal(t, 1, runs)
			}
			var n int64
			require.NoError(t, dsn.Gorm.Model(&models.Venue{}).Where("name = ?", name).Count(&n).Error)
			require.Equal(t, c.committed, n)
		})
	}
}

// failCommits opens a pool on dsn whose next failing.Load() COMMITs roll the transaction back and
// report MySQL error number instead, as a server that refused the commit would.
func failCommits(t *testing.T, dsn string, number uint16) (*sql.DB, *atomic.Int32) {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.InterpolateParams = true
	inner, err := mysqldriver.NewConnector(cfg)
	require.NoError(t, err)
	failing := &atomic.Int32{}
	db := sql.OpenDB(&conflictConnector{Connector: inner, failing: failing, number: number})
	t.Cleanup(func() { _ = db.Close() })
	return db, failing
}

type conflictConnector struct {
	driver.Connector
	failing *atomic.Int32
	number  uint16
}

func (c *conflictConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conflictConn{Conn: conn, c: c}, nil
}

// conflictConn passes everything to the driver's connection but its transactions' COMMIT.
type conflictConn struct {
	driver.Conn
	c *conflictConnector
}

func (cc *conflictConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := cc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &conflictTx{Tx: tx, c: cc.c}, nil
}

func (cc *conflictConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return cc.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (cc *conflictConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return cc.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (cc *conflictConn) CheckNamedValue(v *driver.NamedValue) error {
	return cc.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (cc *conflictConn) ResetSession(ctx context.Context) error {
	return cc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

type conflictTx struct {
	driver.Tx
	c *conflictConnector
}

func (t *conflictTx) Commit() error {
	if t.c.failing.Add(-1) >= 0 {
		if err := t.Tx.Rollback(); err != nil {
			return err
		}
		return &mysqldriver.MySQLError{Number: t.c.number, Message: "injected at commit"}
	}
	return t.Tx.Commit()
}
