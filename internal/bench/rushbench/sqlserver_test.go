package rushbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// TestSQLServer checks the plain SQL design's answers on the MySQL server of
// SLOTWHEEL_TEST_MYSQL_DSN: tokens, capacity, Idempotency-Key replays, and fifty clients racing for
// the last two units.
func TestSQLServer(t *testing.T) {
	dsn := os.Getenv(testenv.EnvMySQL)
	if dsn == "" {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not set", testenv.EnvRequire, testenv.EnvMySQL)
		}
		t.Skipf("the plain SQL design runs on MySQL only: set %s", testenv.EnvMySQL)
	}
	t.Parallel()
	ctx := context.Background()
	env := &Env{MySQLDSN: dsn}
	db, err := env.newDatabase(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.drop(context.Background())) })
	cfg := tiny()
	g, err := newGrid(cfg.Slots, time.Now())
	require.NoError(t, err)
	require.NoError(t, createSQLTables(ctx, db.dsn, cfg, g))

	addr, err := freeAddr()
	require.NoError(t, err)
	secret := []byte(randomName("", 32))
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- SQLServer{DSN: db.dsn, Addr: addr, JWTSecret: secret, Pool: models.Pool{MaxOpen: 8, MaxIdle: 8},
			Logger: slog.New(slog.DiscardHandler)}.Run(sctx)
	}()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-served)
	})
	sys := &system{base: "http://" + addr, grid: g, capacity: cfg.Capacity}
	sys.offer([]string{"1", "2"})
	hc := newHTTPClient(64, 10*time.Second)
	require.Eventually(t, func() bool { return doJSON(ctx, hc, http.MethodGet, sys.base+"/healthz", "", nil, nil) == nil },
		10*time.Second, 20*time.Millisecond)
	require.NoError(t, sys.browse(ctx, hc, Config{Conns: 4}), "every slot offered with its units")

	hold := func(user, key string, slot int) (int, string, http.Header) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sys.base+"/api/v1/holds", strings.NewReader(string(sys.targets[slot].body)))
		require.NoError(t, err)
		if user != "" {
			req.Header.Set("Authorization", "Bearer "+signToken(secret, user, "user", time.Now().Add(time.Minute)))
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header
	}

	status, _, _ := hold("", "", 0)
	require.Equal(t, http.StatusUnauthorized, status)
	status, first, _ := hold("alice", "k1", 0)
	require.Equal(t, http.StatusCreated, status, first)
	status, again, h := hold("alice", "k1", 0)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, first, again, "a repeated key answers the first answer")
	require.Equal(t, "true", h.Get("Idempotent-Replayed"))
	status, body, _ := hold("alice", "k1", 1)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "idempotency_key_reused")
	status, _, _ = hold("bob", "k1", 0)
	require.Equal(t, http.StatusCreated, status, "keys are per caller")
	status, body, _ = hold("carol", "", 0)
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, `"code":"slot_full"`)

	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if status, _, _ := hold(fmt.Sprintf("racer-%d", i), randomName("", 16), 1); status == http.StatusCreated {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(2), won.Load(), "exactly the last two units are sold")

	ch, err := sqlCheck(ctx, db.dsn)
	require.NoError(t, err)
	require.Equal(t, 4, ch.Taken)
	require.Zero(t, ch.OversoldUnits)
	require.Error(t, sys.look(ctx, hc, 0, true), "slot 0 is sold out")
}
