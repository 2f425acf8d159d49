package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// InstanceOptions configure one instance beyond the fleet's options.
type InstanceOptions struct {
	// MySQLDSN replaces the fleet's database for this instance: the same database through a
	// faultproxy (Via), say.
	MySQLDSN string
	// Env are settings for this instance only, after the fleet's.
	Env []string
	// Command is the binary's command; default "all".
	Command string
}

// Instance is one slotwheel process (and its restarts, on the same port and settings).
type Instance struct {
	Name string
	f    *Fleet
	addr string
	env  []string
	cmd  string
	logs *logBuffer

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{} // closed when proc exited
	exit error
}

// Launch starts a new instance and returns without waiting for it to be ready (WaitReady).
func (f *Fleet) Launch(o InstanceOptions) *Instance {
	f.t.Helper()
	addr, err := freeAddr()
	if err != nil {
		f.t.Fatalf("fleet: %v", err)
	}
	dsn := o.MySQLDSN
	if dsn == "" {
		dsn = f.opts.MySQLDSN
	}
	if o.Command == "" {
		o.Command = "all"
	}
	f.mu.Lock()
	in := &Instance{Name: fmt.Sprintf("instance-%d", len(f.instances)), f: f, addr: addr, cmd: o.Command, logs: &logBuffer{},
		env: f.env(dsn, []string{"SLOTWHEEL_HTTP_ADDR=" + addr}, o.Env)}
	f.instances = append(f.instances, in)
	f.mu.Unlock()
	if err := in.Start(); err != nil {
		f.t.Fatalf("fleet: %v", err)
	}
	return in
}

// Add starts a new instance and waits until it is ready.
func (f *Fleet) Add(o InstanceOptions) *Instance {
	f.t.Helper()
	in := f.Launch(o)
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.ReadyTimeout)
	defer cancel()
	if err := in.WaitReady(ctx); err != nil {
		f.t.Fatalf("fleet: %v", err)
	}
	return in
}

// Addr is the instance's "127.0.0.1:port"; it keeps it across restarts.
func (in *Instance) Addr() string { return in.addr }

// URL is the instance's base URL.
func (in *Instance) URL() string { return "http://" + in.addr }

// Client is a client of this instance.
func (in *Instance) Client() *Client { return &Client{f: in.f, in: in, base: in.URL()} }

// Start starts the process if it is not running. The process dies with the test binary.
func (in *Instance) Start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc != nil && !closed(in.done) {
		return nil
	}
	cmd := exec.Command(in.f.bin, in.cmd)
	cmd.Env = slices.Clip(in.env)
	w := in.logs.run()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", in.Name, err)
	}
	done := make(chan struct{})
	in.proc, in.done, in.exit = cmd, done, nil
	go func() {
		err := cmd.Wait()
		in.mu.Lock()
		in.exit = err
		in.mu.Unlock()
		close(done)
	}()
	return nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Running reports whether the process runs.
func (in *Instance) Running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.proc != nil && !closed(in.done)
}

// Exited is closed when the current process exits; ExitErr then says how.
func (in *Instance) Exited() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.done
}

// ExitErr is how the last process exited (nil: status 0).
func (in *Instance) ExitErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.exit
}

// WaitReady waits until /readyz answers 200, the process exits (an error with the end of its
// log), or ctx ends. There is no event to wait on: it polls.
func (in *Instance) WaitReady(ctx context.Context) error {
	done := in.Exited()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.URL()+"/readyz", nil)
		if resp, err := in.f.http.c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", in.Name, in.ExitErr(), in.logs.tail(40))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w:\n%s", in.Name, ctx.Err(), in.logs.tail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill kills the process with SIGKILL, as kill -9 does, and waits until it is gone.
func (in *Instance) Kill() error {
	in.mu.Lock()
	proc, done := in.proc, in.done
	in.mu.Unlock()
	if proc == nil || closed(done) {
		return nil
	}
	in.logs.note("--- fleet: kill -9 ---")
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", in.Name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s still runs 30 s after SIGKILL", in.Name)
	}
}

// Term sends SIGTERM and waits up to 20 s for the process to exit; the error is its exit status
// (nil for a clean exit) or the timeout, after which it is killed.
func (in *Instance) Term() error { return in.stop(20 * time.Second) }

func (in *Instance) stop(grace time.Duration) error {
	in.mu.Lock()
	proc, done := in.proc, in.done
	in.mu.Unlock()
	if proc == nil || closed(done) {
		return nil
	}
	in.logs.note("--- fleet: SIGTERM ---")
	_ = proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return in.ExitErr()
	case <-time.After(grace):
		_ = proc.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", in.Name, grace)
	}
}

// Restart stops the process if it runs (SIGTERM), starts it again with the same settings and port,
// and waits until it is ready.
func (in *Instance) Restart(ctx context.Context) error {
	if err := in.Term(); err != nil {
		return err
	}
	if err := in.Start(); err != nil {
		return err
	}
	return in.WaitReady(ctx)
}

// SetEnv adds settings ("SLOTWHEEL_HOLD_TTL=4s") that take effect at the instance's next start.
func (in *Instance) SetEnv(kv ...string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.env = append(slices.Clip(in.env), kv...)
}

// Logs is everything the instance printed, over all its runs.
func (in *Instance) Logs() string { return in.logs.String() }

// CountLines counts the lines of the log that contain s.
func (in *Instance) CountLines(s string) int {
	n := 0
	for line := range strings.Lines(in.logs.String()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// Metric reads one sample of the instance's /metrics: the value of the series name whose labels
// include every pair of labels; false when it has none.
func (in *Instance) Metric(ctx context.Context, name string, labels map[string]string) (float64, bool, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.URL()+"/metrics", nil)
	resp, err := in.f.http.c.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("%s /metrics: %s", in.Name, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(series, k+`="`+v+`"`) {
				match = false
				break
			}
		}
		if match {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return f, err == nil, err
		}
	}
	return 0, false, sc.Err()
}

// logBuffer keeps an instance's output across its runs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	n   int
}

// run marks the start of a run and returns the writer of its output.
func (b *logBuffer) run() io.Writer {
	b.mu.Lock()
	b.n++
	fmt.Fprintf(&b.buf, "--- fleet: run %d, %s ---\n", b.n, time.Now().UTC().Format(time.RFC3339Nano))
	b.mu.Unlock()
	return b
}

func (b *logBuffer) note(s string) {
	b.mu.Lock()
	fmt.Fprintf(&b.buf, "%s %s\n", s, time.Now().UTC().Format(time.RFC3339Nano))
	b.mu.Unlock()
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) lines() int { return strings.Count(b.String(), "\n") }

// tail is the last n lines, leaving out the access log of requests answered below 500: a race of
// thousands of requests would push everything else out.
func (b *logBuffer) tail(n int) string {
	var kept []string
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, `msg="http request"`) && !strings.Contains(line, " status=5") {
			continue
		}
		kept = append(kept, line)
	}
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return strings.Join(kept, "")
}

// SumMetric adds up one series of /metrics (see Metric) over the instances that run: a counter of
// the whole fleet, as long as none of them restarted since what it counts.
func (f *Fleet) SumMetric(ctx context.Context, name string, labels map[string]string) (float64, error) {
	var sum float64
	for _, in := range f.Instances() {
		if !in.Running() {
			continue
		}
		v, _, err := in.Metric(ctx, name, labels)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}
