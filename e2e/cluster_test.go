package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// shortHoldTTL is the instances' hold lifetime once the race is over: short enough to watch holds
// expire, long enough for a hold to be paid right after it was made.
const shortHoldTTL = 4 * time.Second

// Three instances of the binary on a 3-master, 3-replica Redis Cluster and one MySQL database: the
// work is shared, nothing is oversold, no release is lost or early, and neither a kill -9 of an
// instance nor a master failover loses a confirmed booking or a release, and an admin change
// answered through one instance is in force at once on the others.
func TestThreeInstancesOnACluster(t *testing.T) {
	needServers(t)
	cluster := redistest.StartCluster(t)
	f := fleet.Start(t, fleet.Options{Instances: 3, Redis: fleet.ClusterRedis(cluster)})

	// Holds last the default 10 minutes while racers compete for them, so that none expires and
	// hands its unit to a later racer.
	t.Run("last units race", func(t *testing.T) { lastUnitsRace(t, f) })
	t.Run("200 releases", func(t *testing.T) { twoHundredReleases(t, f) })
	t.Run("admin changes in force on every instance", func(t *testing.T) { adminChangesInForce(t, f, freshnessRounds) })
	t.Run("rolling restart to short holds", func(t *testing.T) { rollingRestart(t, f, "SLOTWHEEL_HOLD_TTL="+shortHoldTTL.String()) })
	t.Run("wheel holder killed", func(t *testing.T) { wheelHolderKilled(t, f) })
	t.Run("kill -9 and restart under traffic", func(t *testing.T) { killAndRestart(t, f) })
	t.Run("master failover under traffic", func(t *testing.T) { masterFailover(t, f, cluster) })
}

// lastUnitsRace: 10,000 users, spread over the three instances, race for the last 10 units of a
// slot: exactly 10 get a hold, every other one a clean 409 slot_full.
func lastUnitsRace(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	const capacity, sold, racers = 30, 20, 10_000
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: capacity, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	// The first units are sold: paid bookings, which do not expire while the race runs.
	for i := range sold {
		c := f.Client(i % 3)
		h, err := c.Hold(ctx, f.Token(fmt.Sprintf("early-%d", i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
		require.NoError(t, err)
		p, err := c.Pay(ctx, h, testenv.Unique("pay-"))
		require.NoError(t, err)
		require.Equal(t, "booked", p.Outcome)
	}

	tokens := make([]string, racers)
	for i := range tokens {
		tokens[i] = f.Token(fmt.Sprintf("racer-%d", i), "user", "")
	}
	var won, full atomic.Int64
	var mu sync.Mutex
	other := map[string]int{}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-gate
			_, err := f.Client(i%3).Hold(ctx, tokens[i], court.Resource.ID, court.Start, court.End, 1)
			var apiErr *fleet.APIError
			switch {
			case err == nil:
				won.Add(1)
			case errors.As(err, &apiErr) && apiErr.Status == 409 && apiErr.Code == "slot_full":
				full.Add(1)
			default:
				mu.Lock()
				other[err.Error()]++
				mu.Unlock()
			}
		})
	}
	began := time.Now()
	close(gate)
	wg.Wait()
	t.Logf("%d racers over 3 instances in %v: %d holds, %d slot_full, other: %v", racers,
		time.Since(began).Round(time.Millisecond), won.Load(), full.Load(), other)
	require.Empty(t, other, "every loser gets a clean 409 slot_full")
	require.EqualValues(t, capacity-sold, won.Load(), "exactly the last units are held")
	require.EqualValues(t, racers-(capacity-sold), full.Load())
	for i := range 3 {
		slot, err := f.Client(i).SlotAt(ctx, court.Resource.ID, court.Start)
		require.NoError(t, err)
		require.Equal(t, fleet.Slot{Start: slot.Start, End: slot.End, Available: false, Remaining: 0, Reason: "full"}, slot,
			"every instance shows the slot full")
	}
	require.NoError(t, f.Audit(ctx))
}

// twoHundredReleases: 200 bookings paid through the three instances fall due within a few seconds;
// nobody checks in. Each is released exactly once, none before its release_at, p99 lag ≤ 1 s.
func twoHundredReleases(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	const n, grace = 200, 6
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: n, GraceSeconds: grace, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	ids := make([]string, n)
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				h, err := f.Client(i%3).Hold(ctx, f.Token(fmt.Sprintf("noshow-%d", i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
				if err != nil {
					errs <- err
					continue
				}
				p, err := f.Client((i+1)%3).Pay(ctx, h, testenv.Unique("pay-"))
				if err != nil || p.Outcome != "booked" {
					errs <- fmt.Errorf("pay %d: %v (%s)", i, err, p.Outcome)
					continue
				}
				ids[i] = p.Booking.BookingID
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	res := mustID(t, court.Resource.ID)
	var last time.Time
	require.NoError(t, f.DB().QueryRowContext(ctx, "SELECT MAX(release_at) FROM bookings WHERE resource_id = ?", res).Scan(&last))
	first := time.Now()
	require.NoError(t, f.DB().QueryRowContext(ctx, "SELECT MIN(release_at) FROM bookings WHERE resource_id = ?", res).Scan(&first))
	t.Logf("200 bookings due between %s and %s", first.Format("15:04:05.000"), last.Format("15:04:05.000"))

	// Wait for the last release_at and a few seconds more, then read what happened.
	waitFor(t, time.Until(last)+15*time.Second, func() (bool, string) {
		var left int
		require.NoError(t, f.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM bookings WHERE resource_id = ? AND status <> 'RELEASED'", res).Scan(&left))
		return left == 0, fmt.Sprintf("%d of 200 not released", left)
	})
	lags := releaseLags(t, f.DB(), res)
	require.Len(t, lags, n)
	for id, lag := range lags {
		require.GreaterOrEqual(t, lag, time.Duration(0), "booking %d released %v before its release_at", id, -lag)
	}
	sorted := slices.Sorted(maps.Values(lags))
	p50, p99, worst := sorted[n/2], sorted[n*99/100-1], sorted[n-1]
	t.Logf("release lag over 200 bookings: p50 %v, p99 %v, max %v", p50, p99, worst)
	require.LessOrEqual(t, p99, time.Second, "p99 release lag")
	requireReleasedOnce(t, f.DB(), res, n)
	// A release commits to MySQL, then gives the units back in Redis: the last may be under way.
	require.NoError(t, f.AwaitAudit(ctx, 10*time.Second))
	releaseQueuesSpread(t, f)
}

// releaseQueuesSpread checks, through the dashboard, that the release tasks went through queues on
// every master (by default a cluster gets eight release queues, one hash slot each). The tasks are
// the release loop's backstop and run a second or two after their release_at (whole seconds, and
// Asynq's polling): their counts are polled for.
func releaseQueuesSpread(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx := context.Background()
	var masters map[string]int // master → tasks its release queues processed
	var queues, total int
	deadline := time.Now().Add(15 * time.Second)
	for {
		var out struct {
			Queues []struct {
				Queue     string `json:"queue"`
				Processed int    `json:"processed"`
			} `json:"queues"`
		}
		require.NoError(t, f.Client(1).Do(ctx, "GET", "/monitoring/api/queues", f.Token("ops", "admin", ""), nil, &out))
		masters, queues, total = map[string]int{}, 0, 0
		for _, q := range out.Queues {
			// release, release_1, … release_7; not release_maint or release_notify.
			if n, ok := strings.CutPrefix(q.Queue, "release_"); q.Queue != "release" && (!ok || !isNumber(n)) {
				continue
			}
			queues++
			master, _ := servingNodes(t, f, "asynq:{"+q.Queue+"}:pending")
			masters[master] += q.Processed
			total += q.Processed
		}
		if total > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("release queues by master, tasks processed today: %v", masters)
	require.Equal(t, 8, queues, "a cluster gets eight release queues")
	require.Len(t, masters, 3, "release queues on every master")
	require.Positive(t, total, "release tasks ran")
}

// rollingRestart restarts the instances one after the other with settings added; each one that
// starts after the others repairs Redis at start again, and serves.
func rollingRestart(t *testing.T, f *fleet.Fleet, settings ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, in := range f.Instances() {
		in.SetEnv(settings...)
		require.NoError(t, in.Restart(ctx))
	}
	require.NoError(t, f.Audit(ctx))
}

// wheelHolderKilled: the instance running the hold wheel is killed with -9 just before 30 holds,
// made through every instance, reach their deadlines; the others expire them within a second of it.
func wheelHolderKilled(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	const n = 30
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: n, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	holder := leaseHolder(t, f, "wheel")
	deadline := map[string]time.Time{}
	for i := range n {
		h, err := f.Client(i%3).Hold(ctx, f.Token(fmt.Sprintf("late-%d", i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
		require.NoError(t, err)
		at, err := time.Parse(time.RFC3339, h.ExpiresAt)
		require.NoError(t, err)
		deadline[h.HoldID] = at
	}
	earliest := slices.MinFunc(slices.Collect(maps.Values(deadline)), func(a, b time.Time) int { return a.Compare(b) })
	time.Sleep(time.Until(earliest.Add(-200 * time.Millisecond)))
	require.NoError(t, holder.Kill())
	killed := time.Now()

	expired := map[string]time.Time{}
	waitFor(t, time.Until(earliest)+10*time.Second, func() (bool, string) {
		rows, err := f.DB().QueryContext(ctx, "SELECT subject, created_at FROM outbox_events WHERE type = 'hold.expired' AND venue_id = ?",
			mustID(t, court.Venue.ID))
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var subject string
			var at time.Time
			require.NoError(t, rows.Scan(&subject, &at))
			expired[subject[len("hold:"):]] = at
		}
		require.NoError(t, rows.Err())
		return len(expired) == n, fmt.Sprintf("%d of %d holds expired", len(expired), n)
	})
	var worst time.Duration
	for id, at := range expired {
		lag := at.Sub(deadline[id])
		require.GreaterOrEqual(t, lag, time.Duration(0), "hold %s expired %v before its deadline", id, -lag)
		worst = max(worst, lag)
	}
	t.Logf("wheel holder %s killed %v before the first deadline; latest expiry %v after its deadline", holder.Name,
		earliest.Sub(killed).Round(time.Millisecond), worst.Round(time.Millisecond))
	require.LessOrEqual(t, worst, time.Second, "holds expire within a second of their deadline")

	restartCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, holder.Restart(restartCtx))
	require.NoError(t, f.AwaitAudit(ctx, 10*time.Second))
}

// killAndRestart: while users hold and pay through all three instances, one is killed with -9 and
// restarted. Every booking a 2xx confirmed is in MySQL, nothing is oversold or leaked, and every
// booking that fell due is released exactly once, never early.
func killAndRestart(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: 5000, GraceSeconds: 3, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	victim := f.Instance(2)
	repaired := victim.CountLines("counters reconciled; serving")
	tr := startTraffic(f, court, 6)
	time.Sleep(2 * time.Second)
	require.NoError(t, victim.Kill())
	time.Sleep(2 * time.Second)
	restartCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, victim.Restart(restartCtx))
	time.Sleep(2 * time.Second)
	rep := tr.stop()
	t.Logf("traffic: %s", rep)
	require.Positive(t, rep.booked, "bookings were made")
	require.Equal(t, repaired+1, victim.CountLines("counters reconciled; serving"),
		"the victim, restarted after the others, repaired Redis at start")
	awaitReleasesDue(t, f, court)
	require.NoError(t, f.AwaitAudit(ctx, 20*time.Second))
}

// masterFailover: while users hold and pay, the master that serves the venue fails over to its
// replica (redis-cli cluster failover). No confirmed booking and no release is lost.
func masterFailover(t *testing.T, f *fleet.Fleet, cluster *redistest.Cluster) {
	ctx := context.Background()
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: 5000, GraceSeconds: 3, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	master, replica := servingNodes(t, f, f.VenueKey(mustID(t, court.Venue.ID)))
	tr := startTraffic(f, court, 6)
	time.Sleep(3 * time.Second)
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	require.NoError(t, cluster.Failover(fctx, replica))
	t.Logf("failover of %s to %s took %v", master, replica, time.Since(began).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	rep := tr.stop()
	t.Logf("traffic: %s", rep)
	require.Positive(t, rep.booked, "bookings were made")
	require.Contains(t, cluster.Masters(), replica)
	awaitReleasesDue(t, f, court)
	require.NoError(t, f.AwaitAudit(ctx, 20*time.Second))
}

// crowd is workers that each repeat a user's visit until stopped, resting between visits for as
// long as the visit answers.
type crowd struct {
	done    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

func startCrowd(workers int, visit func() (rest time.Duration)) *crowd {
	c := &crowd{done: make(chan struct{})}
	for range workers {
		c.wg.Go(func() {
			for {
				select {
				case <-c.done:
					return
				default:
				}
				if rest := visit(); rest > 0 {
					select {
					case <-c.done:
						return
					case <-time.After(rest):
					}
				}
			}
		})
	}
	return c
}

// stop ends the visits and waits for those under way; calling it again does nothing more.
func (c *crowd) stop() {
	c.stopped.Do(func() { close(c.done) })
	c.wg.Wait()
}

// traffic is users holding and paying a court through every instance, each request to an instance
// picked in turn; failures (a killed instance, a failover) are counted, not fatal.
type traffic struct {
	*crowd
	mu     sync.Mutex
	rep    trafficReport
	nextID atomic.Int64
}

type trafficReport struct {
	holds, booked int
	failed        map[string]int
}

func (r trafficReport) String() string {
	return fmt.Sprintf("%d holds, %d booked, failures %v", r.holds, r.booked, r.failed)
}

func startTraffic(f *fleet.Fleet, court fleet.Court, workers int) *traffic {
	tr := &traffic{rep: trafficReport{failed: map[string]int{}}}
	prefix := testenv.Unique("u")
	tr.crowd = startCrowd(workers, func() time.Duration {
		i := int(tr.nextID.Add(1))
		rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		h, err := f.Client(i%3).Hold(rctx, f.Token(prefix+strconv.Itoa(i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
		if err == nil {
			tr.count(func(r *trafficReport) { r.holds++ })
			var p fleet.Payment
			p, err = f.Client(rand.IntN(3)).Pay(rctx, h, testenv.Unique("pay-"))
			if err == nil && p.Outcome == "booked" {
				tr.count(func(r *trafficReport) { r.booked++ })
			}
		}
		if err != nil {
			tr.count(func(r *trafficReport) { r.failed[failure(err)]++ })
			// A refused connection fails at once: do not spin on a dead instance.
			return 10 * time.Millisecond
		}
		return 0
	})
	return tr
}

func (tr *traffic) count(f func(*trafficReport)) {
	tr.mu.Lock()
	f(&tr.rep)
	tr.mu.Unlock()
}

func (tr *traffic) stop() trafficReport {
	tr.crowd.stop()
	return tr.rep
}

// failure names an error's kind for the report.
func failure(err error) string {
	var apiErr *fleet.APIError
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%d %s", apiErr.Status, apiErr.Code)
	}
	return "no answer"
}

// awaitReleasesDue waits until every booking of the court that fell due has had time to be released.
func awaitReleasesDue(t *testing.T, f *fleet.Fleet, court fleet.Court) {
	t.Helper()
	var last sql.NullTime
	require.NoError(t, f.DB().QueryRowContext(context.Background(), "SELECT MAX(release_at) FROM bookings WHERE resource_id = ?",
		mustID(t, court.Resource.ID)).Scan(&last))
	if last.Valid {
		require.Less(t, time.Until(last.Time), time.Minute, "a booking of the court falls due after the test stops waiting")
		time.Sleep(time.Until(last.Time.Add(2 * time.Second)))
	}
}

// servingNodes are the master that serves key's slot and one of its replicas.
func servingNodes(t *testing.T, f *fleet.Fleet, key string) (master, replica string) {
	t.Helper()
	ctx := context.Background()
	cc, ok := f.Redis().(*redis.ClusterClient)
	require.True(t, ok, "a cluster client")
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	shards, err := cc.ClusterShards(ctx).Result()
	require.NoError(t, err)
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		for _, n := range sh.Nodes {
			addr := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			switch {
			case n.Health != "online":
			case n.Role == "master":
				master = addr
			case replica == "":
				replica = addr
			}
		}
	}
	if master == "" || replica == "" {
		t.Fatalf("no master with a replica online serves slot %d", slot)
	}
	return master, replica
}

// leaseHolder finds the instance that runs a leased loop, asking again while the lease moves.
func leaseHolder(t *testing.T, f *fleet.Fleet, loop string) *fleet.Instance {
	t.Helper()
	var err error
	for range 5 {
		var in *fleet.Instance
		if in, err = f.LeaseHolder(context.Background(), loop, 500*time.Millisecond); err == nil {
			return in
		}
	}
	t.Fatalf("no single holder of %s: %v", loop, err)
	return nil
}

// releaseLags are released_at − release_at of the resource's bookings, by booking id.
func releaseLags(t *testing.T, db *sql.DB, resourceID uint64) map[uint64]time.Duration {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT id, release_at, released_at FROM bookings WHERE resource_id = ? AND released_at IS NOT NULL", resourceID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[uint64]time.Duration{}
	for rows.Next() {
		var id uint64
		var due, at time.Time
		require.NoError(t, rows.Scan(&id, &due, &at))
		out[id] = at.Sub(due)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireReleasedOnce checks that the status history has exactly one release of each of the n
// bookings of the resource.
func requireReleasedOnce(t *testing.T, db *sql.DB, resourceID uint64, n int) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT h.booking_id, COUNT(*) FROM booking_status_history h
		JOIN bookings b ON b.id = h.booking_id WHERE b.resource_id = ? AND h.to_status = 'RELEASED' GROUP BY h.booking_id`, resourceID)
	require.NoError(t, err)
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id uint64
		var releases int
		require.NoError(t, rows.Scan(&id, &releases))
		require.Equal(t, 1, releases, "booking %d released %d times", id, releases)
		seen++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, n, seen)
}

// waitFor polls done until it reports true or within has passed (no event announces what a
// background loop of another process did); what is the state to report on failure.
func waitFor(t *testing.T, within time.Duration, done func() (ok bool, what string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, what := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within.Round(time.Millisecond), what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

func mustID(t *testing.T, s string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return id
}
