package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated is a primary and one replica of it (replicaof), both private servers without
// persistence. Replication in Redis is asynchronous: the primary acknowledges a write before the
// replica has it, and PauseReplica widens that gap at will, so that a test can promote a replica
// that lacks writes the primary acknowledged, as a real failover may. Its methods report failures
// through the test and must be called from the test's goroutine.
type Replicated struct {
	t                testing.TB
	primary, replica *Server
}

// StartReplicated starts a primary and a replica of it on free loopback ports and returns once the
// replica is in sync. Both are killed when the test ends.
func StartReplicated(t testing.TB) *Replicated {
	t.Helper()
	// repl-diskless-sync-delay 0: a replica syncs at once, not after Redis' default 5 s wait for
	// more replicas to share the transfer. Both get it, since a failover swaps their roles.
	const noDelay = "--repl-diskless-sync-delay"
	own := pairUser()
	primary := startServer(t, func(port int, dir string) ([]string, error) {
		return serverArgs(port, dir, append(own, noDelay, "0")...), nil
	})
	replica := startServer(t, func(port int, dir string) ([]string, error) {
		// replica-priority 0 would keep Sentinel from ever promoting it; 100 is the default, made
		// explicit because the failover tests depend on it.
		return serverArgs(port, dir, append(own, noDelay, "0", "--replica-priority", "100",
			"--replicaof", "127.0.0.1", strconv.Itoa(primary.port))...), nil
	})
	r := &Replicated{t: t, primary: primary, replica: replica}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := r.WaitInSync(ctx); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return r
}

// pairUser is the configuration that keeps a pair's replication to itself. Tests run in parallel on
// free ports, and a replica whose primary was killed keeps dialling that port: if another test's
// server takes it, the stray replica would attach to it and answer its WAIT, or show up in its
// Sentinel's replicas. So neither server lets its default user (what clients and Sentinel use)
// SYNC or PSYNC; the pair replicates as a user of its own, with a password only it knows.
func pairUser() []string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	name, pass := "repl-"+hex.EncodeToString(b[:6]), hex.EncodeToString(b[6:])
	return []string{
		"--user", "default", "on", "nopass", "~*", "&*", "+@all", "-sync", "-psync",
		"--user", name, "on", ">" + pass, "+psync", "+sync", "+replconf", "+ping",
		"--masteruser", name, "--masterauth", pass,
	}
}

// Primary is the server that started as the primary; it stays so named after a promotion, until
// Rejoin.
func (r *Replicated) Primary() *Server { return r.primary }

// Replica is the server that started as the replica (until Rejoin).
func (r *Replicated) Replica() *Server { return r.replica }

// WaitInSync waits until the replica is connected and has acknowledged every write the primary
// has taken (WAIT asks it for its offset at once instead of at its next one-second report).
func (r *Replicated) WaitInSync(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.primary.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	for {
		n, err := c.Do(ctx, "WAIT", 1, 100).Int()
		if err == nil && n == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the replica %s is not in sync with %s: %w (last: %d replicas, %v)",
				r.replica.Addr(), r.primary.Addr(), ctx.Err(), n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PauseReplica cuts the replica off the primary's writes, which the primary keeps acknowledging as
// before: it stops the replica's process (SIGSTOP), then has the primary drop its link to it. A
// stopped process alone would not do: its kernel keeps receiving the stream, and the replica would
// apply it once resumed, even after the primary's death. Writes from now on reach the replica only
// if it is resumed while the primary lives (it reconnects and resyncs); a paused replica cannot be
// promoted until resumed.
func (r *Replicated) PauseReplica() {
	r.t.Helper()
	r.replica.signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.primary.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		r.t.Fatalf("redistest: drop the replica's link on %s: %v", r.primary.Addr(), err)
	}
	// The primary takes no write until it has dropped the link, but check: a replica still listed
	// would get what follows.
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			return
		}
		if ctx.Err() != nil {
			r.t.Fatalf("redistest: the primary %s still lists its replica: %v\n%s", r.primary.Addr(), err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ResumeReplica lets the replica's process run again (SIGCONT). While the primary lives, the
// replica reconnects and catches up.
func (r *Replicated) ResumeReplica() { r.replica.signal(syscall.SIGCONT) }

// KillPrimary kills the primary with SIGKILL and waits for it to be gone: what it acknowledged and
// did not yet send is lost.
func (r *Replicated) KillPrimary() {
	r.t.Helper()
	r.primary.Kill()
}

// PromoteReplica makes the replica a primary (REPLICAOF NO ONE) and waits until it says so.
func (r *Replicated) PromoteReplica(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.replica.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promote %s: %w", r.replica.Addr(), err)
	}
	for !isMaster(ctx, c) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote %s: %w", r.replica.Addr(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Rejoin readies the pair for another failover after a promotion: it starts the dead primary
// again, empty, as a replica of the promoted one (REPLICAOF), waits until it is in sync, and swaps
// the names: Primary is then the promoted server and Replica the restarted one, so that
// PauseReplica, KillPrimary and PromoteReplica act on them. Sentinel, when it watches the pair,
// would make the restarted server a replica by itself; asking first does not wait for it.
func (r *Replicated) Rejoin(ctx context.Context) error {
	r.t.Helper()
	promoted, old := r.replica, r.primary
	old.Restart()
	c := redis.NewClient(&redis.Options{Addr: old.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(promoted.port)).Err(); err != nil {
		return fmt.Errorf("rejoin %s as a replica of %s: %w", old.Addr(), promoted.Addr(), err)
	}
	r.primary, r.replica = promoted, old
	return r.WaitInSync(ctx)
}
