package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestServerKillAndRestart(t *testing.T) {
	s := StartServer(t)
	opts, err := redis.ParseURL(s.URL())
	require.NoError(t, err)
	c := redis.NewClient(opts)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	s.Kill()
	require.False(t, s.Running())
	require.Error(t, c.Ping(ctx).Err(), "a killed server does not answer")

	s.Restart()
	require.True(t, s.Running())
	require.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "a restarted server is empty")
	require.NoError(t, c.Set(ctx, "k", "again", 0).Err())
}

func TestClusterServesAllMastersAndSurvivesFailover(t *testing.T) {
	cl := StartCluster(t)
	require.Len(t, cl.Masters(), 3)
	require.Len(t, cl.Replicas(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	client := cl.Client()
	const keys = 100
	for i := range keys {
		require.NoError(t, client.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err())
	}
	var withKeys atomic.Int32
	require.NoError(t, client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			withKeys.Add(1)
		}
		return err
	}))
	require.Equal(t, int32(3), withKeys.Load(), "the keys land in all three masters' slots")

	replica := cl.Replicas()[0]
	require.NoError(t, cl.Failover(ctx, replica))
	require.Contains(t, cl.Masters(), replica)
	require.Len(t, cl.Masters(), 3, "the old master became a replica")

	// The same client follows the MOVED answers to the new master.
	for i := range keys {
		got, err := client.Get(ctx, fmt.Sprintf("key:%d", i)).Int()
		require.NoError(t, err, "key:%d", i)
		require.Equal(t, i, got)
	}
	require.NoError(t, client.Set(ctx, "after", "failover", 0).Err())
}

func TestClusterStopLeavesNothing(t *testing.T) {
	cl := StartCluster(t)
	require.NotEmpty(t, ourRedisServers(t, cl.Addrs()))
	cl.Stop()
	require.Empty(t, ourRedisServers(t, cl.Addrs()), "no redis-server of the cluster is left")
	for _, addr := range cl.Addrs() {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, "%s still listens", addr)
	}
	_, err := os.Stat(cl.dir)
	require.ErrorIs(t, err, os.ErrNotExist, "stop removes the cluster's directory")
	cl.Stop() // idempotent: the test's cleanup calls it again
}

// ourRedisServers lists the live processes whose title names one of addrs: redis-server sets its
// title to "redis-server 127.0.0.1:PORT [cluster]". A zombie has no command line and is not listed.
func ourRedisServers(t *testing.T, addrs []string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var found []string
	for _, path := range cmdlines {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if !strings.Contains(cmd, "redis-server") {
			continue
		}
		for _, addr := range addrs {
			if strings.Contains(cmd, addr+" ") || strings.HasSuffix(strings.TrimSpace(cmd), addr) {
				found = append(found, filepath.Base(filepath.Dir(path))+": "+cmd)
			}
		}
	}
	return found
}

// A test binary that dies without running its cleanups (a -timeout panic, a crash, os.Exit) must
// not leave its servers behind: run this test again in a child that starts a server, a cluster, a
// replicated pair and its sentinels, one of them paused, and exits at once, then check that all went
// with it.
func TestServersDieWithTheTestBinary(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		s := StartServer(t)
		cl := StartCluster(t)
		pair := StartReplicated(t)
		sentinel := StartSentinel(t, pair)
		pair.PauseReplica()
		addrs := append([]string{s.Addr(), pair.Primary().Addr(), pair.Replica().Addr()}, cl.Addrs()...)
		fmt.Printf("ADDRS=%s\n", strings.Join(append(addrs, sentinel.Addrs()...), ","))
		os.Exit(3)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServersDieWithTheTestBinary$")
	// The child cannot remove its temporary directories: have it make them in ours.
	cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "err %v, output: %s", err, out)
	require.Equal(t, 3, exit.ExitCode(), "output: %s", out)
	_, list, ok := strings.Cut(strings.TrimSpace(string(out)), "ADDRS=")
	require.True(t, ok, "output: %s", out)
	addrs := strings.Split(list, ",")
	require.Len(t, addrs, 12)
	require.Eventually(t, func() bool {
		for _, addr := range addrs {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				_ = c.Close()
				return false
			}
		}
		return len(ourRedisServers(t, addrs)) == 0
	}, 30*time.Second, 50*time.Millisecond, "servers outlived their test binary: %v", addrs)
}

func TestParseClusterNodes(t *testing.T) {
	nodes, err := parseClusterNodes("" +
		"c49b 127.0.0.1:12104@22104 slave e5e1 0 1796233564118 2 connected\n" +
		"e5e1 127.0.0.1:12102@22102,host myself,master - 0 1796233564118 2 connected 5461-10922\n")
	require.NoError(t, err)
	require.Equal(t, []clusterNode{
		{id: "c49b", addr: "127.0.0.1:12104", flags: []string{"slave"}, master: "e5e1"},
		{id: "e5e1", addr: "127.0.0.1:12102", flags: []string{"myself", "master"}, master: "-", slots: true},
	}, nodes)
	_, err = parseClusterNodes("garbage\n")
	require.Error(t, err)
}
