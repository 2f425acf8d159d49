package faultproxy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

const (
	envMySQL   = "SLOTWHEEL_TEST_MYSQL_DSN"
	envRequire = "SLOTWHEEL_TEST_REQUIRE_SERVERS"
	defaultDSN = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
)

// echoServer accepts connections and echoes what it reads; it counts the connections it accepted.
func echoServer(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back within d.
func roundTrip(c net.Conn, msg string, d time.Duration) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	return readExactly(c, msg, d)
}

func readExactly(c net.Conn, msg string, d time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echoed " + string(buf))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitConns polls until the proxy counts n connections: the proxy registers an accepted
// connection in its own goroutine, after the client's dial returned.
func waitConns(t *testing.T, p *Proxy, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Conns() == n }, 2*time.Second, 5*time.Millisecond)
}

func TestForwardsCutsAndRefuses(t *testing.T) {
	addr, _ := echoServer(t)
	p := New(t, addr)

	c := dial(t, p.Addr())
	require.NoError(t, roundTrip(c, "hello", time.Second))
	require.Equal(t, 1, p.Conns())

	p.CutAll()
	require.Equal(t, 0, p.Conns())
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a cut connection reads EOF")

	p.Refuse(true)
	c = dial(t, p.Addr()) // the accept succeeds; the proxy closes at once
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, isTimeout(err), "refused connections are closed, not held: %v", err)

	p.Refuse(false)
	require.NoError(t, roundTrip(dial(t, p.Addr()), "again", time.Second))
}

func TestBlackholeHoldsOldAndNewConnections(t *testing.T) {
	addr, accepted := echoServer(t)
	p := New(t, addr)

	old := dial(t, p.Addr())
	require.NoError(t, roundTrip(old, "a", time.Second))

	p.Blackhole(true)
	err := roundTrip(old, "b", 200*time.Millisecond)
	require.True(t, isTimeout(err), "an existing connection stalls: %v", err)

	fresh := dial(t, p.Addr())
	err = roundTrip(fresh, "c", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a new connection is accepted and never answered: %v", err)
	waitConns(t, p, 2)
	require.Equal(t, int32(1), accepted.Load(), "the held connection never reached the server")

	p.Blackhole(false)
	require.NoError(t, readExactly(old, "b", time.Second), "held bytes flow once the blackhole is off")
	require.NoError(t, readExactly(fresh, "c", time.Second))
}

func TestCloseEndsEverything(t *testing.T) {
	addr, _ := echoServer(t)
	p := New(t, addr)
	p.Blackhole(true)
	c := dial(t, p.Addr())
	waitConns(t, p, 1)
	p.Close() // returns only once every goroutine of the proxy is done
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err, "a closed proxy no longer listens")
}

// mariaDB returns the configuration of the MySQL server to test against: SLOTWHEEL_TEST_MYSQL_DSN,
// or the local MariaDB. It skips the test when the server cannot be reached, or fails it under
// SLOTWHEEL_TEST_REQUIRE_SERVERS=1.
func mariaDB(t *testing.T) *mysql.Config {
	t.Helper()
	dsn := os.Getenv(envMySQL)
	if dsn == "" {
		dsn = defaultDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err, envMySQL)
	cfg.ParseTime = true
	db := openDB(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("%s=1 but MySQL at %s cannot be reached: %v", envRequire, cfg.Addr, err)
		}
		t.Skipf("MySQL at %s cannot be reached: %v", cfg.Addr, err)
	}
	return cfg
}

func openDB(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// through returns a pool that connects to the server of cfg through p.
func through(t *testing.T, cfg *mysql.Config, p *Proxy) *sql.DB {
	t.Helper()
	pc := cfg.Clone()
	pc.Addr = p.Addr()
	return openDB(t, pc)
}

func TestSeverAfterCommitLosesOnlyTheAnswer(t *testing.T) {
	cfg := mariaDB(t)
	ctx := context.Background()
	direct := openDB(t, cfg)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "faultproxy_" + hex.EncodeToString(b)
	_, err := direct.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = direct.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })

	p := New(t, cfg.Addr)
	db := through(t, cfg, p)
	p.SeverAfterCommit(1)

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES (1)")
	require.NoError(t, err, "statements before the COMMIT pass")
	err = tx.Commit()
	require.ErrorIs(t, err, mysql.ErrInvalidConn, "the client never hears the COMMIT's answer")
	require.Equal(t, 1, p.Severed())

	var n int
	require.NoError(t, direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE id = 1").Scan(&n))
	require.Equal(t, 1, n, "yet the server committed the row")

	// n was 1: the next COMMIT goes through.
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES (2)")
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.Equal(t, 1, p.Severed())
}

func TestBlackholeTimesOutPing(t *testing.T) {
	cfg := mariaDB(t)
	p := New(t, cfg.Addr)
	db := through(t, cfg, p)
	p.Blackhole(true)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := db.PingContext(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second, "the ping gives up with its context")

	p.Blackhole(false)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, db.PingContext(ctx))
}

func TestCutAllBreaksOpenConnection(t *testing.T) {
	cfg := mariaDB(t)
	p := New(t, cfg.Addr)
	db := through(t, cfg, p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c, err := db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.PingContext(ctx))
	require.Equal(t, 1, p.Conns())

	p.CutAll()
	require.Error(t, c.PingContext(ctx), "the open connection is broken")

	p.Refuse(true)
	require.Error(t, db.PingContext(ctx), "no new connection gets through")
	p.Refuse(false)
	require.NoError(t, db.PingContext(ctx), "the pool reconnects")
}
