package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestCommittedRowSurvivesKill(t *testing.T) {
	began := time.Now()
	s := Start(t)
	t.Logf("Start took %v", time.Since(began).Round(time.Millisecond))
	require.True(t, s.Running())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	db, err := sql.Open("mysql", s.DSN("test"))
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, "CREATE TABLE kept (id INT PRIMARY KEY, at DATETIME(6)) ENGINE=InnoDB")
	require.NoError(t, err)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	_, err = db.ExecContext(ctx, "INSERT INTO kept VALUES (1, ?)", at)
	require.NoError(t, err)

	s.Kill()
	require.False(t, s.Running())
	require.Error(t, db.PingContext(ctx), "a killed server does not answer")

	began = time.Now()
	s.Start() // InnoDB crash recovery
	t.Logf("restart after kill -9 took %v", time.Since(began).Round(time.Millisecond))
	require.True(t, s.Running())
	var got time.Time
	require.NoError(t, db.QueryRowContext(ctx, "SELECT at FROM kept WHERE id = 1").Scan(&got))
	require.True(t, at.Equal(got), "got %v", got)

	s.Stop()
	require.False(t, s.Running())
	s.Start() // after a clean shutdown too
	require.NoError(t, db.QueryRowContext(ctx, "SELECT at FROM kept WHERE id = 1").Scan(&got))
	s.Stop()
}

func TestCleanupKillsTheServer(t *testing.T) {
	var s *Server
	t.Run("leaves it running", func(t *testing.T) { s = Start(t) })
	require.False(t, s.Running())
	_, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	require.Error(t, err, "nothing listens on the port any more")
}

// A test binary that dies without running its cleanups (a -timeout panic, a crash, os.Exit) must
// not leave its server behind: run this test again in a child that starts a server and exits at
// once, then check the server went with it.
func TestServerDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("MARIADBTEST_CHILD") == "1" {
		s := Start(t)
		fmt.Printf("ADDR=%s\n", s.Addr())
		os.Exit(3)
	}
	if _, err := os.Stat(Mariadbd); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheTestBinary$")
	// The child cannot remove its temporary directories: have it make them in ours.
	cmd.Env = append(os.Environ(), "MARIADBTEST_CHILD=1", "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "output: %s", out)
	require.Equal(t, 3, exit.ExitCode(), "output: %s", out)
	_, addr, ok := strings.Cut(strings.TrimSpace(string(out)), "ADDR=")
	require.True(t, ok, "output: %s", out)
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the server on %s outlived its test binary", addr)
}

func TestPairReplicatesAndPromotes(t *testing.T) {
	primary, replica := StartPair(t)
	primary.Exec("CREATE TABLE test.kept (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO test.kept VALUES (1)")
	replica.CaughtUp(primary)
	require.EqualValues(t, 1, replica.QueryInt("SELECT COUNT(*) FROM test.kept"))

	replica.PauseApplying()
	primary.Exec("INSERT INTO test.kept VALUES (2)")
	require.EqualValues(t, 1, replica.QueryInt("SELECT COUNT(*) FROM test.kept"), "a paused replica applies nothing")
	replica.ResumeApplying()
	replica.CaughtUp(primary)
	require.EqualValues(t, 2, replica.QueryInt("SELECT COUNT(*) FROM test.kept"))

	primary.Stop()
	replica.Promote()
	replica.Exec("INSERT INTO test.kept VALUES (3)")
	require.EqualValues(t, 3, replica.QueryInt("SELECT COUNT(*) FROM test.kept"))
}
