package fleet

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
)

func TestMain(m *testing.M) { Main(m) }

func needMySQL(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	if os.Getenv(testenv.EnvMySQL) == "" {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not set", testenv.EnvRequire, testenv.EnvMySQL)
		}
		t.Skipf("instances need a MySQL server (%s)", testenv.EnvMySQL)
	}
}

// Audit passes on a sound fleet and names each broken invariant: a counter that disagrees with its
// owners, a confirmed booking missing from MySQL, a release that never came.
func TestAuditFindsWhatIsWrong(t *testing.T) {
	needMySQL(t)
	t.Parallel()
	f := Start(t, Options{})
	ctx := context.Background()
	c := f.Client(0)
	court, err := c.NewCourt(ctx, CourtSpec{Capacity: 2, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	h, err := c.Hold(ctx, f.Token("alice", "user", ""), court.Resource.ID, court.Start, court.End, 1)
	require.NoError(t, err)
	p, err := c.Pay(ctx, h, testenv.Unique("pay-"))
	require.NoError(t, err)
	require.Equal(t, "booked", p.Outcome)
	require.NoError(t, f.Audit(ctx))

	var venue, resource uint64
	require.NoError(t, f.DB().QueryRowContext(ctx, "SELECT venue_id, resource_id FROM bookings WHERE id = ?", p.Booking.BookingID).
		Scan(&venue, &resource))
	used := redisstore.NewKeys(f.Prefix()).Venue(venue).Used()
	field := redisstore.SlotField(resource, court.Start.Unix()/60)
	require.NoError(t, f.Redis().HIncrBy(ctx, used, field, 1).Err())
	require.ErrorContains(t, f.Audit(ctx), "counter is 2 but its owners hold 1")
	require.NoError(t, f.Redis().HIncrBy(ctx, used, field, -1).Err())

	// MySQL's capacity ledger must count what its bookings take.
	_, err = f.DB().ExecContext(ctx, "UPDATE slot_inventories SET occupied = occupied + 1 WHERE resource_id = ? AND start = ?", resource,
		court.Start)
	require.NoError(t, err)
	require.ErrorContains(t, f.Audit(ctx), "the capacity ledger counts 2 units, its occupying bookings take 1")
	_, err = f.DB().ExecContext(ctx, "UPDATE slot_inventories SET occupied = occupied - 1 WHERE resource_id = ? AND start = ?", resource,
		court.Start)
	require.NoError(t, err)

	f.recordConfirmed(Confirmed{BookingID: "999999", HoldID: "h1_x", Via: "test"})
	require.ErrorContains(t, f.Audit(ctx), "booking 999999 was confirmed by test (hold h1_x) but is not in MySQL")
	f.mu.Lock()
	f.ledger = f.ledger[:len(f.ledger)-1]
	f.mu.Unlock()

	// With no instance left to release it, a booking long due stays CONFIRMED.
	require.NoError(t, f.Instance(0).Term())
	_, err = f.DB().ExecContext(ctx, "UPDATE bookings SET release_at = ? WHERE id = ?", time.Now().Add(-time.Minute), p.Booking.BookingID)
	require.NoError(t, err)
	require.ErrorContains(t, f.Audit(ctx), "booking "+p.Booking.BookingID+" is still CONFIRMED")
}

// An instance may reach MySQL through a faultproxy: while the proxy swallows everything, that
// instance is not ready and the others are; once it forwards again, the instance recovers.
func TestInstanceThroughAFaultProxy(t *testing.T) {
	needMySQL(t)
	t.Parallel()
	f := Start(t, Options{})
	proxy := faultproxy.New(t, mysqlAddr(t, f.DSN()))
	via := f.Add(InstanceOptions{MySQLDSN: Via(f.DSN(), proxy.Addr())})
	ctx := context.Background()

	proxy.Blackhole(true)
	proxy.CutAll()
	deadline := time.Now().Add(30 * time.Second)
	for ready(ctx, via) {
		require.True(t, time.Now().Before(deadline), "%s still ready with its MySQL blackholed", via.Name)
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, ready(ctx, f.Instance(0)), "the instance with its own path to MySQL stays ready")

	proxy.Blackhole(false)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, via.WaitReady(rctx))
}

func ready(ctx context.Context, in *Instance) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return in.Client().Do(rctx, http.MethodGet, "/readyz", "", nil, nil) == nil
}

func mysqlAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	return cfg.Addr
}

// Courts made with NewCourtsAt share their venue's slot; a Receiver gets, signed, every event of its
// types, and names none missing; SumMetric adds up the instances' counters.
func TestCourtsAtReceiverAndMetrics(t *testing.T) {
	needMySQL(t)
	t.Parallel()
	f := Start(t, Options{Instances: 2})
	ctx := context.Background()
	rx, err := f.NewReceiver(ctx, "booking.confirmed")
	require.NoError(t, err)
	c := f.Client(0)
	first, err := c.NewCourt(ctx, CourtSpec{Capacity: 2, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	more, err := c.NewCourtsAt(ctx, first, CourtSpec{Capacity: 3}, CourtSpec{Capacity: 4, GraceSeconds: 60})
	require.NoError(t, err)
	require.Len(t, more, 2)
	for _, ct := range more {
		require.Equal(t, first.Venue, ct.Venue)
		require.Equal(t, first.Start, ct.Start)
		require.NotEqual(t, first.Resource.ID, ct.Resource.ID)
	}

	for i, ct := range append(more, first) {
		h, err := f.Client(i%2).Hold(ctx, f.Token("alice", "user", ""), ct.Resource.ID, ct.Start, ct.End, 1)
		require.NoError(t, err)
		_, err = f.Client(i%2).Pay(ctx, h, testenv.Unique("pay-"))
		require.NoError(t, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing, err := rx.Missing(ctx)
		require.NoError(t, err)
		if len(missing) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not delivered: %v", missing)
		time.Sleep(100 * time.Millisecond)
	}
	events, _ := rx.Received()
	require.Equal(t, 3, events, "the receiver gets only the types it asked for")
	require.Empty(t, rx.Rejected())

	booked, err := f.SumMetric(ctx, "slotwheel_confirms_total", map[string]string{"outcome": "booked"})
	require.NoError(t, err)
	require.EqualValues(t, 3, booked)
	require.NoError(t, f.Audit(ctx))
}
