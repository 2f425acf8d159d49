package models

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// OpenMySQL connects to a MySQL-compatible server. engine/ runs its transactions at READ COMMITTED
// (per transaction, which works on MySQL and MariaDB alike): under REPEATABLE READ the loaders' range
// scans would take gap locks that block inserts of new bookings.
func OpenMySQL(dsn string) (*gorm.DB, error) {
	db, err := gorm.Open(mysql.New(mysql.Config{DSN: dsn}), &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(64)
	sqlDB.SetMaxIdleConns(64)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
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
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
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

// Migrate creates or upgrades every table. It is idempotent and safe to run at every start.
func Migrate(db *gorm.DB) error {
	if db.Dialector.Name() == "mysql" {
		db = db.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	if err := db.AutoMigrate(All()...); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
