// Package proc starts the server processes that test harnesses own (mariadbtest's MariaDB,
// redistest's Redis) so that a test can signal them and the kernel kills them if the test binary
// dies first, and finds them a free port and the tail of their logs. It imports no slotwheel
// package and is imported by test harnesses only.
package proc

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a server started in its own process group, so that a signal reaches it and anything
// it forks, and set to be killed by the kernel if the test binary dies first.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

// Start starts cmd as a Process.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child ends, not the process: hold this
		// goroutine on its thread until the child is gone, so the Go scheduler cannot retire the
		// thread and take the server down early.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Wait reports whether the process exited within d.
func (p *Process) Wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.exited:
		return true
	case <-timer.C:
		return false
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// FileSize is the size of the file at path, 0 if it cannot be read: where a log stands before a
// start, for ReadFrom.
func FileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ReadFrom returns the file's contents from offset on: what one start wrote to its log (all of it
// if the file was truncated since).
func ReadFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	return string(b[offset:])
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Slot holds the process a harness's server runs as now; a restart puts a new one in it.
type Slot struct {
	mu sync.Mutex
	p  *Process // of the last start; nil before the first
}

// Set makes p the server's process.
func (s *Slot) Set(p *Process) {
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
}

// Current is the server's process while it runs, or nil.
func (s *Slot) Current() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || !s.p.Running() {
		return nil
	}
	return s.p
}

// Kill kills the running process, if any, and waits up to timeout for it to be gone: the cleanup
// of a test, which must not leave a server behind however it ended.
func (s *Slot) Kill(timeout time.Duration) {
	if p := s.Current(); p != nil {
		p.Signal(syscall.SIGKILL)
		p.Wait(timeout)
	}
}
