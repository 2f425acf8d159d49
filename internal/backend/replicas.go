package backend

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/replica"
	"github.com/slotwheel/slotwheel/models"
)

// Replicas configures the read replicas of the SQL store.
type Replicas struct {
	DSNs   []string
	MaxLag time.Duration // default replica.DefaultMaxLag
	Pool   models.Pool   // each replica's; default models.Pool's
	Log    *slog.Logger  // default slog.Default()
}

// OpenReplicas opens the read replicas of primary and starts watching them (engine.Options.Replicas);
// nil without DSNs. A replica that is down or behind at start is out of rotation, not an error: its
// reads go to the primary until it answers and catches up. Close the set before primary.
func OpenReplicas(ctx context.Context, primary *gorm.DB, o Replicas) (*replica.Set, error) {
	if len(o.DSNs) == 0 {
		return nil, nil
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	rs, err := replica.Open(primary, replica.Options{DSNs: o.DSNs, MaxLag: o.MaxLag, Pool: o.Pool, Log: o.Log})
	if err != nil {
		return nil, err
	}
	rs.Start(ctx)
	for _, st := range rs.Status() {
		if !st.InRotation {
			o.Log.Warn("read replica not in rotation at start; its reads go to the primary until it answers and catches up",
				"replica", st.Name, "up", st.Up, "lag", st.Lag)
		}
	}
	return rs, nil
}

// checkDurability warns of a primary that can lose a commit it acknowledged: with
// innodb_flush_log_at_trx_commit other than 1 a crash loses up to a second of commits, and with the
// binary log on and sync_binlog other than 1 a crash can leave commits out of the binary log, so that
// a replica promoted after it never had them. Either way a user told "confirmed" could find no
// booking. Servers that cannot say (TiDB) are not checked.
func checkDurability(ctx context.Context, conn *sql.DB, log *slog.Logger) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var flush, syncBinlog, logBin int
	if err := conn.QueryRowContext(qctx, "SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin").
		Scan(&flush, &syncBinlog, &logBin); err != nil {
		return
	}
	if flush != 1 {
		log.Warn("the MySQL primary runs with innodb_flush_log_at_trx_commit != 1: a crash or failover can lose bookings "+
			"users were told are confirmed; set it to 1 (see README, Production)", "innodb_flush_log_at_trx_commit", flush)
	}
	if logBin == 1 && syncBinlog != 1 {
		log.Warn("the MySQL primary writes its binary log with sync_binlog != 1: a crash can leave confirmed bookings out "+
			"of what replicas receive, and a replica promoted after it lacks them; set it to 1 (see README, Production)",
			"sync_binlog", syncBinlog)
	}
}
