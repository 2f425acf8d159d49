package rushbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// system is a design under test, serving: its child process, the slots it sells, and how to ask it
// what it sold.
type system struct {
	child     *child
	base      string   // http://host:port
	resources []string // resource ids, as the design names them
	grid      grid
	capacity  int
	targets   []target // by slot index: resource r's slot j is r*grid.slots + j
	// check reads the design's own account of what it sold (its counters or its tables).
	check func(ctx context.Context) (Check, error)
	// cleanup removes what the design left outside its database (slotwheel's keys).
	cleanup func(ctx context.Context) error
	note    string // a caveat about the measurement, for the report
	pprof   string // the server's pprof listener, when it is profiled
}

// profile CPU-profiles the server for d from now on into path, in the background; the answer
// tells when it is written. A server without a pprof listener, or d zero, profiles nothing.
func (s *system) profile(ctx context.Context, d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	if s.pprof == "" || d <= 0 {
		done <- nil
		return done
	}
	go func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.pprof, max(int(d.Seconds()), 1))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return done
}

// target is one slot as a hold request names it.
type target struct {
	start time.Time
	body  []byte // the hold request: {resource_id, start, end}
}

// offer sets the slots the system sells: every slot of the grid, of each of resources.
func (s *system) offer(resources []string) {
	s.resources = resources
	for _, r := range resources {
		for j := range s.grid.slots {
			start := s.grid.start(j)
			body, _ := json.Marshal(map[string]string{"resource_id": r, "start": start.Format(time.RFC3339),
				"end": start.Add(s.grid.length()).Format(time.RFC3339)})
			s.targets = append(s.targets, target{start: start, body: body})
		}
	}
}

// stop ends the child, then cleans up after it.
func (s *system) stop(ctx context.Context) error {
	err := s.child.stop()
	if s.cleanup != nil {
		err = errors.Join(err, s.cleanup(ctx))
	}
	return err
}

// browse is the warm-up: browsing users look at each resource's day (GET /api/v1/availability)
// before the sale opens, enough of them at once to open every pooled connection. The first look
// at each resource checks that every slot is offered with all its units.
func (s *system) browse(ctx context.Context, hc *http.Client, cfg Config) error {
	n := max(cfg.Conns, len(s.resources))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.look(ctx, hc, i%len(s.resources), i < len(s.resources)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first; the others are most likely the same
		}
	}
	return nil
}

func (s *system) look(ctx context.Context, hc *http.Client, r int, verify bool) error {
	var day struct {
		Slots []struct {
			Start     string `json:"start"`
			Available bool   `json:"available"`
			Remaining int    `json:"remaining"`
		} `json:"slots"`
	}
	url := s.base + "/api/v1/availability?resource_id=" + s.resources[r] + "&date=" + s.grid.date()
	if err := doJSON(ctx, hc, http.MethodGet, url, "", nil, &day); err != nil || !verify {
		return err
	}
	free := map[int64]int{}
	for _, sl := range day.Slots {
		if at, err := time.Parse(time.RFC3339, sl.Start); err == nil && sl.Available {
			free[at.Unix()] = sl.Remaining
		}
	}
	for j := range s.grid.slots {
		if t := s.targets[r*s.grid.slots+j]; free[t.start.Unix()] != s.capacity {
			return fmt.Errorf("resource %s: the slot at %s is not offered with its %d units before the gate", s.resources[r],
				t.start.Format(time.RFC3339), s.capacity)
		}
	}
	return nil
}

// calls are the hold requests of a wave's clients, picks[i] being client i's slot: each client a
// user of its own (users-i) with its own token and Idempotency-Key, signed before the gate.
func (s *system) calls(secret []byte, users string, picks []int) []call {
	exp := time.Now().Add(time.Hour)
	out := make([]call, len(picks))
	for i, k := range picks {
		out[i] = call{slot: k, body: s.targets[k].body, token: signToken(secret, fmt.Sprintf("%s-%d", users, i), "user", exp),
			key: randomName("", 32)}
	}
	return out
}

// signToken is a Bearer token with docs/API.md's claims (sub, role, exp), HS256, as the
// mini-program's log-in would hand out.
func signToken(secret []byte, user, role string, exp time.Time) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "role": role, "exp": exp.Unix()}).SignedString(secret)
	if err != nil {
		panic(err) // HS256 with a []byte key cannot fail
	}
	return tok
}

// grid is the sale's slots: on tomorrow's date in the venue's zone, from 08:00, an hour long — or
// half or quarter hours when that many would not end by midnight.
type grid struct {
	day     time.Time // midnight, venue-local
	minutes int       // of a slot
	slots   int       // of each resource
}

const (
	benchZone = "Asia/Shanghai"
	dayOpens  = 8 * time.Hour
	maxSlots  = 64 // quarter hours from 08:00 to 24:00
)

func newGrid(slots int, now time.Time) (grid, error) {
	loc, err := time.LoadLocation(benchZone)
	if err != nil {
		return grid{}, err
	}
	t := now.In(loc).AddDate(0, 0, 1)
	g := grid{day: time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc), minutes: 60, slots: slots}
	for g.minutes > 15 && slots*g.minutes > 16*60 {
		g.minutes /= 2
	}
	return g, nil
}

func (g grid) length() time.Duration { return time.Duration(g.minutes) * time.Minute }
func (g grid) start(j int) time.Time { return g.day.Add(dayOpens + time.Duration(j)*g.length()) }
func (g grid) date() string          { return g.day.Format(time.DateOnly) }
func (g grid) clock(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

// opens and closes are the day's hours as a schedule writes them ("08:00", "18:00"; "24:00").
func (g grid) opens() string  { return g.clock(dayOpens) }
func (g grid) closes() string { return g.clock(dayOpens + time.Duration(g.slots)*g.length()) }

// child is a server process of the bench: slotwheel's instance or the SQL design, logging to a file.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	done    chan struct{}
	err     error // of Wait, once done is closed
}

func startChild(name, bin string, args, env []string, logPath string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, log: f, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// waitReady polls url until it answers 200, the child exits, or a minute passes.
func (c *child) waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(time.Minute)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-c.done:
			return fmt.Errorf("%s exited before it was ready (%v); the end of %s:\n%s", c.name, c.err, c.logPath, c.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := doJSON(ctx, hc, http.MethodGet, url, "", nil, nil); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after a minute (%v); the end of %s:\n%s", c.name, err, c.logPath, c.tail())
		}
	}
}

// stop sends SIGTERM and waits for the exit, killing the child if it takes more than ten seconds.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	return c.log.Close()
}

// tail is the end of the child's log, for an error message.
func (c *child) tail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-2000):])
}

// freeAddr is a loopback address with a free port, for a child to listen on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// apiError is a non-2xx answer of a setup request.
type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// doJSON sends method url with body as JSON (nil: none) and a Bearer token (empty: none), and
// decodes a 2xx answer into out (nil: dropped); any other answer is an *apiError.
func doJSON(ctx context.Context, hc *http.Client, method, url, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &apiError{status: resp.StatusCode, body: string(raw)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode %q: %w", method, req.URL.Path, raw, err)
	}
	return nil
}
