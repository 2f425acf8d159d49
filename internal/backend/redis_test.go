package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// followBound is how soon after a failover commands must succeed again through the same client.
const followBound = 5 * time.Second

func TestIsNetworkError(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "x"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", fmt.Errorf("wrapped: %w", refused), true},
		{"connection refused", syscall.ECONNREFUSED, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"closed pool", redis.ErrClosed, true},
		{"cluster down", errors.New("CLUSTERDOWN The cluster is down"), true},
		{"nil reply", redis.Nil, false},
		{"script error", errors.New("ERR Error running script"), false},
		{"caller canceled", context.Canceled, false},
		{"dial canceled by the caller", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, isNetworkError(tt.err))
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// A master killed outright, its slots taken over by its replica: commands for those slots succeed
// through the engine's client, and Asynq's, within followBound of the takeover. go-redis alone would
// keep dialling the dead master until its periodic reload, a minute later.
func TestClusterClientFollowsTakeover(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, err := OpenRedis(ctx, RedisOptions{URL: cl.URL(), Cluster: true, StartTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	cc, ok := rdb.Client.(*redis.ClusterClient)
	require.True(t, ok, "a cluster client, which engine code type-asserts for ForEachMaster")

	// Asynq and the dashboard take the option as they take asynq.RedisClusterClientOpt.
	_, ok = rdb.Asynq.(ClusterConnOpt)
	require.True(t, ok)
	inspector := asynq.NewInspector(rdb.Asynq)
	defer func() { _ = inspector.Close() }()
	_, err = inspector.Queues()
	require.NoError(t, err)
	require.NotNil(t, asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: rdb.Asynq}))
	queueClient := asynq.NewClient(rdb.Asynq)
	defer func() { _ = queueClient.Close() }()
	// A client that only sends pipelines, whose failures go through the pipeline hook alone.
	popt, err := redis.ParseClusterURL(cl.URL())
	require.NoError(t, err)
	piped := NewClusterClient(popt)
	defer func() { _ = piped.Close() }()

	victim := cl.Masters()[0]
	var keys []string
	for i := 0; len(keys) < 20; i++ {
		key := fmt.Sprintf("k:%d", i)
		require.NoError(t, cc.Set(ctx, key, "before", 0).Err())
		if m, err := cc.MasterForKey(ctx, key); err == nil && m.Options().Addr == victim {
			keys = append(keys, key)
		}
	}
	queue := ""
	for i := 0; queue == ""; i++ {
		q := fmt.Sprintf("q%d", i)
		if m, err := cc.MasterForKey(ctx, "asynq:{"+q+"}:pending"); err == nil && m.Options().Addr == victim {
			queue = q
		}
	}
	_, err = queueClient.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue(queue))
	require.NoError(t, err)
	setAll := func(c redis.Cmdable) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, key := range keys {
					p.Set(ctx, key, "piped", 0)
				}
				return nil
			})
			return err
		}
	}
	require.NoError(t, setAll(piped)(ctx))

	replica := cl.ReplicaOf(victim)
	cl.KillNode(victim)
	began := time.Now()
	require.NoError(t, cl.Takeover(ctx, replica))
	t.Logf("replica %s took over %s's slots in %v", replica, victim, time.Since(began).Round(time.Millisecond))

	pollUntil(t, began, func(ctx context.Context) error {
		for _, key := range keys {
			if err := cc.Set(ctx, key, "after", 0).Err(); err != nil {
				return fmt.Errorf("SET %s: %w", key, err)
			}
		}
		return nil
	})
	t.Logf("the engine's client wrote every key of the dead master's slots %v after the takeover began",
		time.Since(began).Round(time.Millisecond))
	pollUntil(t, began, func(ctx context.Context) error {
		_, err := queueClient.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue(queue))
		return err
	})
	t.Logf("Asynq enqueued to a queue of the dead master's slots %v after the takeover began",
		time.Since(began).Round(time.Millisecond))
	pollUntil(t, began, setAll(piped))
	t.Logf("a pipeline wrote every key of the dead master's slots %v after the takeover began",
		time.Since(began).Round(time.Millisecond))
	n, err := cc.LLen(ctx, "asynq:{"+queue+"}:pending").Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(1), "the promoted replica serves the queue")
}

// pollUntil runs try, each time with a second of its own, until it succeeds, and fails the test if
// that is not within followBound of began.
func pollUntil(t *testing.T, began time.Time, try func(ctx context.Context) error) {
	t.Helper()
	var err error
	for time.Since(began) < followBound {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = try(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("still failing %v after the failover began: %v", followBound, err)
}

// Through Sentinel, the client opened at start keeps working when the primary dies: within
// followBound of Sentinel's promotion it writes to the promoted replica, in the database the URL
// names, and so does Asynq's.
func TestSentinelClientFollowsFailover(t *testing.T) {
	pair := redistest.StartReplicated(t)
	sentinel := redistest.StartSentinel(t, pair)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("a silent sentinel does not hide the others", func(t *testing.T) {
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer func() { _ = silent.Close() }()
		rdb, err := OpenRedis(ctx, RedisOptions{SentinelMaster: sentinel.MasterName(),
			SentinelAddrs: append([]string{silent.Addr().String()}, sentinel.Addrs()...), StartTimeout: 10 * time.Second})
		require.NoError(t, err)
		rdb.Close()
	})

	t.Run("a master the sentinels do not know", func(t *testing.T) {
		_, err := OpenRedis(ctx, RedisOptions{SentinelMaster: "nope", SentinelAddrs: sentinel.Addrs(), StartTimeout: time.Second})
		require.Error(t, err)
		require.Contains(t, err.Error(), "SLOTWHEEL_REDIS_SENTINEL_MASTER")
		require.Contains(t, err.Error(), `knows no master named "nope"`)
	})

	rdb, err := OpenRedis(ctx, RedisOptions{URL: "redis:///3", SentinelMaster: sentinel.MasterName(),
		SentinelAddrs: sentinel.Addrs(), StartTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	require.False(t, rdb.Embedded())
	_, ok := rdb.Asynq.(asynq.RedisFailoverClientOpt)
	require.True(t, ok)
	require.NotNil(t, asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: rdb.Asynq}))
	queue := asynq.NewClient(rdb.Asynq)
	defer func() { _ = queue.Close() }()
	_, err = queue.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue("q"))
	require.NoError(t, err)

	require.NoError(t, rdb.Client.Set(ctx, "k", "before", 0).Err())
	direct := redis.NewClient(&redis.Options{Addr: pair.Primary().Addr(), DB: 3})
	require.Equal(t, "before", direct.Get(ctx, "k").Val(), "the URL's database is used")
	_ = direct.Close()
	require.NoError(t, pair.WaitInSync(ctx))

	pair.KillPrimary()
	promoted, err := sentinel.WaitForNewMaster(ctx, pair.Primary().Addr())
	require.NoError(t, err)
	began := time.Now()
	pollUntil(t, began, func(ctx context.Context) error { return rdb.Client.Set(ctx, "k", "after", 0).Err() })
	t.Logf("the engine's client wrote %v after Sentinel promoted %s", time.Since(began).Round(time.Millisecond), promoted)
	pollUntil(t, began, func(ctx context.Context) error {
		_, err := queue.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue("q"))
		return err
	})
	direct = redis.NewClient(&redis.Options{Addr: promoted, DB: 3})
	defer func() { _ = direct.Close() }()
	require.Equal(t, "after", direct.Get(ctx, "k").Val(), "the write went to the promoted replica")
}

// Sentinels that cannot be reached, refusing or silent, end the start within its timeout, naming
// the setting.
func TestOpenRedisSentinelUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := ln.Addr().String()
	require.NoError(t, ln.Close())
	// A listener that accepts (the kernel does, into its backlog) and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = silent.Close() }()

	for _, addrs := range [][]string{{refusing}, {silent.Addr().String()}, {refusing, silent.Addr().String()}} {
		began := time.Now()
		_, err = OpenRedis(context.Background(), RedisOptions{SentinelMaster: "slotwheel", SentinelAddrs: addrs,
			StartTimeout: time.Second})
		require.Error(t, err)
		require.Less(t, time.Since(began), 3*time.Second, "%v", addrs)
		require.True(t, strings.HasPrefix(err.Error(), "SLOTWHEEL_REDIS_SENTINEL_ADDRS: "), err.Error())
		require.Contains(t, err.Error(), "within 1s")
	}
}

func TestOpenRedisSentinelSettingsTogether(t *testing.T) {
	t.Parallel()
	_, err := OpenRedis(context.Background(), RedisOptions{SentinelAddrs: []string{"127.0.0.1:1"}})
	require.ErrorContains(t, err, "must be set together")
	_, err = OpenRedis(context.Background(), RedisOptions{SentinelMaster: "m", SentinelAddrs: []string{"127.0.0.1:1"}, Cluster: true})
	require.ErrorContains(t, err, "exclusive")
}
