package models_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// emptyMySQL creates an empty database on the test server (no schema, unlike testenv.NewDB),
// dropped when the test ends, and returns its DSN; it skips without a server.
func emptyMySQL(t *testing.T) string {
	t.Helper()
	dsn := testenvDSN(t)
	admin, err := models.OpenMySQL(dsn, models.Pool{MaxOpen: 2})
	require.NoError(t, err)
	name := testenv.Unique("swm_")
	require.NoError(t, admin.Exec("CREATE DATABASE "+name).Error)
	t.Cleanup(func() {
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name).Error
		closeDB(admin)
	})
	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.DBName = name
	return cfg.FormatDSN()
}

func testenvDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(testenv.EnvMySQL)
	if dsn == "" {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not set", testenv.EnvRequire, testenv.EnvMySQL)
		}
		t.Skip("needs a MySQL server (" + testenv.EnvMySQL + ")")
	}
	return dsn
}

func closeDB(db *gorm.DB) {
	if s, err := db.DB(); err == nil {
		_ = s.Close()
	}
}

// Instances started together with SLOTWHEEL_AUTO_MIGRATE each migrate on their own pool; one of them
// changes the schema, the others wait for its lock and find the schema current.
func TestMigrateOnceAmongInstancesStartingTogether(t *testing.T) {
	t.Parallel()
	dsn := emptyMySQL(t)
	const instances = 4
	dbs := make([]*gorm.DB, instances)
	for i := range dbs {
		db, err := models.OpenMySQL(dsn, models.Pool{MaxOpen: 4})
		require.NoError(t, err)
		t.Cleanup(func() { closeDB(db) })
		dbs[i] = db
	}
	migrated := make([]bool, instances)
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() { migrated[i], errs[i] = models.MigrateOnce(context.Background(), db) })
	}
	wg.Wait()
	n := 0
	for i := range instances {
		require.NoError(t, errs[i])
		if migrated[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "one instance migrates")
	for _, m := range models.All() {
		require.True(t, dbs[0].Migrator().HasTable(m), "%T", m)
	}
	var collation string
	require.NoError(t, dbs[0].Raw("SELECT table_collation FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'bookings'").
		Scan(&collation).Error)
	require.Equal(t, "utf8mb4_bin", collation, "ids and codes compare byte for byte")

	// A model that changed since (here: a mark left by an older schema) is migrated again, once.
	require.NoError(t, dbs[0].Model(&models.SchemaMark{}).Where("id = 1").Update("fingerprint", "older").Error)
	again, err := models.MigrateOnce(context.Background(), dbs[1])
	require.NoError(t, err)
	require.True(t, again)
	again, err = models.MigrateOnce(context.Background(), dbs[2])
	require.NoError(t, err)
	require.False(t, again)
}

func TestMigrateOnceOnSQLite(t *testing.T) {
	t.Parallel()
	db, err := models.OpenSQLite(filepath.Join(t.TempDir(), "sw.db"))
	require.NoError(t, err)
	t.Cleanup(func() { closeDB(db) })
	first, err := models.MigrateOnce(context.Background(), db)
	require.NoError(t, err)
	require.True(t, first)
	second, err := models.MigrateOnce(context.Background(), db)
	require.NoError(t, err)
	require.False(t, second, "a current schema is left alone")
}

// The fingerprint follows the models, so that a change to one is migrated.
func TestFingerprintIsStable(t *testing.T) {
	require.Equal(t, models.Fingerprint(), models.Fingerprint())
	require.Len(t, models.Fingerprint(), 64)
}

// Every connection of a pool runs its transactions at READ COMMITTED, whichever connection a
// transaction gets: the engine's loaders rely on it (no gap locks blocking new bookings).
func TestPoolRunsReadCommitted(t *testing.T) {
	t.Parallel()
	db, err := models.OpenMySQL(testenvDSN(t), models.Pool{MaxOpen: 3})
	require.NoError(t, err)
	t.Cleanup(func() { closeDB(db) })
	levels := make([]string, 6) // more transactions at once than the pool has connections
	errs := make([]error, len(levels))
	var wg sync.WaitGroup
	for i := range levels {
		wg.Go(func() {
			errs[i] = db.Transaction(func(tx *gorm.DB) error {
				// MariaDB names it tx_isolation; MySQL 8 only transaction_isolation.
				if err := tx.Raw("SELECT @@tx_isolation").Scan(&levels[i]).Error; err != nil {
					return tx.Raw("SELECT @@transaction_isolation").Scan(&levels[i]).Error
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i := range levels {
		require.NoError(t, errs[i])
		require.Equal(t, "READ-COMMITTED", levels[i])
	}
}
