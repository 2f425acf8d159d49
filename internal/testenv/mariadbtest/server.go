// Package mariadbtest owns private MariaDB servers for tests that must do to a database server what
// must never be done to the shared one: kill it with SIGKILL, stop it, restart it on the same data
// directory. Each server has its own port, data directory (under the test's TempDir) and process
// group, and is killed when the test ends, however it ends; the kernel kills it if the test binary
// dies first. It is imported by tests only.
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/slotwheel/slotwheel/internal/testenv/proc"
)

// Mariadbd is the server binary; without it the tests that need a private server skip.
const Mariadbd = "/usr/sbin/mariadbd"

const (
	envRequire = "SLOTWHEEL_TEST_REQUIRE_SERVERS"

	installTimeout = 2 * time.Minute
	// readyTimeout bounds a start, InnoDB crash recovery included; a start takes well under a
	// second on an idle machine, but the test binaries of a whole `go test ./...` compete for it.
	readyTimeout = time.Minute
	stopTimeout  = time.Minute
	killTimeout  = 30 * time.Second
	// maxSocketPath keeps the unix socket path under the kernel's 108-byte limit.
	maxSocketPath = 100
)

// Server is one private MariaDB server. Its methods other than DSN, Addr and Running report
// failures through the test and must be called from the test's goroutine.
type Server struct {
	t       testing.TB
	port    int
	dataDir string
	runDir  string // socket and pid file
	opts    Options

	proc proc.Slot // the server process of the last start
}

// Options shape a server beyond the defaults every server has.
type Options struct {
	// ServerID, when not 0, turns the binary log on (GTID-based, row format) with this server id,
	// so that the server can be a replication primary, or a replica that can be promoted.
	ServerID int
	// Args are more mariadbd options, after the others (so they win).
	Args []string
}

// Start creates a data directory, starts a server on a free loopback port with root and an empty
// password, creates the database "test" and returns once the server answers. The server is killed
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	if _, err := os.Stat(Mariadbd); err != nil {
		unavailable(t, "%s: %v", Mariadbd, err)
	}
	installDB, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		unavailable(t, "mariadb-install-db: %v", err)
	}

	base := t.TempDir()
	s := &Server{t: t, dataDir: filepath.Join(base, "data"), runDir: base, opts: o}
	if len(filepath.Join(base, "mysqld.sock")) > maxSocketPath {
		dir, err := os.MkdirTemp("", "mariadbtest-")
		if err != nil {
			t.Fatalf("mariadbtest: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		s.runDir = dir
	}
	// Registered before anything starts, so a failure or panic from here on still kills the server.
	t.Cleanup(s.cleanup)

	began := time.Now()
	s.install(installDB)
	installed := time.Now()

	// The port is free when picked but may be taken before the server binds it, by another test
	// binary doing the same: then pick another.
	for attempt := 1; ; attempt++ {
		s.port = proc.FreePort(t)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("mariadbtest: %v", err)
		}
	}
	ready := time.Now()

	db := s.open("")
	defer func() { _ = db.Close() }()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatalf("mariadbtest: create database test: %v", err)
	}
	t.Logf("mariadbtest: server on %s ready in %v (install %v, start %v)",
		s.Addr(), ready.Sub(began).Round(time.Millisecond),
		installed.Sub(began).Round(time.Millisecond), ready.Sub(installed).Round(time.Millisecond))
	return s
}

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s=1 but MariaDB is not installed: "+format, append([]any{envRequire}, args...)...)
	}
	t.Skipf("MariaDB is not installed: "+format, args...)
}

// Addr is the server's "127.0.0.1:port"; it stays the same across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN is a go-sql-driver DSN for root on database db ("" for none).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("root@tcp(%s)/%s?parseTime=true&loc=UTC", s.Addr(), db)
}

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	return s.current() != nil
}

// Start starts the server again on the same data directory and port, after Stop or Kill; after a
// Kill, InnoDB recovers from its redo log first. It returns once the server answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatalf("mariadbtest: Start: the server on %s is running", s.Addr())
	}
	began := time.Now()
	if err := s.start(); err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	s.t.Logf("mariadbtest: server on %s restarted in %v", s.Addr(), time.Since(began).Round(time.Millisecond))
}

// Stop shuts the server down cleanly (SIGTERM) and waits for it to exit.
func (s *Server) Stop() {
	s.t.Helper()
	p := s.current()
	if p == nil {
		return
	}
	p.Signal(syscall.SIGTERM)
	if !p.Wait(stopTimeout) {
		p.Signal(syscall.SIGKILL)
		p.Wait(killTimeout)
		s.t.Errorf("mariadbtest: the server on %s did not stop within %v; killed it", s.Addr(), stopTimeout)
	}
}

// Kill kills the server with SIGKILL, as kill -9 does, and waits for it to be gone. What it had
// committed survives: each commit is written to the redo log (innodb_flush_log_at_trx_commit=2
// writes it to the OS at commit and fsyncs once a second, which loses data only if the machine
// goes down, not the process).
func (s *Server) Kill() {
	s.t.Helper()
	p := s.current()
	if p == nil {
		return
	}
	p.Signal(syscall.SIGKILL)
	if !p.Wait(killTimeout) {
		s.t.Errorf("mariadbtest: the server on %s did not die within %v of SIGKILL", s.Addr(), killTimeout)
	}
}

// current is the running process, or nil.
func (s *Server) current() *proc.Process { return s.proc.Current() }

func (s *Server) cleanup() { s.proc.Kill(killTimeout) }

func (s *Server) errorLog() string { return filepath.Join(filepath.Dir(s.dataDir), "error.log") }

// serverOptions are given to both the bootstrap and the server, so that the files the bootstrap
// creates fit the server (the redo log size, for one).
func serverOptions(o Options) []string {
	binlog := []string{"--skip-log-bin"}
	if o.ServerID != 0 {
		binlog = []string{"--log-bin=mariadb-bin", "--server-id=" + strconv.Itoa(o.ServerID), "--binlog-format=ROW",
			"--log-slave-updates"}
	}
	opts := append([]string{
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=16M",
	}, binlog...)
	opts = append(opts,
		"--innodb-flush-log-at-trx-commit=2",
		"--max-connections=151",
		"--skip-name-resolve",
		// As the shared server is configured (Debian's defaults), not the compiled-in latin1.
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
	)
	if os.Geteuid() == 0 {
		opts = append(opts, "--user=root") // mariadbd refuses to run as root unless told to
	}
	return append(opts, o.Args...)
}

func (s *Server) install(installDB string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	args := append([]string{
		"--no-defaults",
		"--datadir=" + s.dataDir,
		"--auth-root-authentication-method=normal", // root with an empty password, over TCP too
		"--skip-test-db",
	}, serverOptions(Options{})...) // the bootstrap writes no binary log for a replica to replay
	cmd := exec.CommandContext(ctx, installDB, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("mariadbtest: mariadb-install-db: %v\n%s", err, proc.Tail(string(out), 30))
	}
}

// start starts mariadbd and waits until it answers over TCP; the error carries the tail of the
// server's error log.
func (s *Server) start() error {
	args := append([]string{
		"--no-defaults", // must come first
		"--datadir=" + s.dataDir,
		"--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.runDir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(s.runDir, "mysqld.pid"),
		"--log-error=" + s.errorLog(),
	}, serverOptions(s.opts)...)
	out, err := os.OpenFile(filepath.Join(filepath.Dir(s.dataDir), "mariadbd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }() // the child has its own copy
	cmd := exec.Command(Mariadbd, args...)
	cmd.Stdout, cmd.Stderr = out, out
	logStart := proc.FileSize(s.errorLog())
	p, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", Mariadbd, err)
	}
	s.proc.Set(p)

	if err := s.waitReady(p); err != nil {
		p.Signal(syscall.SIGKILL)
		p.Wait(killTimeout)
		return fmt.Errorf("server on %s: %w\nerror log:\n%s", s.Addr(), err, proc.Tail(proc.ReadFrom(s.errorLog(), logStart), 30))
	}
	return nil
}

func (s *Server) waitReady(p *proc.Process) error {
	connector, err := mysql.NewConnector(s.config(""))
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if !p.Running() {
			return errors.New("exited while starting")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %v", readyTimeout, err)
		}
		// Polling is the only signal there is: a server says nothing when it is ready.
		if p.Wait(50 * time.Millisecond) {
			return errors.New("exited while starting")
		}
	}
}

func (s *Server) config(db string) *mysql.Config {
	cfg, err := mysql.ParseDSN(s.DSN(db))
	if err != nil {
		panic(err) // DSN is well formed by construction
	}
	cfg.Timeout = time.Second
	// A server that is not up yet makes the driver log every refused dial otherwise.
	cfg.Logger = quietLogger{}
	return cfg
}

type quietLogger struct{}

func (quietLogger) Print(...any) {}

func (s *Server) open(db string) *sql.DB {
	connector, err := mysql.NewConnector(s.config(db))
	if err != nil {
		s.t.Fatalf("mariadbtest: %v", err)
	}
	return sql.OpenDB(connector)
}
