package e2e

// The fault suite of issue 11: the real binary (`slotwheel all`), a private MariaDB that the suite
// starts on its own port and data directory, and private redis-servers, under traffic of holds,
// payments, check-ins and due releases, while faults strike:
//
//	kill -9            the only instance killed with SIGKILL at random moments, restarted at once
//	sever after COMMIT the instance reaches MariaDB through a faultproxy that cuts the connection
//	                   once the server has received a COMMIT, before its answer comes back
//	redis loss         Redis FLUSHALL under traffic, and Redis killed and restarted empty
//	two instances      two instances at once; the one running the release loop killed -9 and restarted
//	MariaDB down Ns    MariaDB stopped (SIGTERM) for N seconds, then started again
//
// Every scenario has its own database, Redis and instances, and courts whose slot is in progress
// with graces of a few seconds (an outage's court has one about half the outage), so bookings fall
// due for release before, during and just after each fault. Once the last fault has ended and the
// traffic stopped, fleet.Inspect checks from MySQL and Redis together: per slot, occupying bookings
// plus live holds within capacity in both; counters equal their owners; every due booking not
// checked in RELEASED exactly once, never before release_at and no later than 5 s after the end of
// the fault it was due in (or its release_at); every 2xx confirm has its row. "seconds to recover"
// is the longest, over a scenario's faults, from the fault's end until every instance is ready, a
// new hold can be confirmed, and no booking is overdue by more than a second. One table of all
// scenarios is logged at the end.
//
// Two modes:
//
//   - default (`go test ./...`, .ci/run): shortened to stay within a few minutes on two cores —
//     5 kills, 5 severed COMMITs, one FLUSHALL and one Redis restart, 2 kills of two instances, a
//     12 s MariaDB outage; no 5-minute outage.
//   - full, by hand: SLOTWHEEL_CHAOS=full — 20 kills, 20 severed COMMITs, 3 FLUSHALLs and 3 Redis
//     restarts, 6 kills of two instances, MariaDB stopped for 30 s and for 5 minutes (long enough for
//     release tasks to exhaust their retries and be archived). It takes about 15 minutes:
//
//     SLOTWHEEL_CHAOS=full SLOTWHEEL_TEST_REQUIRE_SERVERS=1 \
//     SLOTWHEEL_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC&multiStatements=true' \
//     SLOTWHEEL_TEST_REDIS_URL='redis://127.0.0.1:6379/0' \
//     go test ./e2e/ -run TestChaos -count=1 -v -timeout 60m
//
// SLOTWHEEL_CHAOS=off skips the suite. Like every test of this package it skips without a MySQL
// server (SLOTWHEEL_TEST_MYSQL_DSN) and fails without one under SLOTWHEEL_TEST_REQUIRE_SERVERS=1;
// it needs mariadbd and redis-server installed as well.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/mariadbtest"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// envChaos selects the suite's mode: empty for the shortened one, "full", or "off".
const envChaos = "SLOTWHEEL_CHAOS"

const (
	// chaosLateAfter is how long after a fault's end (or its release_at, if later) a due booking
	// may be released: issue 11's bound.
	chaosLateAfter = 5 * time.Second
	// chaosRecoverWithin bounds a scenario's recovery from each fault.
	chaosRecoverWithin = 60 * time.Second
	// chaosHoldTTL makes unpaid holds expire while a scenario runs.
	chaosHoldTTL = 3 * time.Second
)

// chaosPlan is how much of each fault a run does.
type chaosPlan struct {
	full        bool
	kills       int             // kill -9 of the only instance
	severs      int             // COMMITs severed
	redisFaults int             // FLUSHALLs, and as many Redis kills
	redisDown   time.Duration   // how long a killed Redis stays down
	pairKills   int             // kill -9 of one of two instances
	outages     []time.Duration // MariaDB stopped this long
}

func chaosPlanFromEnv(t *testing.T) chaosPlan {
	t.Helper()
	switch mode := os.Getenv(envChaos); mode {
	case "":
		return chaosPlan{kills: 5, severs: 5, redisFaults: 1, redisDown: 2 * time.Second, pairKills: 2,
			outages: []time.Duration{12 * time.Second}}
	case "full":
		return chaosPlan{full: true, kills: 20, severs: 20, redisFaults: 3, redisDown: 5 * time.Second, pairKills: 6,
			outages: []time.Duration{30 * time.Second, 5 * time.Minute}}
	case "off":
		t.Skipf("%s=off", envChaos)
	default:
		t.Fatalf("%s=%q: want empty (shortened), full or off", envChaos, mode)
	}
	return chaosPlan{}
}

// TestChaos runs the fault suite (see the comment at the top of this file) and logs its table.
func TestChaos(t *testing.T) {
	needServers(t)
	plan := chaosPlanFromEnv(t)
	began := time.Now()
	db := mariadbtest.Start(t)

	var mu sync.Mutex
	var rows []chaosRow
	record := func(r chaosRow) {
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	}
	// Logged however the scenarios end: the table is the suite's result.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		mode := "shortened"
		if plan.full {
			mode = "full"
		}
		t.Logf("chaos (%s, %v):\n%s", mode, time.Since(began).Round(time.Second), chaosTable(rows))
	})

	t.Run("kill -9", func(t *testing.T) { record(chaosKills(t, db, plan)) })
	t.Run("sever after COMMIT", func(t *testing.T) { record(chaosSevers(t, db, plan)) })
	t.Run("redis loss", func(t *testing.T) { record(chaosRedisLoss(t, db, plan)) })
	t.Run("two instances", func(t *testing.T) { record(chaosTwoInstances(t, db, plan)) })
	// Last: they stop the server every scenario's database is on.
	for _, d := range plan.outages {
		t.Run(fmt.Sprintf("MariaDB down %v", d), func(t *testing.T) { record(chaosOutage(t, db, d)) })
	}
}

// chaosKills: the only instance is killed with -9 at random moments and restarted at once.
func chaosKills(t *testing.T, db *mariadbtest.Server, plan chaosPlan) chaosRow {
	s := newChaosScenario(t, "kill -9", chaosFleet(t, db, fleet.Options{}), 2, 5)
	s.warmUp()
	in := s.f.Instance(0)
	for range plan.kills {
		s.pause(300*time.Millisecond, 2500*time.Millisecond)
		start := time.Now()
		require.NoError(t, in.Kill())
		require.NoError(t, in.Start())
		// The fault ends with the restart: the start-up is part of the recovery.
		end := time.Now()
		s.awaitReady(in)
		s.faultEnded(start, end)
	}
	return s.finish()
}

// chaosSevers: the instance reaches MariaDB through a faultproxy, which cuts the connection of one
// COMMIT at a time once the server has received it: the transaction committed (a confirm, a
// release, an event), and the instance cannot know it did.
func chaosSevers(t *testing.T, db *mariadbtest.Server, plan chaosPlan) chaosRow {
	f := chaosFleet(t, db, fleet.Options{Instances: -1})
	proxy := faultproxy.New(t, db.Addr())
	f.Add(fleet.InstanceOptions{MySQLDSN: fleet.Via(f.DSN(), proxy.Addr())})
	s := newChaosScenario(t, "sever after COMMIT", f, 2, 5)
	s.warmUp()
	for range plan.severs {
		s.pause(300*time.Millisecond, 2000*time.Millisecond)
		before := proxy.Severed()
		proxy.SeverAfterCommit(1)
		s.poll(30*time.Second, func() (bool, string) {
			return proxy.Severed() > before, "no COMMIT reached the proxy"
		})
		at := time.Now()
		s.faultEnded(at, at)
	}
	row := s.finish()
	// What the severed COMMITs were, as the instance saw them.
	in := f.Instance(0)
	t.Logf("%s: %d COMMITs severed; the instance logged %d lines about the broken connection, the last ones:\n%s",
		s.name, proxy.Severed(), in.CountLines("invalid connection"), lastLines(in.Logs(), "invalid connection", 10))
	return row
}

// chaosRedisLoss: Redis loses everything under traffic, by FLUSHALL and by a kill and an empty
// restart.
func chaosRedisLoss(t *testing.T, db *mariadbtest.Server, plan chaosPlan) chaosRow {
	rs := redistest.StartServer(t)
	s := newChaosScenario(t, "redis loss", chaosFleet(t, db, fleet.Options{Redis: fleet.Redis{URL: rs.URL()}}), 2, 5)
	s.warmUp()
	for range plan.redisFaults {
		s.pause(500*time.Millisecond, 2500*time.Millisecond)
		at := time.Now()
		require.NoError(t, s.f.Redis().FlushAll(context.Background()).Err())
		s.faultEnded(at, at)

		s.pause(500*time.Millisecond, 2500*time.Millisecond)
		start := time.Now()
		rs.Kill()
		s.hold(plan.redisDown)
		rs.Restart()
		s.faultEnded(start, time.Now())
	}
	return s.finish()
}

// chaosTwoInstances: two instances share the traffic and the background work; the one that runs
// the release loop is killed with -9 and restarted, and the other must go on releasing on time.
func chaosTwoInstances(t *testing.T, db *mariadbtest.Server, plan chaosPlan) chaosRow {
	s := newChaosScenario(t, "two instances", chaosFleet(t, db, fleet.Options{Instances: 2}), 2, 5)
	s.warmUp()
	for i := range plan.pairKills {
		s.pause(300*time.Millisecond, 2000*time.Millisecond)
		victim, err := s.f.LeaseHolder(context.Background(), "release_due", 300*time.Millisecond)
		if err != nil {
			victim = s.f.Instance(i % 2)
			t.Logf("no single release loop holder (%v): killing %s", err, victim.Name)
		}
		at := time.Now()
		require.NoError(t, victim.Kill())
		require.NoError(t, victim.Start())
		restarted := time.Now()
		s.awaitReady(victim)
		// The survivor releases on its own: the fault ends, for the bookings, when it struck; for
		// recovery, when the victim is restarted.
		s.faultWindow(at, at, restarted)
	}
	return s.finish()
}

// chaosOutage: MariaDB is stopped for d under traffic and started again. One court's grace is about
// half the outage, so its bookings made before the stop fall due while MariaDB is away (after
// 5 minutes their release tasks have exhausted their retries and are archived).
func chaosOutage(t *testing.T, db *mariadbtest.Server, d time.Duration) chaosRow {
	s := newChaosScenario(t, fmt.Sprintf("MariaDB down %v", d), chaosFleet(t, db, fleet.Options{}), 2, 5, int(d.Seconds()/2))
	s.warmUp()
	start := time.Now()
	db.Stop()
	s.hold(d)
	archived := archivedTasks(s.f) // Redis only: the dashboard answers while MariaDB is down
	db.Start()
	s.faultEnded(start, time.Now())
	row := s.finish()
	t.Logf("%s: archived tasks when MariaDB came back: %s; at the end: %s", s.name, archived, archivedTasks(s.f))
	return row
}

// chaosFleet starts the scenario's instances (opts.Instances of them; -1: none) on a database of
// their own on db.
func chaosFleet(t *testing.T, db *mariadbtest.Server, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	opts.MySQLDSN = fleet.NewDatabase(t, db.DSN(""))
	opts.Env = append(opts.Env, "SLOTWHEEL_HOLD_TTL="+chaosHoldTTL.String())
	if opts.Instances < 0 {
		return fleet.New(t, opts)
	}
	return fleet.Start(t, opts)
}

// chaosScenario is one scenario's fleet, courts, traffic and faults.
type chaosScenario struct {
	t      *testing.T
	name   string
	f      *fleet.Fleet
	courts []fleet.Court
	probe  fleet.Court // where recovery is probed: room for every probe, default grace
	tr     *chaosTraffic
	faults []chaosFault
}

// chaosFault is a fault's window: bookings due in it may be released up to chaosLateAfter after
// end; recovery is measured from recovered on.
type chaosFault struct {
	start, end time.Time
	recovered  time.Duration
}

// newChaosScenario creates a court for each grace (seconds) and a probe court, and starts the
// traffic.
func newChaosScenario(t *testing.T, name string, f *fleet.Fleet, graces ...int) *chaosScenario {
	t.Helper()
	s := &chaosScenario{t: t, name: name, f: f}
	specs := []fleet.CourtSpec{{Capacity: 100_000, MinLeft: 20 * time.Minute}}
	for _, g := range graces {
		specs = append(specs, fleet.CourtSpec{Capacity: 150, GraceSeconds: g, MinLeft: 20 * time.Minute})
	}
	courts := make([]fleet.Court, len(specs))
	errs := make([]error, len(specs))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { courts[i], errs[i] = f.Client(0).NewCourt(ctx, spec) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	s.probe, s.courts = courts[0], courts[1:]
	s.tr = startChaosTraffic(f, s.courts, 4)
	t.Cleanup(func() { s.tr.stop() }) // however the scenario ends
	return s
}

// warmUp lets the traffic run long enough for bookings to fall due before the first fault.
func (s *chaosScenario) warmUp() { s.hold(3 * time.Second) }

// hold lets d pass: traffic and faults last this long by design, there is nothing to wait for.
func (s *chaosScenario) hold(d time.Duration) { time.Sleep(d) }

// pause waits a random time in [lo, hi): the next fault strikes at a random moment.
func (s *chaosScenario) pause(lo, hi time.Duration) { s.hold(lo + rand.N(hi-lo)) }

func (s *chaosScenario) awaitReady(in *fleet.Instance) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(s.t, in.WaitReady(ctx))
}

// faultEnded records a fault from start to end and measures the recovery from its end.
func (s *chaosScenario) faultEnded(start, end time.Time) { s.faultWindow(start, end, end) }

// faultWindow records a fault whose bookings are due by end, and measures the recovery from from.
func (s *chaosScenario) faultWindow(start, end, from time.Time) {
	s.t.Helper()
	s.faults = append(s.faults, chaosFault{start: start, end: end, recovered: s.awaitRecovery(from)})
}

// awaitRecovery polls until every instance is ready, a hold on the probe court can be confirmed,
// and no booking is overdue by more than a second, and returns how long after from that was.
func (s *chaosScenario) awaitRecovery(from time.Time) time.Duration {
	s.t.Helper()
	user := s.f.Token(testenv.Unique("probe"), "user", "")
	var last string
	s.poll(chaosRecoverWithin, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, in := range s.f.Instances() {
			if err := in.Client().Do(ctx, http.MethodGet, "/readyz", "", nil, nil); err != nil {
				last = fmt.Sprintf("%s not ready: %v", in.Name, err)
				return false, last
			}
			h, err := in.Client().Hold(ctx, user, s.probe.Resource.ID, s.probe.Start, s.probe.End, 1)
			if err == nil {
				_, err = in.Client().Confirm(ctx, user, h.HoldID)
			}
			if err != nil {
				last = fmt.Sprintf("a hold through %s not confirmed: %v", in.Name, err)
				return false, last
			}
		}
		var overdue int
		if err := s.f.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM bookings WHERE status = 'CONFIRMED'
			AND checked_in_at IS NULL AND release_at < ?`, time.Now().Add(-time.Second)).Scan(&overdue); err != nil {
			last = fmt.Sprintf("overdue bookings: %v", err)
			return false, last
		}
		if overdue > 0 {
			last = fmt.Sprintf("%d bookings overdue", overdue)
			return false, last
		}
		return true, ""
	})
	return time.Since(from)
}

// poll calls done every 100 ms until it reports true, and fails the scenario when within passed.
// What it waits for is another process' work, which announces nothing.
func (s *chaosScenario) poll(within time.Duration, done func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, what := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: after %v: %s", s.name, within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finish lets the traffic run on for a moment after the last fault (bookings due just after it),
// stops it, waits until every booking due is released and the audit passes (or a minute went by),
// and returns the scenario's row, having failed the test on any violation.
func (s *chaosScenario) finish() chaosRow {
	t := s.t
	t.Helper()
	s.hold(3 * time.Second)
	tr := s.tr.stop()
	t.Logf("%s: traffic: %s", s.name, tr)
	require.Positive(t, tr.booked, "the traffic made bookings")

	var rep *fleet.Report
	deadline := time.Now().Add(chaosRecoverWithin)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := s.f.Inspect(ctx)
		cancel()
		if err == nil {
			rep = r
			if r.Err() == nil && len(pendingReleases(r)) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			if rep == nil {
				t.Fatalf("%s: audit: %v", s.name, err)
			}
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	row := chaosRow{scenario: s.name, faults: len(s.faults), bookings: rep.Bookings, released: rep.Released,
		twice: rep.ReleasedTwice, early: rep.Early, oversold: rep.OversoldSlots, leaked: rep.LeakedUnits,
		lost: rep.LostConfirms, internal: tr.internal}
	var late []string
	inFaults := 0
	for _, b := range rep.Releases {
		if b.CheckedIn || (b.Released.IsZero() && (b.Status != "CONFIRMED" || !b.ReleaseAt.Before(rep.At.Add(-time.Second)))) {
			continue
		}
		row.due++
		if !effectiveDue(b, s.faults).Equal(b.ReleaseAt) {
			inFaults++
		}
		at := b.Released
		if at.IsZero() {
			at = rep.At
		}
		if due := effectiveDue(b, s.faults); at.Sub(due) > chaosLateAfter {
			row.late++
			late = append(late, fmt.Sprintf("booking %d due %s (after the faults: %s), released %s: %v late",
				b.BookingID, b.ReleaseAt.Format("15:04:05.000"), due.Format("15:04:05.000"), at.Format("15:04:05.000"),
				at.Sub(due).Round(time.Millisecond)))
		}
	}
	row.unreleased = len(pendingReleases(rep))
	t.Logf("%s: %d of %d due bookings fell due during a fault (or were still waiting when one began)", s.name, inFaults, row.due)
	for _, in := range s.f.Instances() {
		if n := in.CountLines("level=ERROR"); n > 0 {
			t.Logf("%s: %s logged %d errors; the last ones:\n%s", s.name, in.Name, n, lastLines(in.Logs(), "level=ERROR", 5))
		}
	}
	counted := row.twice + row.early + row.oversold + row.leaked + row.lost + rep.Unreleased
	row.other = max(len(rep.Violations)-counted, 0)
	for _, f := range s.faults {
		row.recover = max(row.recover, f.recovered)
	}

	if err := rep.Err(); err != nil {
		t.Errorf("%s: %v", s.name, err)
	}
	if len(late) > 0 {
		t.Errorf("%s: %d releases more than %v after their fault ended:\n  %s", s.name, len(late), chaosLateAfter,
			strings.Join(late[:min(len(late), 20)], "\n  "))
	}
	if row.unreleased > 0 {
		t.Errorf("%s: %d due bookings never released", s.name, row.unreleased)
	}
	if row.internal > 0 {
		t.Errorf("%s: %d answers of 500 under faults (a fault must answer 503 with Retry-After)", s.name, row.internal)
	}
	return row
}

// pendingReleases are the bookings due when the report was made, not checked in, still CONFIRMED
// (a second's slack: the release loop looks every 25 ms).
func pendingReleases(r *fleet.Report) []fleet.BookingRelease {
	var out []fleet.BookingRelease
	for _, b := range r.Releases {
		if b.Status == "CONFIRMED" && !b.CheckedIn && b.ReleaseAt.Before(r.At.Add(-time.Second)) {
			out = append(out, b)
		}
	}
	return out
}

// effectiveDue is when a booking must be released by (give or take chaosLateAfter): its release_at,
// moved to the end of every fault it was still waiting through — due no more than chaosLateAfter
// before the fault began (it was not late already), by its end, and not released before it began.
func effectiveDue(b fleet.BookingRelease, faults []chaosFault) time.Time {
	due := b.ReleaseAt
	for _, f := range faults {
		if due.After(f.start.Add(-chaosLateAfter)) && !due.After(f.end) && (b.Released.IsZero() || !b.Released.Before(f.start)) {
			due = f.end
		}
	}
	return due
}

// chaosRow is one line of the table.
type chaosRow struct {
	scenario                                         string
	faults, bookings, due, released, late, twice     int
	early, oversold, leaked, lost, unreleased, other int
	internal                                         int // answers of 500
	recover                                          time.Duration
}

func chaosTable(rows []chaosRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tfaults\tbookings\tdue\treleased\tlate > 5 s\treleased twice\tearly\toversold\tleaked units\tlost confirms\tnot released\tother violations\t500s\tseconds to recover\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", r.scenario, r.faults, r.bookings, r.due,
			r.released, r.late, r.twice, r.early, r.oversold, r.leaked, r.lost, r.unreleased, r.other, r.internal, r.recover.Seconds())
	}
	_ = w.Flush()
	return b.String()
}

// chaosTraffic is users holding (one in five never pays), paying (by payment notification or the
// confirm route, retried as a provider retries) and sometimes checking in at once, on random
// courts through random instances; failures are counted, not fatal.
type chaosTraffic struct {
	*crowd
	mu   sync.Mutex
	rep  chaosTrafficReport
	next atomic.Int64
}

type chaosTrafficReport struct {
	holds, abandoned, booked, refunds, checkins int
	failed                                      map[string]int
	// internal counts answers of 500: a fault may make a request answer 503 (retry), never 500.
	internal int
}

func (r chaosTrafficReport) String() string {
	keys := make([]string, 0, len(r.failed))
	for k := range r.failed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var fails []string
	for _, k := range keys {
		fails = append(fails, fmt.Sprintf("%s ×%d", k, r.failed[k]))
	}
	return fmt.Sprintf("%d holds (%d left unpaid), %d booked, %d refunds, %d check-ins; failures: %s", r.holds, r.abandoned,
		r.booked, r.refunds, r.checkins, strings.Join(fails, ", "))
}

func startChaosTraffic(f *fleet.Fleet, courts []fleet.Court, workers int) *chaosTraffic {
	tr := &chaosTraffic{rep: chaosTrafficReport{failed: map[string]int{}}}
	prefix := testenv.Unique("cu")
	tr.crowd = startCrowd(workers, func() time.Duration {
		tr.once(f, courts, prefix)
		// Users, not a benchmark: a pause between one's booking and the next.
		return 20*time.Millisecond + rand.N(40*time.Millisecond)
	})
	return tr
}

func (tr *chaosTraffic) once(f *fleet.Fleet, courts []fleet.Court, prefix string) {
	insts := f.Instances()
	client := func() *fleet.Client { return insts[rand.IntN(len(insts))].Client() }
	court := courts[rand.IntN(len(courts))]
	user := f.Token(prefix+strconv.FormatInt(tr.next.Add(1), 10), "user", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	h, err := client().Hold(ctx, user, court.Resource.ID, court.Start, court.End, 1)
	tr.check(err)
	if err != nil {
		tr.fail("hold", err)
		return
	}
	tr.count(func(r *chaosTrafficReport) { r.holds++ })
	if rand.IntN(5) == 0 {
		tr.count(func(r *chaosTrafficReport) { r.abandoned++ })
		return
	}
	var b *wire.Booking
	if rand.IntN(2) == 0 {
		paymentID := testenv.Unique("pay-")
		err = tr.retry(ctx, func() error {
			p, err := client().Pay(ctx, h, paymentID)
			switch {
			case err != nil:
			case p.Outcome == "booked":
				b = p.Booking
			default:
				tr.count(func(r *chaosTrafficReport) { r.refunds++ })
			}
			return err
		})
	} else {
		err = tr.retry(ctx, func() error {
			bk, err := client().Confirm(ctx, user, h.HoldID)
			if err == nil {
				b = &bk
			}
			return err
		})
	}
	if err != nil {
		tr.fail("pay", err)
		return
	}
	if b == nil {
		return
	}
	tr.count(func(r *chaosTrafficReport) { r.booked++ })
	if rand.IntN(20) != 0 {
		return
	}
	staff := f.Token("staff", "staff", b.VenueID)
	err = tr.retry(ctx, func() error { _, err := client().CheckIn(ctx, staff, b.CheckinCode); return err })
	if err != nil {
		tr.fail("check-in", err)
		return
	}
	tr.count(func(r *chaosTrafficReport) { r.checkins++ })
}

// retry calls do until it gets an answer that is neither a 5xx nor 409 confirm_in_progress (a
// confirm another instance began, and died in), six times at most, as a payment provider or a
// mini-program retries.
func (tr *chaosTraffic) retry(ctx context.Context, do func() error) error {
	var err error
	for attempt := range 6 {
		err = do()
		tr.check(err)
		if err == nil {
			return nil
		}
		var apiErr *fleet.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 && apiErr.Code != "confirm_in_progress" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

func (tr *chaosTraffic) count(f func(*chaosTrafficReport)) {
	tr.mu.Lock()
	f(&tr.rep)
	tr.mu.Unlock()
}

// check counts an answer of 500.
func (tr *chaosTraffic) check(err error) {
	var apiErr *fleet.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError {
		tr.count(func(r *chaosTrafficReport) { r.internal++ })
	}
}

func (tr *chaosTraffic) fail(what string, err error) {
	tr.count(func(r *chaosTrafficReport) { r.failed[what+": "+failure(err)]++ })
}

// stop ends the traffic, waits for requests in flight, and reports.
func (tr *chaosTraffic) stop() chaosTrafficReport {
	tr.crowd.stop()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.rep
}

// lastLines are the last n lines of s that contain sub.
func lastLines(s, sub string, n int) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(len(out)-n, 0):], "")
}

// archivedTasks are the archived tasks of each queue that has any, from the dashboard, for the log.
func archivedTasks(f *fleet.Fleet) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out struct {
		Queues []struct {
			Queue    string `json:"queue"`
			Archived int    `json:"archived"`
		} `json:"queues"`
	}
	if err := f.Client(0).Do(ctx, http.MethodGet, "/monitoring/api/queues", f.Token("ops", "admin", ""), nil, &out); err != nil {
		return err.Error()
	}
	var queues []string
	for _, q := range out.Queues {
		if q.Archived > 0 {
			queues = append(queues, fmt.Sprintf("%s %d", q.Queue, q.Archived))
		}
	}
	if len(queues) == 0 {
		return "none"
	}
	return strings.Join(queues, ", ")
}
