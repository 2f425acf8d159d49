package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/mariadbtest"
)

// BenchmarkReadRoutes measures what one replica takes off the primary: the read routes of issue 21
// (a user's own list, a booking's history, the front desk's list) under the same load, from two
// instances of the binary on one database of a private primary and replica, one without replicas
// and one with the replica. An op is one round of the three reads; 8 clients send rounds at once.
// primary-q/op is the primary's Questions (every statement it was sent, by anyone, the instances'
// background loops included) per round; primary-q/s the same per second.
//
//	SLOTWHEEL_TEST_MYSQL_DSN=... SLOTWHEEL_TEST_REDIS_URL=... \
//	go test ./e2e/ -run '^$' -bench BenchmarkReadRoutes -benchtime 2000x -count 1
func BenchmarkReadRoutes(b *testing.B) {
	if testing.Short() {
		b.Skip("runs two instances of the binary")
	}
	primary, replica := mariadbtest.StartPair(b)
	dsn := fleet.NewDatabase(b, primary.DSN(""))
	replica.CaughtUp(primary)
	f := fleet.Start(b, fleet.Options{Instances: 2, MySQLDSN: dsn})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	withReplica := f.Instance(1)
	withReplica.SetEnv("SLOTWHEEL_MYSQL_REPLICA_DSNS=" + fleet.Via(dsn, replica.Addr()))
	if err := withReplica.Restart(ctx); err != nil {
		b.Fatal(err)
	}

	// Each of 10 users books 5 units of one court through the instance without replicas, so that
	// the other has no write of theirs to read back from the primary.
	c := f.Client(0)
	court, err := c.NewCourt(ctx, fleet.CourtSpec{Capacity: 100})
	if err != nil {
		b.Fatal(err)
	}
	type user struct{ token, booking string }
	users := make([]user, 10)
	for i := range users {
		users[i].token = f.Token(fmt.Sprintf("reader-%d", i), "user", "")
		for range 5 {
			h, err := c.Hold(ctx, users[i].token, court.Resource.ID, court.Start, court.End, 1)
			if err != nil {
				b.Fatal(err)
			}
			bk, err := c.Confirm(ctx, users[i].token, h.HoldID)
			if err != nil {
				b.Fatal(err)
			}
			users[i].booking = bk.BookingID
		}
	}
	replica.CaughtUp(primary)
	staff := f.Token("bench-desk", "staff", court.Venue.ID)

	for _, run := range []struct {
		name string
		in   int
	}{{"primary-only", 0}, {"one-replica", 1}} {
		b.Run(run.name, func(b *testing.B) {
			c := f.Client(run.in)
			round := func(u user) error {
				for _, q := range []struct{ path, token string }{
					{"/api/v1/bookings", u.token},
					{"/api/v1/bookings/" + u.booking + "/history", u.token},
					{"/api/v1/admin/bookings?venue_id=" + court.Venue.ID, staff},
				} {
					if err := c.Do(ctx, http.MethodGet, q.path, q.token, nil, nil); err != nil {
						return err
					}
				}
				return nil
			}
			questions, selects := primary.Status("Questions"), replica.Status("Com_select")
			began := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var firstErr error
			next := make(chan int)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						if err := round(users[i%len(users)]); err != nil {
							mu.Lock()
							firstErr = err
							mu.Unlock()
						}
					}
				}()
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			elapsed := time.Since(began).Seconds()
			q := float64(primary.Status("Questions") - questions)
			b.ReportMetric(q/float64(b.N), "primary-q/op")
			b.ReportMetric(q/elapsed, "primary-q/s")
			b.ReportMetric(float64(replica.Status("Com_select")-selects)/float64(b.N), "replica-selects/op")
			b.ReportMetric(float64(b.N)/elapsed, "rounds/s")
		})
	}
}
