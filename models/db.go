package models

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// Pool sizes one instance's connections to MySQL, so that instances × pool stays under the server's
// max_connections.
type Pool struct {
	MaxOpen int // default 32
	MaxIdle int // default 8
}

// Defaults of Pool: three instances at the default fit MariaDB's and MySQL's default max_connections
// of 151 with room for the tools and administrators beside them.
const (
	DefaultMaxOpen = 32
	DefaultMaxIdle = 8
)

// ReleaseConns is the size of the release path's own pool, beside Pool (see backend.ReleasePool):
// one connection per release transaction the release loop may have open at once (three), and one
// for its reads between them (the next release_at, a venue's rules).
const ReleaseConns = 4

// WithDefaults fills the fields left zero with the defaults.
func (p Pool) WithDefaults() Pool {
	if p.MaxOpen <= 0 {
		p.MaxOpen = DefaultMaxOpen
	}
	if p.MaxIdle <= 0 {
		p.MaxIdle = DefaultMaxIdle
	}
	return p
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
// Every connection runs its transactions at READ COMMITTED: under REPEATABLE READ the loaders' range
// scans would take gap locks that block inserts of new bookings.
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
// cannot. Every connection runs its transactions at READ COMMITTED (see OpenMySQL), set once when
// it opens rather than before each transaction, which would cost each a round trip.
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
	conn := sql.OpenDB(readCommitted{connector})
	pool = pool.WithDefaults()
	conn.SetMaxOpenConns(pool.MaxOpen)
	conn.SetMaxIdleConns(min(pool.MaxIdle, pool.MaxOpen))
	conn.SetConnMaxLifetime(30 * time.Minute)
	conn.SetConnMaxIdleTime(5 * time.Minute)
	return conn, nil
}

// readCommitted sets READ COMMITTED on each new connection for its whole session. The statement is
// portable: MySQL 8 and MariaDB name the variable differently (transaction_isolation, tx_isolation),
// so a DSN parameter could not set it on both.
type readCommitted struct{ driver.Connector }

func (c readCommitted) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("open mysql: the driver's connection cannot execute statements")
	}
	if _, err := ex.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("open mysql: set READ COMMITTED: %w", err)
	}
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

// ReadGorm puts a GORM of its own on conn, a pool the main handle also uses, for a plugin that must
// not change the main handle's callbacks (the read replicas' resolver). It does not ask the server's
// version: that only shapes DDL and RETURNING, which a read handle never sends, and a start must not
// wait on it.
func ReadGorm(conn *sql.DB) (*gorm.DB, error) {
	db, err := gorm.Open(mysql.New(mysql.Config{Conn: conn, SkipInitializeWithVersion: true}), gormConfig())
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

// migrateLock prefixes the advisory lock a migration holds on MySQL (followed by the database's
// name, as GET_LOCK names are server-wide — cluster-wide on TiDB — and cut to the 64 characters
// they may have), so that migrations started together run one after the other instead of racing on
// the same ALTERs.
const migrateLock = "slotwheel_migrate."

// SchemaMark is the one row (ID 1) that says which schema the last migration left: instances that
// start together with SLOTWHEEL_AUTO_MIGRATE take the migration lock in turn, and all but the first
// find the mark current and change nothing.
type SchemaMark struct {
	ID          uint8     `gorm:"primaryKey;autoIncrement:false"`
	Fingerprint string    `gorm:"size:64;not null"`
	MigratedAt  time.Time `gorm:"precision:3;not null"`
}

// TableName keeps the mark's table name readable.
func (SchemaMark) TableName() string { return "schema_mark" }

// Migrate creates or upgrades every table; see MigrateOnce.
func Migrate(ctx context.Context, db *gorm.DB) error {
	_, err := MigrateOnce(ctx, db)
	return err
}

// MigrateOnce creates or upgrades every table, unless the schema mark says the tables already are
// as the models describe them (Fingerprint), and reports whether it changed the schema. On MySQL it
// holds an advisory lock for its duration (waiting at most until ctx ends), so of many instances
// started together one migrates and the others, taking the lock after it, find the mark current.
func MigrateOnce(ctx context.Context, db *gorm.DB) (migrated bool, err error) {
	db = db.WithContext(ctx)
	if db.Dialector.Name() == "mysql" {
		sqlDB, err := db.DB()
		if err != nil {
			return false, err
		}
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return false, fmt.Errorf("migrate: %w", err)
		}
		defer conn.Close()
		wait := 60
		if d, ok := ctx.Deadline(); ok {
			wait = max(int(time.Until(d).Seconds()), 1)
		}
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(LEFT(CONCAT(?, DATABASE()), 64), ?)", migrateLock, wait).Scan(&got); err != nil {
			return false, fmt.Errorf("migrate: take lock: %w", err)
		}
		if got.Int64 != 1 {
			return false, fmt.Errorf("migrate: another migration held the lock for %d s", wait)
		}
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(LEFT(CONCAT(?, DATABASE()), 64))", migrateLock)
		}()
		// Set returns a handle whose chains would share one statement; a new session does not.
		db = db.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin").Session(&gorm.Session{})
	}
	fp := Fingerprint()
	current, err := markCurrent(db, fp)
	if err != nil {
		return false, err
	}
	if !current {
		if err := db.AutoMigrate(append(All(), &SchemaMark{})...); err != nil {
			return false, fmt.Errorf("migrate: %w", err)
		}
	}
	// Rows from before due_at existed (and any a fault left without it) get it back: an undecided
	// CONFIRMED booking must be in the overdue sweep's index. It is a repair of data, not of the
	// schema, so it runs whether or not the schema changed.
	if err := db.Model(&Booking{}).Where("status = ? AND due_at IS NULL AND release_held_at IS NULL", "CONFIRMED").
		Update("due_at", gorm.Expr("release_at")).Error; err != nil {
		return false, fmt.Errorf("migrate: due_at: %w", err)
	}
	if db.Dialector.Name() == "sqlite" {
		// SQLite compares times as text: inventory written in a venue's zone (as it was before the
		// capacity ledger, which looks slots up by their UTC start) is rewritten in UTC. Its date
		// functions read the stored offset and answer UTC.
		utc := func(col string) any {
			return gorm.Expr(`strftime('%Y-%m-%d %H:%M:%S', "` + col + `") || '+00:00'`)
		}
		if err := db.Model(&SlotInventory{}).Where("start NOT LIKE ?", "%+00:00").
			Updates(map[string]any{"start": utc("start"), "end": utc("end")}).Error; err != nil {
			return false, fmt.Errorf("migrate: inventory in UTC: %w", err)
		}
	}
	if current {
		return false, nil
	}
	mark := SchemaMark{ID: 1, Fingerprint: fp, MigratedAt: time.Now().UTC()}
	if err := db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&mark).Error; err != nil {
		return false, fmt.Errorf("migrate: schema mark: %w", err)
	}
	return true, nil
}

// markCurrent reports whether the schema mark names fp.
func markCurrent(db *gorm.DB, fp string) (bool, error) {
	if !db.Migrator().HasTable(&SchemaMark{}) {
		return false, nil
	}
	var mark SchemaMark
	err := db.Where("id = ?", 1).Limit(1).Find(&mark).Error
	if err != nil {
		return false, fmt.Errorf("migrate: read schema mark: %w", err)
	}
	return mark.Fingerprint == fp, nil
}

// Fingerprint names the schema the models describe: a hash of every table's Go type, with each
// field's name, type and tags. Any change to a model (a column, an index, a size) changes it, and
// the next migration runs AutoMigrate again.
func Fingerprint() string {
	h := sha256.New()
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			fmt.Fprintf(h, "%s %s %q\n", f.Name, f.Type, f.Tag)
		}
	}
	for _, m := range append(All(), &SchemaMark{}) {
		t := reflect.TypeOf(m).Elem()
		name := t.Name()
		if tn, ok := m.(interface{ TableName() string }); ok {
			name = tn.TableName()
		}
		fmt.Fprintf(h, "table %s\n", name)
		walk(t)
	}
	return hex.EncodeToString(h.Sum(nil))
}
