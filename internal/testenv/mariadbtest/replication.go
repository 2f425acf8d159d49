package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// replicationTimeout bounds a wait for a replica: to start replicating, to catch up.
const replicationTimeout = time.Minute

// StartPair starts a primary with a binary log and a replica of it, each a private server of its
// own (port, data directory, process group), and returns once the replica replicates. Both are
// killed when the test ends. The replica has a binary log too, so that it can be promoted.
func StartPair(t testing.TB) (primary, replica *Server) {
	t.Helper()
	// Semi-synchronous, as README's production section asks: a commit is acknowledged once the
	// replica has received it, so a promotion loses no booking a user was told is confirmed.
	primary = StartWith(t, Options{ServerID: 1, Args: []string{"--rpl-semi-sync-master-enabled"}})
	replica = StartWith(t, Options{ServerID: 2, Args: []string{"--read-only=ON", "--rpl-semi-sync-slave-enabled"}})
	replica.ReplicateFrom(primary)
	return primary, replica
}

// Exec runs statements on the server as root, failing the test on an error.
func (s *Server) Exec(stmts ...string) {
	s.t.Helper()
	db := s.open("")
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), replicationTimeout)
	defer cancel()
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			s.t.Fatalf("mariadbtest: on %s: %s: %v", s.Addr(), q, err)
		}
	}
}

// QueryInt answers a query of one integer (NULL as -1), failing the test on an error.
func (s *Server) QueryInt(q string, args ...any) int64 {
	s.t.Helper()
	db := s.open("")
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), replicationTimeout)
	defer cancel()
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
		s.t.Fatalf("mariadbtest: on %s: %s: %v", s.Addr(), q, err)
	}
	if !v.Valid {
		return -1
	}
	return v.Int64
}

// Status answers a global status counter (SHOW GLOBAL STATUS), such as Com_select.
func (s *Server) Status(name string) int64 {
	s.t.Helper()
	return s.QueryInt("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name)
}

// ReplicateFrom makes s a replica of primary from the start of primary's binary log (GTID), and
// waits until both its threads run.
func (s *Server) ReplicateFrom(primary *Server) {
	s.t.Helper()
	s.Exec("STOP SLAVE", "RESET SLAVE ALL",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', "+
			"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", primary.port),
		"START SLAVE")
	s.waitFor("replication to start", func(st map[string]string) bool {
		return st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes"
	})
}

// CaughtUp waits until s has applied everything primary has written so far.
func (s *Server) CaughtUp(primary *Server) {
	s.t.Helper()
	db := primary.open("")
	var pos string
	err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos)
	_ = db.Close()
	if err != nil {
		s.t.Fatalf("mariadbtest: gtid_binlog_pos of %s: %v", primary.Addr(), err)
	}
	if got := s.QueryInt("SELECT MASTER_GTID_WAIT(?, ?)", pos, replicationTimeout.Seconds()); got != 0 {
		s.t.Fatalf("mariadbtest: %s did not reach %s of %s within %v", s.Addr(), pos, primary.Addr(), replicationTimeout)
	}
}

// PauseApplying stops the replica's SQL thread: it goes on receiving the primary's writes and
// applies none, falling behind by the second. ResumeApplying starts it again.
func (s *Server) PauseApplying() { s.t.Helper(); s.Exec("STOP SLAVE SQL_THREAD") }

// ResumeApplying starts the SQL thread PauseApplying stopped.
func (s *Server) ResumeApplying() { s.t.Helper(); s.Exec("START SLAVE SQL_THREAD") }

// StopForSwitchover shuts a primary down cleanly once every replica has received all it wrote
// (SHUTDOWN WAIT FOR ALL SLAVES), as a switchover does, and waits for it to exit.
func (s *Server) StopForSwitchover() {
	s.t.Helper()
	p := s.current()
	if p == nil {
		return
	}
	db := s.open("")
	_, err := db.Exec("SHUTDOWN WAIT FOR ALL SLAVES")
	_ = db.Close()
	if err != nil && !p.Wait(stopTimeout) {
		s.t.Fatalf("mariadbtest: SHUTDOWN on %s: %v", s.Addr(), err)
	}
	if !p.Wait(stopTimeout) {
		s.t.Fatalf("mariadbtest: the server on %s did not shut down within %v", s.Addr(), stopTimeout)
	}
}

// Drain waits until a replica whose primary is gone has applied everything it received.
func (s *Server) Drain() {
	s.t.Helper()
	s.waitFor("relay log applied", func(st map[string]string) bool {
		return st["Master_Log_File"] == st["Relay_Master_Log_File"] && st["Read_Master_Log_Pos"] == st["Exec_Master_Log_Pos"]
	})
}

// Promote makes a replica a primary: replication stopped and forgotten, writes allowed.
func (s *Server) Promote() {
	s.t.Helper()
	s.Exec("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
}

// waitFor polls SHOW SLAVE STATUS until ok says yes: a server says nothing when its replication
// changes state.
func (s *Server) waitFor(what string, ok func(st map[string]string) bool) {
	s.t.Helper()
	deadline := time.Now().Add(replicationTimeout)
	var last map[string]string
	for time.Now().Before(deadline) {
		last = s.slaveStatus()
		if ok(last) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("mariadbtest: %s: no %s within %v; slave status: IO %q SQL %q, last errors %q / %q", s.Addr(), what,
		replicationTimeout, last["Slave_IO_Running"], last["Slave_SQL_Running"], last["Last_IO_Error"], last["Last_SQL_Error"])
}

func (s *Server) slaveStatus() map[string]string {
	s.t.Helper()
	db := s.open("")
	defer func() { _ = db.Close() }()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		s.t.Fatalf("mariadbtest: SHOW SLAVE STATUS on %s: %v", s.Addr(), err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	out := map[string]string{}
	if !rows.Next() {
		return out
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}
