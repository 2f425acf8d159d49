package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	sentinels = 3
	// sentinelQuorum sentinels must find the master down before one of them fails it over.
	sentinelQuorum = 2
	// sentinelMasterName is the name the sentinels know the pair by.
	sentinelMasterName = "redistest"

	// sentinelDownAfter: a master silent this long is down for a sentinel (Redis' default is 30 s).
	sentinelDownAfter = time.Second
	// sentinelFailoverTimeout bounds each step of a failover, and a failover that could not start
	// (a split vote, or no replica fit to promote yet, such as a paused one) is tried again after
	// twice this (Redis' default is 3 minutes).
	sentinelFailoverTimeout = 2 * time.Second
)

// Sentinel is three real sentinels (redis-server --sentinel) on free loopback ports watching a
// Replicated pair with a quorum of two, tuned to fail it over within seconds of the primary's death.
type Sentinel struct {
	servers  []*Server
	replicas *Replicated
}

// StartSentinel starts three sentinels watching pair and returns once each knows the primary as
// master, the replica, and the two other sentinels: only then can they agree on a failover. They
// are killed when the test ends.
//
// Sentinel's rules for the replica it promotes are met by a replica that was paused when the
// primary died and is resumed since: its replica-priority is not 0 (StartReplicated), it answers
// again (a paused one is down for Sentinel, and failovers meanwhile are put off by twice the
// failover timeout), and its link to the master has been down for less than ten times
// down-after-milliseconds plus the time the master has been down (a paused replica sees its link
// drop only when resumed). The primary requires no replica to acknowledge a write (min-replicas-
// to-write stays 0), so it keeps acknowledging writes the paused replica does not get.
func StartSentinel(t testing.TB, pair *Replicated) *Sentinel {
	t.Helper()
	s := &Sentinel{replicas: pair}
	for range sentinels {
		s.servers = append(s.servers, startServer(t, func(port int, dir string) ([]string, error) {
			// A sentinel needs a config file it can rewrite: it records what it learns there.
			conf := filepath.Join(dir, "sentinel.conf")
			name := sentinelMasterName
			body := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, port, dir, name, pair.primary.port, sentinelQuorum, name, sentinelDownAfter.Milliseconds(),
				name, sentinelFailoverTimeout.Milliseconds(), name)
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				return nil, err
			}
			return []string{conf, "--sentinel"}, nil
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// MasterName is the name the sentinels know the pair's master by.
func (s *Sentinel) MasterName() string { return sentinelMasterName }

// Addrs are the sentinels' "127.0.0.1:port".
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.servers))
	for i, srv := range s.servers {
		addrs[i] = srv.Addr()
	}
	return addrs
}

// WaitReady polls until every sentinel sees the master up, its replica (the pair's Replica) with its
// link up, and the other sentinels (which announce themselves through the master every 2 s): only
// then can the sentinels fail the master over to the replica. After the pair's Rejoin, it waits for
// the sentinels to learn of the rejoined replica (they ask replicas every 10 s).
func (s *Sentinel) WaitReady(ctx context.Context) error {
	for {
		err := s.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sentinels not ready: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Sentinel) ready(ctx context.Context) error {
	for _, addr := range s.Addrs() {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
		master, err := c.Master(ctx, sentinelMasterName).Result()
		if err != nil {
			_ = c.Close()
			return fmt.Errorf("SENTINEL MASTER on %s: %w", addr, err)
		}
		replicas, err := c.Replicas(ctx, sentinelMasterName).Result()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("SENTINEL REPLICAS on %s: %w", addr, err)
		}
		if master["flags"] != "master" || master["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
			return fmt.Errorf("sentinel %s sees the master as %q with %s other sentinels", addr, master["flags"],
				master["num-other-sentinels"])
		}
		want := s.replicas.replica.Addr()
		if !slices.ContainsFunc(replicas, func(r map[string]string) bool {
			return net.JoinHostPort(r["ip"], r["port"]) == want && r["flags"] == "slave" && r["master-link-status"] == "ok"
		}) {
			return fmt.Errorf("sentinel %s does not see the replica %s in sync yet: %v", addr, want, replicas)
		}
	}
	return nil
}

// Master is the master's address as every sentinel that answers names it; it is an error when
// they disagree (during a failover, until the news has spread) or none answers.
func (s *Sentinel) Master(ctx context.Context) (string, error) {
	var master string
	for _, addr := range s.Addrs() {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
		hp, err := c.GetMasterAddrByName(ctx, sentinelMasterName).Result()
		_ = c.Close()
		if err != nil {
			continue // a sentinel a test killed
		}
		got := net.JoinHostPort(hp[0], hp[1])
		if master != "" && got != master {
			return "", fmt.Errorf("the sentinels disagree: %s and %s", master, got)
		}
		master = got
	}
	if master == "" {
		return "", fmt.Errorf("no sentinel of %v names a master", s.Addrs())
	}
	return master, nil
}

// WaitForNewMaster waits until every sentinel names a master other than old, and that server says
// it is a master, and returns its address.
func (s *Sentinel) WaitForNewMaster(ctx context.Context, old string) (string, error) {
	for {
		master, err := s.Master(ctx)
		if err == nil && master != old {
			c := redis.NewClient(&redis.Options{Addr: master, DialTimeout: time.Second, MaxRetries: -1})
			ok := isMaster(ctx, c)
			_ = c.Close()
			if ok {
				return master, nil
			}
			err = fmt.Errorf("%s is named but not a master yet", master)
		} else if err == nil {
			err = fmt.Errorf("the sentinels still name %s", old)
		}
		// Sentinel announces a new master on its +switch-master channel, but only once: a poll
		// cannot miss it.
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no new master: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
