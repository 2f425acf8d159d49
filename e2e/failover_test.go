package e2e

// Unclean Redis failovers (issue "Never oversell, even when Redis forgets"). Redis replication is
// asynchronous: a primary acknowledges a write before its replica has it, so a failover to a
// replica that lagged loses what the primary acknowledged last. These scenarios make that happen on
// purpose, on servers the test starts itself, under traffic through two instances of the binary
// (`slotwheel all`) on a database of their own:
//
//	VIP       a primary and its replica behind a TCP proxy that plays the virtual IP the instances
//	          reach (SLOTWHEEL_REDIS_URL): the replica's replication is paused, the primary killed
//	          with -9, the replica promoted (REPLICAOF NO ONE) and the proxy pointed at it
//	Sentinel  such a pair watched by three real sentinels, which the instances ask where the master
//	          is (SLOTWHEEL_REDIS_SENTINEL_*): the replica paused, the primary killed with -9, the
//	          replica resumed, and Sentinel promotes it
//	Cluster   a Redis Cluster of three masters and three replicas (SLOTWHEEL_REDIS_CLUSTER): the
//	          replica of the master that holds the venue is paused, the master killed with -9, the
//	          replica resumed and made master at once (CLUSTER FAILOVER TAKEOVER)
//
// The replica misses 3 s of writes each time (holds, confirms, releases), while users hold, pay by
// signed payment notification or confirm, and sometimes check in. Each venue has courts whose
// bookings fall due for release within seconds (graces of 2 s and 5 s), so releases fall due
// before, during and after every failover; a probe court; and per failover a court that goes on
// sale as the replica is paused, its day already in Redis: half the users rush for it and sell it
// out meanwhile, and the promoted replica counts it empty. Users turned away while Redis was down
// come back for it at the promotion. Without MySQL's capacity ledger every unit sold again then
// would be oversold (the issue measured 49 to 1,268 oversold slots): with it MySQL refuses those
// confirms (hold.refused; a payment is kept for refund), and the rebuild that follows the
// promotion ends the holds still on sold units.
//
// From each promotion two times are measured: until Redis is consistent with MySQL (fleet.Inspect
// passes; the traffic waits while it looks, so that it reads no request half done) and until a new
// hold on the venue's probe court is confirmed through every instance; both must be within 5 s.
// Once the traffic has stopped: fleet.Inspect passes (per slot, bookings in MySQL and live holds in
// Redis within capacity, and MySQL's ledger equal to its bookings; every 2xx confirm in MySQL;
// every due booking released exactly once, never early); none is released more than 5 s after it
// fell due (one due while Redis was away: after the promotion); every payment answered "refund"
// has its refund row, still requested (a payment of /payments/notify is refunded by hand); and
// every event of the webhook's types reaches a receiver the test runs, within the relay's first
// retries. One table is logged.
//
// Like TestChaos it has two modes, by SLOTWHEEL_CHAOS: by default one failover per scenario (about
// a minute on two cores, run in CI); "full", by hand (about two minutes), five failovers through
// the VIP and through Sentinel (the dead primary is restarted empty as a replica of the new one
// after each) and three of the cluster (a venue on each master, each master killed in turn):
//
//	SLOTWHEEL_CHAOS=full SLOTWHEEL_TEST_REQUIRE_SERVERS=1 \
//	SLOTWHEEL_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC&multiStatements=true' \
//	SLOTWHEEL_TEST_REDIS_URL='redis://127.0.0.1:6379/0' \
//	go test ./e2e/ -run TestFailover -count=1 -v -timeout 30m
//
// "off" skips it. It needs a MySQL server (SLOTWHEEL_TEST_MYSQL_DSN) and redis-server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
	"github.com/slotwheel/slotwheel/internal/testenv/vip"
)

const (
	// failoverLag is how long the replica misses the primary's writes before the primary dies.
	failoverLag = 3 * time.Second
	// failoverWithin is the bound, from the promotion, on Redis agreeing with MySQL again
	// and on the venue serving holds again.
	failoverWithin = 5 * time.Second
	// failoverLook is how long a scenario keeps looking for either before it gives up.
	failoverLook = 30 * time.Second
	// failoverHoldTTL makes unpaid holds expire while a scenario runs.
	failoverHoldTTL = 3 * time.Second
	// targetCapacity is the units of the court that goes on sale at each failover: few enough for
	// the traffic to sell it out while the replica lags.
	targetCapacity = 10
)

// webhookTypes are the events the receiver subscribes to: every one must reach it.
var webhookTypes = []string{booking.EventConfirmed, booking.EventReleased, booking.EventHoldRefused, booking.EventRefundReq}

// failoverPlan is how many failovers each scenario strikes.
type failoverPlan struct {
	full                   bool
	vip, sentinel, cluster int
}

func failoverPlanFromEnv(t *testing.T) failoverPlan {
	t.Helper()
	switch mode := os.Getenv(envChaos); mode {
	case "":
		return failoverPlan{vip: 1, sentinel: 1, cluster: 1}
	case "full":
		// The cluster's three masters each hold a venue and fail in turn.
		return failoverPlan{full: true, vip: 5, sentinel: 5, cluster: 3}
	case "off":
		t.Skipf("%s=off", envChaos)
	default:
		t.Fatalf("%s=%q: want empty (shortened), full or off", envChaos, mode)
	}
	return failoverPlan{}
}

// TestFailover runs the unclean failovers (see the comment at the top of this file) and logs their
// table.
func TestFailover(t *testing.T) {
	needServers(t)
	plan := failoverPlanFromEnv(t)
	began := time.Now()
	var mu sync.Mutex
	var rows []failoverRow
	record := func(r failoverRow) {
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
		t.Logf("failover (%s, %v):\n%s", mode, time.Since(began).Round(time.Second), failoverTable(rows))
	})

	t.Run("VIP", func(t *testing.T) { record(failoverVIP(t, plan.vip)) })
	t.Run("Sentinel", func(t *testing.T) { record(failoverSentinel(t, plan.sentinel)) })
	t.Run("Cluster", func(t *testing.T) { record(failoverCluster(t, plan.cluster)) })
}

// redisFailover is how a scenario's Redis fails over.
type redisFailover interface {
	// lag cuts the replica that will be promoted, the one of the master that holds site's venue,
	// off its master's writes, which the master keeps acknowledging.
	lag(t *testing.T, site int)
	// fail kills that master with -9 and has the lagging replica promoted; it answers when each
	// happened (the promotion: when the new master could first take writes), at once, and settle,
	// which waits until the failover's machinery agrees that it is over (every sentinel or cluster
	// node names the new master) while the scenario measures from the promotion.
	fail(t *testing.T, site int) (killed, promoted time.Time, settle func() error)
	// rejoin readies the next failover of site.
	rejoin(t *testing.T, site int)
}

// failoverVIP: the instances reach the pair through a proxy that plays a virtual IP.
func failoverVIP(t *testing.T, failovers int) failoverRow {
	pair := redistest.StartReplicated(t)
	proxy := vip.Start(t, pair.Primary().Addr())
	s := newFailoverScenario(t, "VIP", fleet.Redis{URL: "redis://" + proxy.Addr() + "/0"}, &vipFailover{pair: pair, proxy: proxy})
	s.openSites(1, failovers, nil)
	return s.run(failovers)
}

type vipFailover struct {
	pair  *redistest.Replicated
	proxy *vip.Proxy
}

func (v *vipFailover) lag(*testing.T, int) { v.pair.PauseReplica() }

func (v *vipFailover) fail(t *testing.T, _ int) (killed, promoted time.Time, settle func() error) {
	v.pair.KillPrimary()
	killed = time.Now()
	v.pair.ResumeReplica()
	// As a failover script does: promote, then move the address. Measured from the promotion, so
	// that the move counts against the bounds.
	promoted = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, v.pair.PromoteReplica(ctx))
	v.proxy.Point(v.pair.Replica().Addr())
	return killed, promoted, func() error { return nil }
}

func (v *vipFailover) rejoin(t *testing.T, _ int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, v.pair.Rejoin(ctx))
}

// failoverSentinel: the instances ask three sentinels where the master is.
func failoverSentinel(t *testing.T, failovers int) failoverRow {
	pair := redistest.StartReplicated(t)
	sentinel := redistest.StartSentinel(t, pair)
	s := newFailoverScenario(t, "Sentinel", fleet.SentinelRedis(sentinel), &sentinelFailover{pair: pair, sentinel: sentinel})
	s.openSites(1, failovers, nil)
	return s.run(failovers)
}

type sentinelFailover struct {
	pair     *redistest.Replicated
	sentinel *redistest.Sentinel
}

func (v *sentinelFailover) lag(*testing.T, int) { v.pair.PauseReplica() }

func (v *sentinelFailover) fail(t *testing.T, _ int) (killed, promoted time.Time, settle func() error) {
	old, want := v.pair.Primary().Addr(), v.pair.Replica().Addr()
	v.pair.KillPrimary()
	killed = time.Now()
	v.pair.ResumeReplica()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Sentinel decides when to promote; the promotion is when the replica says it is a master,
	// before the sentinels announce it. Nothing tells: poll.
	replica := redis.NewClient(&redis.Options{Addr: want, DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = replica.Close() }()
	for {
		role, err := replica.Do(ctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			promoted = time.Now()
			break
		}
		require.NoError(t, ctx.Err(), "Sentinel did not promote %s (last: %v %v)", want, role, err)
		time.Sleep(10 * time.Millisecond)
	}
	return killed, promoted, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		master, err := v.sentinel.WaitForNewMaster(ctx, old)
		if err == nil && master != want {
			err = fmt.Errorf("the sentinels name %s, not the promoted %s", master, want)
		}
		return err
	}
}

func (v *sentinelFailover) rejoin(t *testing.T, _ int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, v.pair.Rejoin(ctx))
	// Sentinel promotes only a replica it knows to be in sync.
	require.NoError(t, v.sentinel.WaitReady(ctx))
}

// failoverCluster: a venue on each master that fails (one master in the shortened mode).
func failoverCluster(t *testing.T, failovers int) failoverRow {
	cluster := redistest.StartCluster(t)
	fo := &clusterFailover{cluster: cluster}
	s := newFailoverScenario(t, "Cluster", fleet.ClusterRedis(cluster), fo)
	// Each failover kills the master of another venue: a killed master is not restarted, and the
	// replica that took its slots over has none of its own.
	s.openSites(failovers, 1, func(venueKey string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		node, err := s.f.Redis().(*redis.ClusterClient).MasterForKey(ctx, venueKey)
		require.NoError(t, err)
		master := node.Options().Addr
		if slices.ContainsFunc(fo.sites, func(n [2]string) bool { return n[0] == master }) {
			return false
		}
		fo.sites = append(fo.sites, [2]string{master, cluster.ReplicaOf(master)})
		return true
	})
	return s.run(failovers)
}

type clusterFailover struct {
	cluster *redistest.Cluster
	sites   [][2]string // the master and the replica that hold each site's venue
}

func (v *clusterFailover) lag(_ *testing.T, site int) { v.cluster.PauseReplica(v.sites[site][1]) }

func (v *clusterFailover) fail(_ *testing.T, site int) (killed, promoted time.Time, settle func() error) {
	master, replica := v.sites[site][0], v.sites[site][1]
	v.cluster.KillNode(master)
	killed = time.Now()
	v.cluster.ResumeNode(replica)
	// Measured from just before CLUSTER FAILOVER TAKEOVER is sent: the replica takes the slots over
	// at once, and the other nodes learn of it by gossip, which settle (Takeover) waits for.
	promoted = time.Now()
	return killed, promoted, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return v.cluster.Takeover(ctx, replica)
	}
}

func (v *clusterFailover) rejoin(*testing.T, int) {}

// failoverScenario is one scenario's fleet, venues, traffic and failovers.
type failoverScenario struct {
	t     *testing.T
	name  string
	f     *fleet.Fleet
	fo    redisFailover
	sites []failoverSite
	rx    *fleet.Receiver
	tr    *failoverTraffic
	// quiet is held shared by every request of the traffic and the probes, and alone by each look
	// at MySQL and Redis: the audit reads them one after the other, and a request half done
	// between the two would look like an inconsistency.
	quiet  sync.RWMutex
	rounds []failoverRound
}

// failoverSite is a venue and its courts: all under the venue's hash tag, on one master.
type failoverSite struct {
	probe   fleet.Court   // the serving probe's: room for every probe, default grace
	churn   []fleet.Court // bookings due for release within seconds
	targets []fleet.Court // one per failover of the site, on sale from the replica's pause on
}

// failoverRound is one failover, as it went.
type failoverRound struct {
	site                      int
	paused, killed, promoted  time.Time
	soldWhileLagging          int           // bookings of the target confirmed between the pause and the kill
	consistent, served        time.Duration // from the promotion
	firstLook                 []string      // the violations of the first look after the promotion
	overCapacity, inspections int           // the looks' worst count of slots MySQL's bookings oversold, and how many looks
}

func newFailoverScenario(t *testing.T, name string, r fleet.Redis, fo redisFailover) *failoverScenario {
	t.Helper()
	f := fleet.Start(t, fleet.Options{Instances: 2, Redis: r, Env: []string{"SLOTWHEEL_HOLD_TTL=" + failoverHoldTTL.String()}})
	s := &failoverScenario{t: t, name: name, f: f, fo: fo}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Registered before any event of its types is written: every one must reach it.
	rx, err := f.NewReceiver(ctx, webhookTypes...)
	require.NoError(t, err)
	s.rx = rx
	return s
}

// openSites creates n venues, each with a probe court, two courts whose bookings fall due within
// seconds, and targets courts to put on sale at failovers. keep, when set, tells from a venue's key
// whether the venue may be a site (on a cluster: whether its master holds no other site); a venue
// it refuses stays unused.
func (s *failoverScenario) openSites(n, targets int, keep func(venueKey string) bool) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := s.f.Client(0)
	for tries := 0; len(s.sites) < n; tries++ {
		require.Less(t, tries, 30, "no %d venues to keep of 30", n)
		probe, err := c.NewCourt(ctx, fleet.CourtSpec{Capacity: 100_000, MinLeft: 20 * time.Minute})
		require.NoError(t, err)
		if keep == nil || keep(s.f.VenueKey(mustID(t, probe.Venue.ID))) {
			s.sites = append(s.sites, failoverSite{probe: probe})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(s.sites))
	for i := range s.sites {
		site := &s.sites[i]
		specs := []fleet.CourtSpec{{Capacity: 40, GraceSeconds: 2}, {Capacity: 40, GraceSeconds: 5}}
		for range targets {
			specs = append(specs, fleet.CourtSpec{Capacity: targetCapacity})
		}
		wg.Go(func() {
			courts, err := c.NewCourtsAt(ctx, site.probe, specs...)
			if err != nil {
				errs[i] = err
				return
			}
			site.churn, site.targets = courts[:2], courts[2:]
			// Users look at a target before it goes on sale: its day is in Redis, every unit free.
			for _, tg := range site.targets {
				if _, err := c.SlotAt(ctx, tg.Resource.ID, tg.Start); err != nil {
					errs[i] = errors.Join(errs[i], err)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// run starts the traffic, strikes the failovers, each once the one before has been recovered from,
// and returns the scenario's row.
func (s *failoverScenario) run(failovers int) failoverRow {
	var churn []fleet.Court
	for _, site := range s.sites {
		churn = append(churn, site.churn...)
	}
	s.tr = startFailoverTraffic(s, churn, 4)
	s.t.Cleanup(func() { s.tr.stop() }) // however the scenario ends
	// Bookings fall due before the first failover.
	s.hold(3 * time.Second)
	for i := range failovers {
		if i > 0 {
			s.fo.rejoin(s.t, i%len(s.sites))
			s.hold(2 * time.Second)
		}
		s.strike(i)
	}
	return s.finish()
}

// hold lets d pass: traffic and lag last this long by design, there is nothing to wait for.
func (s *failoverScenario) hold(d time.Duration) { time.Sleep(d) }

// strike runs failover i: the replica lags while the site's next target sells, the master dies,
// the replica is promoted; then it measures, from the promotion, how soon Redis agrees with MySQL
// and how soon the venue serves holds again.
func (s *failoverScenario) strike(i int) {
	t := s.t
	r := failoverRound{site: i % len(s.sites)}
	site := s.sites[r.site]
	target := site.targets[i/len(s.sites)]
	s.fo.lag(t, r.site)
	r.paused = time.Now()
	s.tr.open(target)
	s.hold(failoverLag)
	var settle func() error
	r.killed, r.promoted, settle = s.fo.fail(t, r.site)
	// Users turned away while Redis was down come back at once, for the court they wanted: Redis
	// shows it empty.
	s.tr.rush(target, 2*targetCapacity)

	settled, served := make(chan error, 1), make(chan error, 1)
	go func() { settled <- settle() }()
	go func() { served <- s.awaitServed(site.probe, &r) }()
	consistentErr := s.awaitConsistent(&r)
	servedErr := <-served
	require.NoError(t, <-settled)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.f.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM bookings WHERE resource_id = ? AND confirmed_at BETWEEN ? AND ?`,
		mustID(t, target.Resource.ID), r.paused, r.killed).Scan(&r.soldWhileLagging))
	s.rounds = append(s.rounds, r)
	t.Logf("%s failover %d: the replica lagged %v, while %d units of the target court were sold; promoted %v after the kill; "+
		"Redis consistent with MySQL %v after the promotion (%d looks; the first found %d violations%s); holds served %v after it",
		s.name, i+1, r.killed.Sub(r.paused).Round(time.Millisecond), r.soldWhileLagging, r.promoted.Sub(r.killed).Round(time.Millisecond),
		r.consistent.Round(time.Millisecond), r.inspections, len(r.firstLook), firstLines(r.firstLook, 3), r.served.Round(time.Millisecond))
	require.NoError(t, consistentErr)
	require.NoError(t, servedErr)
	require.Positive(t, r.soldWhileLagging, "the promoted replica lacks acknowledged confirms: the failover lost writes")
	require.Zero(t, r.overCapacity, "no look found a slot whose MySQL bookings exceed its capacity")
	require.LessOrEqual(t, r.consistent, failoverWithin, "Redis consistent with MySQL within %v of the promotion", failoverWithin)
	require.LessOrEqual(t, r.served, failoverWithin, "the venue serves holds within %v of the promotion", failoverWithin)
}

func firstLines(lines []string, n int) string {
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines[:min(n, len(lines))], "; ")
}

// awaitConsistent looks at MySQL and Redis together (fleet.Inspect), with no request of the
// traffic in flight, until nothing is amiss, and records when, from the promotion, the look that
// passed began.
func (s *failoverScenario) awaitConsistent(r *failoverRound) error {
	deadline := r.promoted.Add(failoverLook)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s.quiet.Lock()
		rep, err := s.f.Inspect(ctx)
		s.quiet.Unlock()
		cancel()
		if err == nil {
			r.inspections++
			if r.inspections == 1 {
				r.firstLook = rep.Violations
			}
			r.overCapacity = max(r.overCapacity, rep.OverCapacity)
			if err = rep.Err(); err == nil {
				r.consistent = rep.At.Sub(r.promoted)
				return nil
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: Redis not consistent with MySQL %v after the promotion: %w", s.name, failoverLook, last)
		}
		// Another process' work, which announces nothing: look again.
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitServed holds and confirms on the probe court through every instance in turn until each
// has served one, and records when, from the promotion, the last one did.
func (s *failoverScenario) awaitServed(probe fleet.Court, r *failoverRound) error {
	user := s.f.Token(testenv.Unique("probe"), "user", "")
	pending := s.f.Instances()
	var last error
	for len(pending) > 0 {
		in := pending[0]
		err := s.request(func(ctx context.Context) error {
			h, err := in.Client().Hold(ctx, user, probe.Resource.ID, probe.Start, probe.End, 1)
			if err == nil {
				_, err = in.Client().Confirm(ctx, user, h.HoldID)
			}
			return err
		})
		if err == nil {
			r.served = time.Since(r.promoted)
			pending = pending[1:]
			continue
		}
		last = fmt.Errorf("through %s: %w", in.Name, err)
		if time.Since(r.promoted) > failoverLook {
			return fmt.Errorf("%s: the venue not served %v after the promotion: %w", s.name, failoverLook, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// request runs one request of the traffic or a probe (do may send two), while no look is under way.
func (s *failoverScenario) request(do func(ctx context.Context) error) error {
	s.quiet.RLock()
	defer s.quiet.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return do(ctx)
}

// finish lets the traffic run on for a moment after the last failover (bookings due just after
// it), stops it, waits until every due booking is released and the audit passes, until the
// webhook receiver has every event of its types, and returns the scenario's row, having failed the
// test on any violation.
func (s *failoverScenario) finish() failoverRow {
	t := s.t
	t.Helper()
	s.hold(3 * time.Second)
	tr := s.tr.stop()
	t.Logf("%s: traffic: %s", s.name, tr)
	require.Positive(t, tr.booked, "the traffic made bookings")

	var rep *fleet.Report
	var err error
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rep, err = s.f.Inspect(ctx)
		cancel()
		if err == nil && rep.Err() == nil && len(pendingReleases(rep)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	require.NoError(t, err, "%s: audit", s.name)

	row := failoverRow{scenario: s.name, failovers: len(s.rounds), confirmed: rep.Confirmed, oversold: rep.OversoldSlots,
		overCapacity: rep.OverCapacity, lost: rep.LostConfirms, unreleased: len(pendingReleases(rep)), internal: tr.internal}
	for _, r := range s.rounds {
		row.consistent = max(row.consistent, r.consistent)
		row.served = max(row.served, r.served)
		row.soldWhileLagging += r.soldWhileLagging
	}
	var faults []chaosFault
	for _, r := range s.rounds {
		faults = append(faults, chaosFault{start: r.killed, end: r.promoted})
	}
	var late []string
	around := 0
	for _, b := range rep.Releases {
		if b.CheckedIn || (b.Released.IsZero() && (b.Status != "CONFIRMED" || !b.ReleaseAt.Before(rep.At.Add(-time.Second)))) {
			continue
		}
		row.due++
		if slices.ContainsFunc(s.rounds, func(r failoverRound) bool {
			return !b.ReleaseAt.Before(r.paused) && !b.ReleaseAt.After(r.promoted.Add(chaosLateAfter))
		}) {
			around++
		}
		at := b.Released
		if at.IsZero() {
			at = rep.At
		}
		if due := effectiveDue(b, faults); at.Sub(due) > chaosLateAfter {
			row.late++
			late = append(late, fmt.Sprintf("booking %d due %s (after the failovers: %s), released %s: %v late", b.BookingID,
				b.ReleaseAt.Format("15:04:05.000"), due.Format("15:04:05.000"), at.Format("15:04:05.000"), at.Sub(due).Round(time.Millisecond)))
		}
	}

	t.Logf("%s: %d of %d due bookings fell due between a replica's pause and 5 s after its promotion", s.name, around, row.due)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.countRefusals(ctx, &row)
	refundsMissing := s.checkRefunds(ctx, tr.refunded)
	row.refundsMissing = len(refundsMissing)
	undelivered := s.awaitDeliveries(ctx)
	row.undelivered = len(undelivered)

	for _, in := range s.f.Instances() {
		if n := in.CountLines("level=ERROR"); n > 0 {
			t.Logf("%s: %s logged %d errors; the last ones:\n%s", s.name, in.Name, n, lastLines(in.Logs(), "level=ERROR", 5))
		}
	}
	if err := rep.Err(); err != nil {
		t.Errorf("%s: %v", s.name, err)
	}
	if len(late) > 0 {
		t.Errorf("%s: %d releases more than %v after their failover ended:\n  %s", s.name, len(late), chaosLateAfter,
			strings.Join(late[:min(len(late), 20)], "\n  "))
	}
	if row.unreleased > 0 {
		t.Errorf("%s: %d due bookings never released", s.name, row.unreleased)
	}
	if len(refundsMissing) > 0 {
		t.Errorf("%s: %d refunds missing or unannounced:\n  %s", s.name, len(refundsMissing),
			strings.Join(refundsMissing[:min(len(refundsMissing), 20)], "\n  "))
	}
	if len(undelivered) > 0 {
		t.Errorf("%s: %d events never reached the webhook receiver:\n  %s", s.name, len(undelivered),
			strings.Join(undelivered[:min(len(undelivered), 20)], "\n  "))
	}
	if rejected := s.rx.Rejected(); len(rejected) > 0 {
		t.Errorf("%s: %d deliveries failed the receiver's checks: %v", s.name, len(rejected), rejected[:min(len(rejected), 5)])
	}
	if row.internal > 0 {
		t.Errorf("%s: %d answers of 500 (a failover must answer 503 with Retry-After)", s.name, row.internal)
	}
	return row
}

// countRefusals reads what the ledger refused, from the instances' counters (none restarted):
// confirms it refused, and holds the rebuilds ended on sold units; and the hold.refused events
// both wrote, from MySQL.
func (s *failoverScenario) countRefusals(ctx context.Context, row *failoverRow) {
	t := s.t
	refused, err := s.f.SumMetric(ctx, "slotwheel_confirms_total", map[string]string{"outcome": "refused"})
	require.NoError(t, err)
	ended, err := s.f.SumMetric(ctx, "slotwheel_reconcile_repairs_total", map[string]string{"kind": "holds_refused"})
	require.NoError(t, err)
	row.refused, row.ended = int(refused), int(ended)
	var events, capacityRefunds int
	require.NoError(t, s.f.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_events WHERE type = ?", booking.EventHoldRefused).Scan(&events))
	require.NoError(t, s.f.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM refunds WHERE reason = ?", booking.RefundCapacity).Scan(&capacityRefunds))
	s.t.Logf("%s: %d confirms refused by the ledger (%d of them payments, refunded), %d holds ended by rebuilds; %d hold.refused events",
		s.name, row.refused, capacityRefunds, row.ended, events)
}

// checkRefunds finds every payment answered refund (by the traffic, or in MySQL's payments) that
// has no refund row, or one that is not requested (payments of /payments/notify have no provider
// to send a refund to: they wait for someone to refund them by hand), and every refund row that
// was not announced (refund.requested).
func (s *failoverScenario) checkRefunds(ctx context.Context, answered []string) []string {
	t := s.t
	announced := map[string]bool{}
	events, err := s.f.DB().QueryContext(ctx, "SELECT data FROM outbox_events WHERE type = ?", booking.EventRefundReq)
	require.NoError(t, err)
	defer events.Close()
	for events.Next() {
		var data []byte
		var r wire.Refund
		require.NoError(t, events.Scan(&data))
		require.NoError(t, json.Unmarshal(data, &r))
		announced[r.RefundID] = true
	}
	require.NoError(t, events.Err())

	var missing []string
	status := map[string]string{}
	refunds, err := s.f.DB().QueryContext(ctx, "SELECT id, payment_id, status FROM refunds")
	require.NoError(t, err)
	defer refunds.Close()
	for refunds.Next() {
		var id uint64
		var payment, st string
		require.NoError(t, refunds.Scan(&id, &payment, &st))
		status[payment] = st
		if !announced[wire.ID(id)] {
			missing = append(missing, fmt.Sprintf("refund %d of payment %s: no refund.requested", id, payment))
		}
	}
	require.NoError(t, refunds.Err())

	payments, err := s.f.DB().QueryContext(ctx, "SELECT payment_id FROM payments WHERE outcome = 'refund'")
	require.NoError(t, err)
	defer payments.Close()
	for payments.Next() {
		var id string
		require.NoError(t, payments.Scan(&id))
		answered = append(answered, id)
	}
	require.NoError(t, payments.Err())
	for _, id := range slices.Compact(slices.Sorted(slices.Values(answered))) {
		if st := status[id]; st != "requested" {
			missing = append(missing, fmt.Sprintf("payment %s answered refund: refund %q", id, st))
		}
	}
	return missing
}

// awaitDeliveries waits, within the relay's first retries, until the receiver has every event of
// its types, and answers those it has not.
func (s *failoverScenario) awaitDeliveries(ctx context.Context) []string {
	deadline := time.Now().Add(time.Minute)
	for {
		missing, err := s.rx.Missing(ctx)
		require.NoError(s.t, err)
		if len(missing) == 0 || time.Now().After(deadline) {
			events, repeats := s.rx.Received()
			s.t.Logf("%s: the webhook receiver got %d events (%d deliveries repeated one); %d missing", s.name, events, repeats, len(missing))
			return missing
		}
		// Deliveries are retried with a backoff: look again.
		time.Sleep(250 * time.Millisecond)
	}
}

// failoverRow is one line of the table.
type failoverRow struct {
	scenario                    string
	failovers, confirmed        int
	soldWhileLagging            int // units of the targets the promoted replicas never heard of
	refused, ended              int // confirms the ledger refused; holds rebuilds ended on sold units
	consistent, served          time.Duration
	oversold, overCapacity      int // slots over capacity counting live holds (MySQL or Redis), and by MySQL's bookings alone
	lost, due, unreleased, late int
	refundsMissing, undelivered int
	internal                    int // answers of 500
}

func failoverTable(rows []failoverRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tfailovers\tbookings confirmed\ttarget units sold while lagging\tconfirms refused by the ledger\tholds ended by rebuild\t"+
		"s to Redis consistent (max)\ts to holds served (max)\twithin 5 s\toversold slots\tlost confirms\t"+
		"due\tnot released\tlate > 5 s\trefunds missing\tdeliveries missing\t500s\t")
	for _, r := range rows {
		within := "yes"
		if r.consistent > failoverWithin || r.served > failoverWithin {
			within = "NO"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.scenario, r.failovers, r.confirmed,
			r.soldWhileLagging, r.refused, r.ended, r.consistent.Seconds(), r.served.Seconds(), within, max(r.oversold, r.overCapacity), r.lost,
			r.due, r.unreleased, r.late, r.refundsMissing, r.undelivered, r.internal)
	}
	_ = w.Flush()
	return b.String()
}

// failoverTraffic is users holding (one in five never pays), paying (by signed payment
// notification or the confirm route, retried as a provider or a mini-program retries) and
// sometimes checking in, on random courts on sale through random instances; the court that went
// on sale last draws a rush, half of the users. Failures are counted, not fatal; a confirm refused
// by the ledger is an answer like any other.
type failoverTraffic struct {
	*crowd
	s      *failoverScenario
	prefix string // of the users' ids
	next   atomic.Int64
	rushes sync.WaitGroup

	mu     sync.Mutex
	courts []fleet.Court
	newest *fleet.Court
	rep    failoverTrafficReport
}

type failoverTrafficReport struct {
	holds, abandoned, booked, checkins int
	// slotFull counts confirms answered 409 slot_full: the ledger refused them.
	slotFull int
	// refunded are the payments answered refund (a payment the ledger refused, or one for a hold
	// the failover lost).
	refunded []string
	failed   map[string]int
	// internal counts answers of 500: a failover may make a request answer 503 (retry), never 500.
	internal int
}

func (r failoverTrafficReport) String() string {
	var fails []string
	for _, k := range slices.Sorted(maps.Keys(r.failed)) {
		fails = append(fails, fmt.Sprintf("%s ×%d", k, r.failed[k]))
	}
	return fmt.Sprintf("%d holds (%d left unpaid), %d booked, %d confirms answered slot_full, %d payments answered refund, %d check-ins; "+
		"failures: %s", r.holds, r.abandoned, r.booked, r.slotFull, len(r.refunded), r.checkins, strings.Join(fails, ", "))
}

func startFailoverTraffic(s *failoverScenario, courts []fleet.Court, workers int) *failoverTraffic {
	tr := &failoverTraffic{s: s, prefix: testenv.Unique("fu"), courts: slices.Clone(courts),
		rep: failoverTrafficReport{failed: map[string]int{}}}
	tr.crowd = startCrowd(workers, func() time.Duration {
		tr.mu.Lock()
		court := tr.courts[rand.IntN(len(tr.courts))]
		if tr.newest != nil && rand.IntN(2) == 0 {
			court = *tr.newest
		}
		tr.mu.Unlock()
		tr.visit(court, false)
		// Users, not a benchmark: a pause between one's booking and the next.
		return 20*time.Millisecond + rand.N(40*time.Millisecond)
	})
	return tr
}

// rush sends n users at court at once, each asking for a hold until the venue answers again, as
// people who waited through an outage do, then paying as the others do.
func (tr *failoverTraffic) rush(court fleet.Court, n int) {
	for range n {
		tr.rushes.Go(func() { tr.visit(court, true) })
	}
}

// open puts a court on sale.
func (tr *failoverTraffic) open(c fleet.Court) {
	tr.mu.Lock()
	tr.courts = append(tr.courts, c)
	tr.newest = &c
	tr.mu.Unlock()
}

// visit is one user's: a hold of court (asked again while the venue answers 5xx, when patient),
// then most often a payment or a confirm, and sometimes a check-in.
func (tr *failoverTraffic) visit(court fleet.Court, patient bool) {
	f := tr.s.f
	insts := f.Instances()
	client := func() *fleet.Client { return insts[rand.IntN(len(insts))].Client() }
	user := f.Token(tr.prefix+strconv.FormatInt(tr.next.Add(1), 10), "user", "")

	var h wire.Hold
	hold := func(ctx context.Context) error {
		var err error
		h, err = client().Hold(ctx, user, court.Resource.ID, court.Start, court.End, 1)
		return err
	}
	var err error
	if patient {
		err = tr.retry(hold)
	} else {
		err = tr.s.request(hold)
		tr.check(err)
	}
	if err != nil {
		tr.fail("hold", err)
		return
	}
	tr.count(func(r *failoverTrafficReport) { r.holds++ })
	if rand.IntN(5) == 0 {
		tr.count(func(r *failoverTrafficReport) { r.abandoned++ })
		return
	}
	var b *wire.Booking
	what := "pay"
	if rand.IntN(2) == 0 {
		paymentID := testenv.Unique("pay-")
		err = tr.retry(func(ctx context.Context) error {
			p, err := client().Pay(ctx, h, paymentID)
			switch {
			case err != nil:
			case p.Outcome == "booked":
				b = p.Booking
			default:
				tr.count(func(r *failoverTrafficReport) { r.refunded = append(r.refunded, paymentID) })
			}
			return err
		})
	} else {
		what = "confirm"
		err = tr.retry(func(ctx context.Context) error {
			bk, err := client().Confirm(ctx, user, h.HoldID)
			if err == nil {
				b = &bk
			}
			return err
		})
	}
	var apiErr *fleet.APIError
	if what == "confirm" && errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && apiErr.Code == "slot_full" {
		tr.count(func(r *failoverTrafficReport) { r.slotFull++ })
		return
	}
	if err != nil {
		tr.fail(what, err)
		return
	}
	if b == nil {
		return
	}
	tr.count(func(r *failoverTrafficReport) { r.booked++ })
	if rand.IntN(20) != 0 {
		return
	}
	staff := f.Token("staff", "staff", b.VenueID)
	err = tr.retry(func(ctx context.Context) error { _, err := client().CheckIn(ctx, staff, b.CheckinCode); return err })
	if err != nil {
		tr.fail("check-in", err)
		return
	}
	tr.count(func(r *failoverTrafficReport) { r.checkins++ })
}

// retry sends a request until it gets an answer that is neither a 5xx nor 409 confirm_in_progress
// (a confirm another instance began), six times at most, as a payment provider or a mini-program
// retries.
func (tr *failoverTraffic) retry(do func(ctx context.Context) error) error {
	var err error
	for attempt := range 6 {
		err = tr.s.request(do)
		tr.check(err)
		if err == nil {
			return nil
		}
		var apiErr *fleet.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 && apiErr.Code != "confirm_in_progress" {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return err
}

func (tr *failoverTraffic) count(f func(*failoverTrafficReport)) {
	tr.mu.Lock()
	f(&tr.rep)
	tr.mu.Unlock()
}

// check counts an answer of 500.
func (tr *failoverTraffic) check(err error) {
	var apiErr *fleet.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError {
		tr.count(func(r *failoverTrafficReport) { r.internal++ })
	}
}

func (tr *failoverTraffic) fail(what string, err error) {
	tr.count(func(r *failoverTrafficReport) { r.failed[what+": "+failure(err)]++ })
}

// stop ends the traffic, waits for requests in flight and rushes, and reports.
func (tr *failoverTraffic) stop() failoverTrafficReport {
	tr.crowd.stop()
	tr.rushes.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.rep
}
