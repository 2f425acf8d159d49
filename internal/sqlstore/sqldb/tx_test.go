package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"sync/atomic"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// Two transactions that lock the same rows in opposite orders deadlock on a real server; the one
// the server rolls back (error 1213) runs again, and both changes are made, once each.
func TestTransactionRetriedAfterDeadlock(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	if !db.MySQL {
		t.Skip("a deadlock needs InnoDB's row locks")
	}
	d := New(db.Gorm)
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
	go func() { errs <- d.Tx(ctx, "ab", lockBoth(a.ID, b.ID, "ab")) }()
	go func() { errs <- d.Tx(ctx, "ba", lockBoth(b.ID, a.ID, "ba")) }()
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
			d := New(gdb)
			name := testenv.Unique("venue-")
			failing.Store(1)
			runs := 0
			err = d.Tx(context.Background(), "create venue", func(tx *gorm.DB) error {
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
