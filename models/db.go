package models

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Pool sizes one instance's connections to MySQL, so that instances × pool stays under the server's
// max_connections.
type Pool struct {
	MaxOpen int // default 32
	MaxIdle int // default 8
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		// The engine's store maps gorm.ErrDuplicatedKey and friends; the dialects translate their own
		// error numbers into them, so no caller reads driver messages.
		TranslateError: true,
		// The caller pings with a timeout of its own: gorm's automatic ping has none, and a server
		// that accepts connections but never answers would hang the start.
		DisableAutomaticPing: true,
		NowFunc:              func() time.Time { return time.Now().UTC() },
	}
}

// OpenMySQL connects to a MySQL-compatible server. It asks the server its version at once, without
// a timeout of its own (GORM does): callers that must not hang on a silent server open the pool with
// MySQLPool, wait for it to answer, then call MySQLGorm.
// engine/ runs its transactions at READ COMMITTED (per transaction, which works on MySQL and MariaDB
// alike): under REPEATABLE READ the loaders' range scans would take gap locks that block inserts of
// new bookings.
func OpenMySQL(dsn string, pool Pool) (*gorm.DB, error) {
	conn, err := MySQLPool(dsn, pool)
	if err != nil {
		return nil, err
	}
	return MySQLGorm(conn)
}

// MySQLPool opens a pool of connections to dsn, sized by pool; it does no I/O. Statement parameters
// are interpolated by the driver (interpolateParams): a server-side prepared statement costs three
// round trips (prepare, execute, close) where one does, and every hot path here (release batches,
// deliveries, confirms) is a chain of short statements. The driver escapes for the connection's
// character set and the server's NO_BACKSLASH_ESCAPES mode, and falls back to preparing when it
// cannot.
func MySQLPool(dsn string, pool Pool) (*sql.DB, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	cfg.InterpolateParams = true
	connector, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	conn := sql.OpenDB(connector)
	if pool.MaxOpen <= 0 {
		pool.MaxOpen = 32
	}
	if pool.MaxIdle <= 0 {
		pool.MaxIdle = 8
	}
	conn.SetMaxOpenConns(pool.MaxOpen)
	conn.SetMaxIdleConns(min(pool.MaxIdle, pool.MaxOpen))
	conn.SetConnMaxLifetime(30 * time.Minute)
	conn.SetConnMaxIdleTime(5 * time.Minute)
	return conn, nil
}

// MySQLGorm puts GORM on an open pool (reading the server's version).
func MySQLGorm(conn *sql.DB) (*gorm.DB, error) {
	db, err := gorm.Open(mysql.New(mysql.Config{Conn: conn}), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return db, nil
}

// OpenSQLite opens (creating it and its folder) the embedded SQLite file. WAL lets readers run beside
// the one writer; transactions begin IMMEDIATE, so a writer waits (busy timeout) for the write lock at
// BEGIN instead of failing with SQLITE_BUSY when a read transaction would have to upgrade.
func OpenSQLite(path string) (*gorm.DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create sqlite folder: %w", err)
		}
	}
	dsn := path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(4)
	return db, nil
}

// Ping checks that the database answers within ctx.
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// migrateLock names the advisory lock `slotwheel migrate` holds on MySQL, so that two migrations
// started together run one after the other instead of racing on the same ALTERs.
const migrateLock = "slotwheel_migrate"

// Migrate creates or upgrades every table. It is idempotent; on MySQL it holds an advisory lock for
// its duration (waiting at most until ctx ends), so instances started together migrate once each,
// in turn, and all but the first find nothing to do.
func Migrate(ctx context.Context, db *gorm.DB) error {
	db = db.WithContext(ctx)
	if db.Dialector.Name() == "mysql" {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer conn.Close()
		wait := 60
		if d, ok := ctx.Deadline(); ok {
			wait = max(int(time.Until(d).Seconds()), 1)
		}
		var got int
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", migrateLock, wait).Scan(&got); err != nil {
			return fmt.Errorf("migrate: take lock: %w", err)
		}
		if got != 1 {
			return fmt.Errorf("migrate: another migration held the lock for %d s", wait)
		}
		defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", migrateLock) }()
		db = db.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	if err := db.AutoMigrate(All()...); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Rows from before due_at existed (and any a fault left without it) get it back: an undecided
	// CONFIRMED booking must be in the overdue sweep's index.
	if err := db.Model(&Booking{}).Where("status = ? AND due_at IS NULL AND release_held_at IS NULL", "CONFIRMED").
		Update("due_at", gorm.Expr("release_at")).Error; err != nil {
		return fmt.Errorf("migrate: due_at: %w", err)
	}
	return nil
}
