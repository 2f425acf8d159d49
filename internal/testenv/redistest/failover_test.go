package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv/proc"
)

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A write the primary acknowledged while its replica was paused is gone once the primary dies and
// the replica is promoted; what the replica had before the pause is kept.
func TestReplicatedPromotionLosesWritesMadeWhileReplicaPaused(t *testing.T) {
	t.Parallel()
	pair := StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	primary, replica := client(t, pair.Primary().Addr()), client(t, pair.Replica().Addr())

	require.NoError(t, primary.Set(ctx, "before", "1", 0).Err())
	require.NoError(t, pair.WaitInSync(ctx))
	require.Equal(t, "1", replica.Get(ctx, "before").Val(), "the replica has what came before the pause")

	pair.PauseReplica()
	require.NoError(t, primary.Set(ctx, "during", "1", 0).Err(), "the primary acknowledges without the replica")
	waitCtx, waitCancel := context.WithTimeout(ctx, 300*time.Millisecond)
	require.Error(t, pair.WaitInSync(waitCtx), "a paused replica acknowledges nothing")
	waitCancel()

	pair.KillPrimary()
	require.False(t, pair.Primary().Running())
	pair.ResumeReplica()
	require.NoError(t, pair.PromoteReplica(ctx))
	require.True(t, isMaster(ctx, replica))

	require.Equal(t, "1", replica.Get(ctx, "before").Val())
	require.ErrorIs(t, replica.Get(ctx, "during").Err(), redis.Nil, "the acknowledged write is lost")
	require.NoError(t, replica.Set(ctx, "after", "1", 0).Err(), "the promoted replica takes writes")
}

// A server of another test that comes up as a replica of this pair's primary (its own primary's
// port was reused) is refused: the pair replicates as a user of its own.
func TestStrayReplicaCannotAttach(t *testing.T) {
	t.Parallel()
	pair := StartReplicated(t)
	stray := startServer(t, func(port int, dir string) ([]string, error) {
		return serverArgs(port, dir, "--replicaof", "127.0.0.1", strconv.Itoa(pair.Primary().port)), nil
	})
	require.Eventually(t, func() bool {
		return strings.Contains(proc.ReadFrom(stray.logPath(), 0), "NOPERM")
	}, 10*time.Second, 20*time.Millisecond, "the primary refuses the stray replica's PSYNC")
	info, err := client(t, pair.Primary().Addr()).Info(context.Background(), "replication").Result()
	require.NoError(t, err)
	require.Contains(t, info, "connected_slaves:1", "only the pair's replica is attached")
	require.Contains(t, info, "port="+strconv.Itoa(pair.Replica().port))
}

// A paused replica resumed while its primary lives catches up with what it missed.
func TestReplicatedResumeCatchesUp(t *testing.T) {
	t.Parallel()
	pair := StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	primary, replica := client(t, pair.Primary().Addr()), client(t, pair.Replica().Addr())
	pair.PauseReplica()
	require.NoError(t, primary.Set(ctx, "during", "1", 0).Err())
	pair.ResumeReplica()
	require.NoError(t, pair.WaitInSync(ctx))
	require.Equal(t, "1", replica.Get(ctx, "during").Val())
}

// Sentinel promotes the replica when the primary dies, even one that was paused meanwhile (long
// enough for the sentinels to find it down too) and so lacks the primary's last acknowledged
// writes.
func TestSentinelPromotesReplicaThatMissedWrites(t *testing.T) {
	t.Parallel()
	pair := StartReplicated(t)
	sentinel := StartSentinel(t, pair)
	require.Len(t, sentinel.Addrs(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	master, err := sentinel.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, pair.Primary().Addr(), master)

	primary := client(t, pair.Primary().Addr())
	require.NoError(t, primary.Set(ctx, "before", "1", 0).Err())
	require.NoError(t, pair.WaitInSync(ctx))
	pair.PauseReplica()
	require.NoError(t, primary.Set(ctx, "during", "1", 0).Err())
	s := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addrs()[0]})
	defer func() { _ = s.Close() }()
	require.Eventually(t, func() bool {
		replicas, err := s.Replicas(ctx, sentinel.MasterName()).Result()
		return err == nil && len(replicas) == 1 && strings.Contains(replicas[0]["flags"], "s_down")
	}, 10*time.Second, 50*time.Millisecond, "the sentinels find the paused replica down")
	pair.KillPrimary()
	killed := time.Now()
	pair.ResumeReplica()

	promoted, err := sentinel.WaitForNewMaster(ctx, master)
	require.NoError(t, err)
	t.Logf("sentinel promoted %s %v after the primary died", promoted, time.Since(killed).Round(time.Millisecond))
	require.Equal(t, pair.Replica().Addr(), promoted)
	replica := client(t, promoted)
	require.Equal(t, "1", replica.Get(ctx, "before").Val())
	require.ErrorIs(t, replica.Get(ctx, "during").Err(), redis.Nil, "the promoted replica lacks the last write")
	require.NoError(t, replica.Set(ctx, "after", "1", 0).Err())
}

// A master killed outright has its slots taken over by its replica at once with TAKEOVER, and a
// client that reloads the topology finds every key of those slots there.
func TestClusterKillMasterAndTakeover(t *testing.T) {
	cl := StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := cl.Client()
	for i := range 100 {
		require.NoError(t, client.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err())
	}
	// WAIT on each master: the replica has every key before its master dies.
	require.NoError(t, client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Do(ctx, "WAIT", 1, 5000).Err()
	}))

	victim := cl.Masters()[0]
	replica := cl.ReplicaOf(victim)
	cl.KillNode(victim)
	require.NotContains(t, cl.Masters(), victim, "a killed node is not listed")
	began := time.Now()
	require.NoError(t, cl.Takeover(ctx, replica))
	t.Logf("takeover by %s done in %v", replica, time.Since(began).Round(time.Millisecond))
	require.Contains(t, cl.Masters(), replica)
	require.Len(t, cl.Masters(), 3)

	client.ReloadState(ctx)
	require.Eventually(t, func() bool {
		for i := range 100 {
			if got, err := client.Get(ctx, fmt.Sprintf("key:%d", i)).Int(); err != nil || got != i {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "every key is served again")
}

// A replica whose replication was paused lacks what its master acknowledged meanwhile: once the
// master is killed and the replica takes its slots over, those writes are gone, and what came
// before the pause is kept.
func TestClusterTakeoverByPausedReplicaLosesWrites(t *testing.T) {
	cl := StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := cl.Client()
	require.NoError(t, client.Set(ctx, "{k}before", "1", 0).Err())
	master, err := client.MasterForKey(ctx, "{k}before")
	require.NoError(t, err)
	victim := master.Options().Addr
	require.NoError(t, master.Do(ctx, "WAIT", 1, 5000).Err())
	replica := cl.ReplicaOf(victim)

	cl.PauseReplica(replica)
	require.NoError(t, client.Set(ctx, "{k}during", "1", 0).Err(), "the master acknowledges without its replica")
	require.Equal(t, int64(0), master.Do(ctx, "WAIT", 1, 300).Val(), "a paused replica acknowledges nothing")
	asked := time.Now()
	require.Contains(t, cl.Replicas(), replica, "the other nodes still list it")
	require.Less(t, time.Since(asked), time.Second, "a paused node is not asked (it would answer nothing)")
	cl.KillNode(victim)
	cl.ResumeNode(replica)
	require.NoError(t, cl.Takeover(ctx, replica))
	require.Contains(t, cl.Masters(), replica)

	client.ReloadState(ctx)
	require.Eventually(t, func() bool { return client.Get(ctx, "{k}before").Val() == "1" }, 10*time.Second, 50*time.Millisecond)
	require.ErrorIs(t, client.Get(ctx, "{k}during").Err(), redis.Nil, "the acknowledged write is lost")
}

// After a promotion, Rejoin makes the dead primary a replica of the promoted one, empty and then in
// sync, and the pair can fail over again, losing again what the paused replica missed.
func TestReplicatedRejoinFailsOverAgain(t *testing.T) {
	t.Parallel()
	pair := StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, second := pair.Primary(), pair.Replica()
	pair.PauseReplica()
	pair.KillPrimary()
	pair.ResumeReplica()
	require.NoError(t, pair.PromoteReplica(ctx))

	require.NoError(t, pair.Rejoin(ctx))
	require.Same(t, second, pair.Primary(), "the promoted server is the primary")
	require.Same(t, first, pair.Replica(), "the restarted one its replica")
	primary := client(t, pair.Primary().Addr())
	require.NoError(t, primary.Set(ctx, "before", "1", 0).Err())
	require.NoError(t, pair.WaitInSync(ctx))
	pair.PauseReplica()
	require.NoError(t, primary.Set(ctx, "during", "1", 0).Err())
	pair.KillPrimary()
	pair.ResumeReplica()
	require.NoError(t, pair.PromoteReplica(ctx))
	replica := client(t, first.Addr())
	require.Equal(t, "1", replica.Get(ctx, "before").Val())
	require.ErrorIs(t, replica.Get(ctx, "during").Err(), redis.Nil)
}
