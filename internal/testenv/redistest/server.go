// Package redistest owns private Redis servers for tests that must do to Redis what must never be
// done to the shared server on 6379: a single redis-server to kill with SIGKILL and restart empty
// (StartServer), a primary and its replica whose replication can be paused so that a promotion
// loses acknowledged writes (StartReplicated), three real sentinels watching such a pair
// (StartSentinel), and a 3-master, 3-replica Redis Cluster to fail over, gracefully or by killing a
// master and taking its slots over, by a replica paused meanwhile if need be (StartCluster, through
// scripts/cluster.sh). Every server has its
// own ports and directory and is stopped when the test ends, or soon after the test binary dies if
// it dies first. It is imported by tests only.
package redistest

import (
	"context"
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

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/internal/testenv/proc"
)

const (
	envRequire = "SLOTWHEEL_TEST_REQUIRE_SERVERS"

	readyTimeout = 30 * time.Second
	killTimeout  = 30 * time.Second
)

// Server is one private redis-server without persistence. Kill and Restart report failures through
// the test and must be called from the test's goroutine.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	// args are the arguments of redis-server on port with its files in dir; nil: serverArgs.
	args func(port int, dir string) ([]string, error)

	proc proc.Slot // the server process of the last start
}

// StartServer starts a redis-server on a free loopback port and returns once it answers. It is
// killed when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return startServer(t, nil)
}

// startServer starts redis-server with args on a free loopback port (args nil: serverArgs).
func startServer(t testing.TB, args func(port int, dir string) ([]string, error)) *Server {
	t.Helper()
	bin := lookRedis(t, "redis-server")
	s := &Server{t: t, bin: bin, dir: t.TempDir(), args: args}
	t.Cleanup(s.cleanup) // before the start, so that a failure or panic in it still kills the server
	// The port is free when picked but may be taken before the server binds it: then pick another.
	for attempt := 1; ; attempt++ {
		s.port = proc.FreePort(t)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("redistest: %v", err)
		}
	}
}

// lookRedis finds a Redis binary, or skips the test (fails it under
// SLOTWHEEL_TEST_REQUIRE_SERVERS=1).
func lookRedis(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("%s=1 but Redis is not installed: %v", envRequire, err)
		}
		t.Skipf("Redis is not installed: %v", err)
	}
	return path
}

// Addr is the server's "127.0.0.1:port"; it stays the same across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Running reports whether the server process is alive.
func (s *Server) Running() bool { return s.current() != nil }

// Kill kills the server with SIGKILL and waits for it to be gone.
func (s *Server) Kill() {
	s.t.Helper()
	if p := s.current(); p != nil {
		p.Signal(syscall.SIGKILL)
		if !p.Wait(killTimeout) {
			s.t.Errorf("redistest: the server on %s did not die within %v of SIGKILL", s.Addr(), killTimeout)
		}
	}
}

// signal sends sig to the server, if it runs.
func (s *Server) signal(sig syscall.Signal) {
	if p := s.current(); p != nil {
		p.Signal(sig)
	}
}

// Restart kills the server if it runs and starts a new, empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func (s *Server) current() *proc.Process { return s.proc.Current() }

func (s *Server) cleanup() { s.proc.Kill(killTimeout) }

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *Server) start() error {
	log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the child has its own copy
	logStart := proc.FileSize(s.logPath())
	args := serverArgs(s.port, s.dir)
	if s.args != nil {
		if args, err = s.args(s.port, s.dir); err != nil {
			return err
		}
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.proc.Set(p)
	if err := waitPing(s.Addr(), p); err != nil {
		p.Signal(syscall.SIGKILL)
		p.Wait(killTimeout)
		return fmt.Errorf("server on %s: %w\nlog:\n%s", s.Addr(), err, proc.Tail(proc.ReadFrom(s.logPath(), logStart), 20))
	}
	return nil
}

// serverArgs run a server on loopback port without persistence, its files in dir, then extra.
func serverArgs(port int, dir string, extra ...string) []string {
	return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no"}, extra...)
}

// waitPing polls addr until it answers PING; a server says nothing when it is ready.
func waitPing(addr string, p *proc.Process) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %v", readyTimeout, err)
		}
		if p.Wait(20 * time.Millisecond) {
			return errors.New("exited while starting")
		}
	}
}
