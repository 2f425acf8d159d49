package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
)

// TestEndToEndCourtStory builds the binary, starts it on a free port against the test backends
// (MariaDB + Redis under scripts/test.sh, embedded otherwise) and drives the seeds' court story over
// HTTP: a paid booking nobody checks in is RELEASED right after release_at — never before — and the
// court is bookable again; a booking checked in by staff stays ARRIVED.
func TestEndToEndCourtStory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := binary(t)

	env := append(os.Environ(), "SLOTWHEEL_SQLITE_PATH="+filepath.Join(dir, "sw.db"),
		"SLOTWHEEL_JWT_SECRET="+e2eJWT, "SLOTWHEEL_PAYMENT_SECRET="+e2ePay, "SLOTWHEEL_DEV_LOGIN=true",
		"SLOTWHEEL_DEMO=false", "SLOTWHEEL_DASHBOARD_PASSWORD=e2e-dashboard-0123456789abcdef0123")
	if testenv.RealServers() {
		db := testenv.NewDB(t)
		r := testenv.NewRedis(t)
		// The binary's queue is "release"; a private Redis database keeps it apart from other runs.
		env = append(env, "SLOTWHEEL_MYSQL_DSN="+db.DSN, "SLOTWHEEL_REDIS_URL="+privateDB(t, r.URL), "SLOTWHEEL_REDIS_PREFIX="+r.Prefix)
	}
	addr := freeAddr(t)
	env = append(env, "SLOTWHEEL_HTTP_ADDR="+addr)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "all")
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				cancel()
			}
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	c := &client{t: t, base: "http://" + addr}
	c.waitReady()

	admin := c.token("ops", "admin", "")
	venue := c.do("POST", "/api/v1/admin/venues", admin, map[string]any{"name": "E2E Courts", "timezone": "Asia/Shanghai"}, 201)
	res := c.do("POST", "/api/v1/admin/resources", admin, map[string]any{"venue_id": venue["venue_id"], "name": "Court",
		"kind": "court", "capacity": 1, "category": "e2e", "price_cents": 500}, 201)
	c.do("PUT", "/api/v1/admin/resources/"+res["resource_id"].(string)+"/schedule", admin, map[string]any{"slot_minutes": 1,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}, "horizon_days": 2}, 200)
	c.do("PUT", "/api/v1/admin/policies/grace", admin, map[string]any{"category": "e2e", "grace_seconds": 3}, 200)

	alice := c.token("alice", "user", "")
	bob := c.token("bob", "user", "")
	// The slot in progress (or the next, near a minute's end): paid, nobody turns up → released at
	// max(start, confirmed_at) + 3 s.
	start := time.Now().In(mustLoc(t)).Truncate(time.Minute)
	if time.Until(start.Add(time.Minute)) < 20*time.Second {
		start = start.Add(time.Minute)
	}
	hold := c.do("POST", "/api/v1/holds", alice, map[string]any{"resource_id": res["resource_id"],
		"start": start.Format(time.RFC3339), "end": start.Add(time.Minute).Format(time.RFC3339)}, 201)
	paid := c.pay(hold["hold_id"].(string), int64(hold["amount_cents"].(float64)), "pay-1")
	require.Equal(t, "booked", paid["outcome"])
	again := c.pay(hold["hold_id"].(string), int64(hold["amount_cents"].(float64)), "pay-1")
	require.Equal(t, paid["booking"], again["booking"], "a repeated notification is answered as the first")
	booking := paid["booking"].(map[string]any)
	id := booking["booking_id"].(string)
	releaseAt, err := time.Parse(time.RFC3339, booking["release_at"].(string))
	require.NoError(t, err)
	confirmedAt, err := time.Parse(time.RFC3339Nano, booking["confirmed_at"].(string))
	require.NoError(t, err)
	want := start
	if confirmedAt.After(start) {
		want = confirmedAt
	}
	require.WithinDuration(t, want.Add(3*time.Second), releaseAt, time.Second, "release_at = max(start, confirmed_at) + grace")
	c.do("POST", "/api/v1/holds", bob, map[string]any{"resource_id": res["resource_id"],
		"start": start.Format(time.RFC3339), "end": start.Add(time.Minute).Format(time.RFC3339)}, 409)

	// Poll the booking until it is released (bounded), as the mini-program would.
	deadline := time.Now().Add(time.Until(releaseAt) + 10*time.Second)
	var got map[string]any
	for time.Now().Before(deadline) {
		got = c.do("GET", "/api/v1/bookings/"+id, alice, nil, 200)
		if got["status"] == "RELEASED" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, "RELEASED", got["status"])
	releasedAt, err := time.Parse(time.RFC3339Nano, got["released_at"].(string))
	require.NoError(t, err)
	require.False(t, releasedAt.Before(releaseAt), "released at %s, before release_at %s", releasedAt, releaseAt)
	require.Less(t, releasedAt.Sub(releaseAt), 3*time.Second, "released promptly")
	// Bookable again by another user.
	c.do("POST", "/api/v1/holds", bob, map[string]any{"resource_id": res["resource_id"],
		"start": start.Format(time.RFC3339), "end": start.Add(time.Minute).Format(time.RFC3339)}, 201)

	// A second court's booking, checked in by staff, is not released at its release_at.
	res2 := c.do("POST", "/api/v1/admin/resources", admin, map[string]any{"venue_id": venue["venue_id"], "name": "Court 2",
		"kind": "court", "capacity": 1, "category": "e2e", "price_cents": 500}, 201)
	c.do("PUT", "/api/v1/admin/resources/"+res2["resource_id"].(string)+"/schedule", admin, map[string]any{"slot_minutes": 1,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}, "horizon_days": 2}, 200)
	next := time.Now().In(mustLoc(t)).Truncate(time.Minute)
	if time.Until(next.Add(time.Minute)) < 15*time.Second {
		next = next.Add(time.Minute)
	}
	h2 := c.do("POST", "/api/v1/holds", alice, map[string]any{"resource_id": res2["resource_id"],
		"start": next.Format(time.RFC3339), "end": next.Add(time.Minute).Format(time.RFC3339)}, 201)
	p2 := c.pay(h2["hold_id"].(string), int64(h2["amount_cents"].(float64)), "pay-2")
	b2 := p2["booking"].(map[string]any)
	staff := c.token("desk", "staff", venue["venue_id"].(string))
	arrived := c.do("POST", "/api/v1/checkins", staff, map[string]any{"checkin_code": b2["checkin_code"]}, 200)
	require.Equal(t, "ARRIVED", arrived["status"])
	r2, _ := time.Parse(time.RFC3339, b2["release_at"].(string))
	time.Sleep(time.Until(r2) + 1500*time.Millisecond)
	got = c.do("GET", "/api/v1/bookings/"+b2["booking_id"].(string), alice, nil, 200)
	// Checked in, so never released: ARRIVED, or IN_PROGRESS since its slot has started
	// (docs/DESIGN.md).
	require.Contains(t, []any{"ARRIVED", "IN_PROGRESS"}, got["status"])

	// SIGTERM drains HTTP and stops the worker; the process exits cleanly and promptly.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		stopped = true
		require.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(20 * time.Second):
		t.Fatal("slotwheel did not exit within 20 s of SIGTERM")
	}
	require.Contains(t, logs.String(), "shutting down")
}

// Secrets of the binary under test: long enough for a deployment with real backends.
const (
	e2eJWT = "e2e-jwt-0123456789abcdef0123456789abcdef"
	e2ePay = "e2e-pay-0123456789abcdef0123456789abcdef"
)

func mustLoc(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return loc
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// binary builds the slotwheel binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "slotwheel-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "slotwheel")
		build := exec.Command("go", "build", "-o", builtBin, ".")
		build.Stderr = os.Stderr
		buildErr = build.Run()
	})
	require.NoError(t, buildErr)
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// A backend that accepts connections but never answers must not hang the start: the binary gives
// up after its start timeout naming the setting, and a SIGTERM ends it at once at any moment.
func TestStartGivesUpOnSilentBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := binary(t)
	silent := testenv.SilentServer(t)
	common := []string{"SLOTWHEEL_JWT_SECRET=" + e2eJWT, "SLOTWHEEL_PAYMENT_SECRET=" + e2ePay,
		"SLOTWHEEL_HTTP_ADDR=" + freeAddr(t), "SLOTWHEEL_SQLITE_PATH=" + filepath.Join(t.TempDir(), "sw.db")}
	start := func(extra ...string) (*exec.Cmd, *bytes.Buffer, chan error) {
		cmd := exec.Command(bin, "all")
		cmd.Env = append(append(os.Environ(), common...), extra...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &out, done
	}
	for _, c := range []struct {
		setting string
		env     []string
	}{
		{"SLOTWHEEL_MYSQL_DSN", []string{"SLOTWHEEL_MYSQL_DSN=root@tcp(" + silent + ")/test?parseTime=true"}},
		{"SLOTWHEEL_REDIS_URL", []string{"SLOTWHEEL_REDIS_URL=redis://" + silent + "/0"}},
	} {
		began := time.Now()
		_, out, done := start(append(c.env, "SLOTWHEEL_START_TIMEOUT=2s")...)
		select {
		case err := <-done:
			require.Error(t, err, "a silent backend is a failed start")
			require.Contains(t, out.String(), c.setting+": ", "the message names the setting")
			require.Less(t, time.Since(began), 15*time.Second)
		case <-time.After(30 * time.Second):
			t.Fatalf("still starting after 30 s against a silent %s:\n%s", c.setting, out)
		}

		cmd, out, done := start(append(c.env, "SLOTWHEEL_START_TIMEOUT=1m")...)
		// The silent server holds the start; a second into it, ask the process to stop.
		time.Sleep(time.Second)
		stopAt := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-done:
			require.Less(t, time.Since(stopAt), 5*time.Second, "SIGTERM ends the start within 5 s")
		case <-time.After(10 * time.Second):
			t.Fatalf("SIGTERM did not stop a start stuck on a silent %s:\n%s", c.setting, out)
		}
	}
}

// privateDB moves a redis:// URL to a database number of its own (2–15) for this run: the binary's
// Asynq queues ignore the key prefix, so two instances on one database would take each other's
// tasks. Numbers are handed out in turn, so that tests running together never share one.
func privateDB(t *testing.T, url string) string {
	t.Helper()
	n := 2 + (int64(os.Getpid())+nextDB.Add(1))%14
	u := url
	if i := bytes.LastIndexByte([]byte(u), '/'); i > len("redis://") {
		u = u[:i]
	}
	return u + "/" + strconv.FormatInt(n, 10)
}

var nextDB atomic.Int64

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

type client struct {
	t    *testing.T
	base string
}

func (c *client) waitReady() {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(c.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatal("slotwheel did not become ready")
}

func (c *client) token(user, role, venue string) string {
	body := map[string]any{"user_id": user, "role": role}
	if venue != "" {
		body["venue_id"] = venue
	}
	return c.do("POST", "/api/v1/auth/dev-login", "", body, 200)["token"].(string)
}

func (c *client) do(method, path, token string, body any, want int) map[string]any {
	c.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.send(req, want)
}

func (c *client) send(req *http.Request, want int) map[string]any {
	c.t.Helper()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: %v", req.Method, req.URL.Path, out)
	return out
}

func (c *client) pay(holdID string, amount int64, paymentID string) map[string]any {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"hold_id": holdID, "payment_id": paymentID, "amount_cents": amount,
		"paid_at": time.Now().UTC().Format(time.RFC3339)})
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(e2ePay))
	mac.Write([]byte(ts + "." + string(body)))
	req, _ := http.NewRequest("POST", c.base+"/api/v1/payments/notify", bytes.NewReader(body))
	req.Header.Set("X-Slotwheel-Signature", fmt.Sprintf("t=%s,v1=%s", ts, hex.EncodeToString(mac.Sum(nil))))
	return c.send(req, 200)
}

// TestBenchCommand runs `slotwheel bench` briefly and checks it reports both paths for both cases.
func TestBenchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load for a second")
	}
	t.Setenv("SLOTWHEEL_REDIS_URL", os.Getenv(testenv.EnvRedis))
	t.Setenv("SLOTWHEEL_SQLITE_PATH", filepath.Join(t.TempDir(), "unused.db"))
	var out bytes.Buffer
	err := run(context.Background(), []string{"bench", "--duration", "200ms", "--workers", "4", "--resources", "20"}, &out, slogDiscard())
	require.NoError(t, err)
	require.Regexp(t, `(?m)^hot slot\s+\d+\s+\d+\s+\d+%$`, out.String())
	require.Regexp(t, `(?m)^20 resources\s+\d+\s+\d+\s+\d+%$`, out.String())
	err = run(context.Background(), []string{"bench", "--duration", "0s"}, &out, slogDiscard())
	require.ErrorContains(t, err, "--duration")
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReadmeWalkthrough replays README.md's curl walk-through, as written, against a fresh embedded
// binary: a booking of the demo desk is paid with a signed notification, released because nobody
// checks in, restored and checked in, and webhook-echo prints each of its events once, verified.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the walk-through, which waits a minute for a release")
	}
	if testenv.RealServers() {
		t.Skip("the walk-through is of embedded mode (go run .); the embedded pass runs it")
	}
	for _, tool := range []string{"bash", "curl", "jq", "openssl"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the walk-through needs %s", tool)
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	script := walkthrough(t, string(readme))

	dir := t.TempDir()
	addr, echo := freeAddr(t), freeAddr(t)
	env := append(os.Environ(), "SLOTWHEEL_HTTP_ADDR="+addr, "SLOTWHEEL_SQLITE_PATH="+filepath.Join(dir, "data", "slotwheel.db"),
		"ECHO="+echo)
	for _, k := range []string{"SLOTWHEEL_MYSQL_DSN", "SLOTWHEEL_REDIS_URL", "SLOTWHEEL_JWT_SECRET", "SLOTWHEEL_PAYMENT_SECRET"} {
		env = append(env, k+"=")
	}
	srv := exec.Command(binary(t), "all")
	srv.Env = env
	var logs bytes.Buffer
	srv.Stdout, srv.Stderr = &logs, &logs
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	(&client{t: t, base: "http://" + addr}).waitReady()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	sh.Env = env
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "the walk-through failed:\n%s", out)
	text := string(out)
	for _, typ := range []string{"booking.confirmed", "booking.released", "booking.restored", "booking.checked_in"} {
		lines := regexpCount(`(?m)^evt_\d+ `+typ+` \{`, text)
		require.Equal(t, 1, lines, "webhook-echo printed %s once:\n%s", typ, text)
	}
	require.NotContains(t, text, "refused", "every signature verified")
	require.NotContains(t, text, "delivered again")
	require.Contains(t, text, `"ARRIVED"`)
}

// walkthrough is the first sh block of README.md's walk-through section.
func walkthrough(t *testing.T, readme string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "## Try it: a booking's life over curl")
	require.True(t, ok, "README.md has no walk-through section")
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return block
}

func regexpCount(pattern, text string) int {
	return len(regexp.MustCompile(pattern).FindAllString(text, -1))
}

// instance is a slotwheel process a test started with startInstance.
type instance struct {
	cmd    *exec.Cmd
	logs   *bytes.Buffer
	exited chan error
	done   bool
}

// backends is the environment that points an instance at the test's own backends: a private MySQL
// database and Redis keyspace under scripts/test.sh, an SQLite file (and the in-process Redis)
// otherwise. Instances started with the same backends share them.
func backends(t *testing.T) []string {
	t.Helper()
	if !testenv.RealServers() {
		return []string{"SLOTWHEEL_SQLITE_PATH=" + filepath.Join(t.TempDir(), "sw.db")}
	}
	db := testenv.NewDB(t)
	r := testenv.NewRedis(t)
	return []string{"SLOTWHEEL_MYSQL_DSN=" + db.DSN, "SLOTWHEEL_REDIS_URL=" + privateDB(t, r.URL), "SLOTWHEEL_REDIS_PREFIX=" + r.Prefix}
}

// startInstance starts `slotwheel <mode>` with the e2e secrets and env (which names its backends,
// see backends); it is stopped with SIGTERM when the test ends, and its output is logged when the
// test failed.
func startInstance(t *testing.T, mode string, env ...string) *instance {
	t.Helper()
	cmd := exec.Command(binary(t), mode)
	cmd.Env = append(append(os.Environ(), "SLOTWHEEL_JWT_SECRET="+e2eJWT, "SLOTWHEEL_PAYMENT_SECRET="+e2ePay,
		"SLOTWHEEL_DEMO=false", "SLOTWHEEL_DASHBOARD_PASSWORD=e2e-dashboard-0123456789abcdef0123"), env...)
	in := &instance{cmd: cmd, logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = in.logs, in.logs
	require.NoError(t, cmd.Start())
	go func() { in.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		in.stop(t, syscall.SIGTERM)
		if t.Failed() {
			t.Log(in.logs.String())
		}
	})
	return in
}

// stop sends sig and waits for the process to end (20 s at most); it answers how long that took
// and the exit error. Stopping a stopped instance does nothing.
func (in *instance) stop(t *testing.T, sig syscall.Signal) (time.Duration, error) {
	t.Helper()
	if in.done {
		return 0, nil
	}
	began := time.Now()
	_ = in.cmd.Process.Signal(sig)
	select {
	case err := <-in.exited:
		in.done = true
		return time.Since(began), err
	case <-time.After(20 * time.Second):
		_ = in.cmd.Process.Kill()
		in.done = true
		return time.Since(began), errors.New("did not exit within 20 s")
	}
}

// A worker-only instance has no API listener, yet the releases and deliveries it carries out can be
// scraped: it serves /metrics on SLOTWHEEL_METRICS_ADDR.
func TestWorkerServesMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	addr := freeAddr(t)
	startInstance(t, "worker", append(backends(t), "SLOTWHEEL_METRICS_ADDR="+addr)...)
	waitUntil(t, 60*time.Second, "the worker's /metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `slotwheel_loop_runs_total{loop="release_due",outcome="ok"}`)
	})
}
