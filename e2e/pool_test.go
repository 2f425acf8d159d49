package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/mariadbtest"
	"github.com/slotwheel/slotwheel/models"
)

// Three instances with the default pools share one MariaDB whose max_connections is 151 (the
// default): 300 payments confirmed at once all succeed, none meets error 1040 (too many
// connections), and the server never had more connections than the pools allow. A pool that could
// not fit the server at all is refused at start, naming its setting.
func TestThreeInstancesShareOneMariaDB(t *testing.T) {
	needServers(t)
	t.Parallel()
	srv := mariadbtest.Start(t)
	ctx := context.Background()
	root, err := sql.Open("mysql", srv.DSN(""))
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	var limit int
	require.NoError(t, root.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&limit))
	require.Equal(t, 151, limit)

	f := fleet.Start(t, fleet.Options{Instances: 3, MySQLDSN: fleet.NewDatabase(t, srv.DSN(""))})

	bad := f.Launch(fleet.InstanceOptions{Env: []string{"SLOTWHEEL_MYSQL_MAX_OPEN_CONNS=151"}})
	select {
	case <-bad.Exited():
		require.Error(t, bad.ExitErr(), "a pool as large as max_connections is refused")
		require.Contains(t, bad.Logs(), "SLOTWHEEL_MYSQL_MAX_OPEN_CONNS: 151 connections (and 4 of the release path's own) cannot fit the server's max_connections of 151")
	case <-time.After(time.Minute):
		t.Fatal("an instance with an impossible pool started")
	}

	const n = 300
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: n, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	holds := make([]fleetHold, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				c := f.Client(i % 3)
				h, err := c.Hold(ctx, f.Token(fmt.Sprintf("payer-%d", i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
				holds[i] = fleetHold{h: h, err: err}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, h := range holds {
		require.NoError(t, h.err)
	}

	// All at once, spread over the instances.
	gate := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-gate
			p, err := f.Client(i%3).Pay(ctx, holds[i].h, testenv.Unique("pay-"))
			if err == nil && p.Outcome != "booked" {
				err = fmt.Errorf("outcome %s", p.Outcome)
			}
			errs[i] = err
		})
	}
	close(gate)
	wg.Wait()
	require.NoError(t, errors.Join(errs...), "every racing confirm succeeds")
	for _, in := range f.Instances() {
		for _, s := range []string{"Error 1040", "Too many connections"} {
			require.Zero(t, in.CountLines(s), "%s logged %q:\n%s", in.Name, s, grep(in.Logs(), s))
		}
	}
	var name string
	var peak int
	require.NoError(t, root.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Max_used_connections'").Scan(&name, &peak))
	t.Logf("300 racing confirms on 3 instances: server's Max_used_connections %d of %d", peak, limit)
	// The instances' pools (each with the release path's own), and a few of the test's own
	// connections beside them.
	require.LessOrEqual(t, peak, 3*(models.DefaultMaxOpen+models.ReleaseConns)+10)
	require.Len(t, f.Confirmed(), n)
	require.NoError(t, f.Audit(ctx))
}

type fleetHold struct {
	h   wire.Hold
	err error
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
