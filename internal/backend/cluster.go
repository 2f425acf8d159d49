package backend

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds on how long one command waits on a cluster node that is gone, applied where the URL does
// not set its own (dial_timeout=, read_timeout=, dialer_retries=, max_redirects=). go-redis' defaults
// (5 s to dial, each dial tried 5 times) would hold a command about 25 s on a host that drops
// packets, past SLOTWHEEL_REQUEST_TIMEOUT, before the cluster client even tried another node.
const (
	// clusterDialTimeout: a node on the same network accepts in well under a millisecond; one that
	// has not within a second is dead, or its host is.
	clusterDialTimeout = time.Second
	// clusterDialerRetries: one dial per attempt. The cluster client itself retries a command that
	// failed on the network (the same node once, then wherever the reloaded topology says), so
	// go-redis' own retries of the dial would only multiply the wait on a dead node.
	clusterDialerRetries = 1
	// clusterReadTimeout: every Lua script slotwheel runs answers in milliseconds; a node silent for
	// 3 s is treated as gone, which is what starts the reload below.
	clusterReadTimeout = 3 * time.Second
	// clusterMaxRedirects: attempts after the first, go-redis' default made explicit. A command on a
	// dead master needs two: go-redis retries the same node once, and the third attempt reads the
	// topology afresh, which reloadOnNetworkError has reloaded by then. A third spares a MOVED
	// during a resharding. On a silent node the three waits (a read, a dial, a read) stay within
	// SLOTWHEEL_REQUEST_TIMEOUT's 10 s default.
	clusterMaxRedirects = 3
)

// NewClusterClient is redis.NewClusterClient with the bounds above where opt leaves them zero, and
// with reloadOnNetworkError on every node client, so that after a failover commands go to the
// promoted replica within moments instead of after go-redis' periodic reload (a minute).
func NewClusterClient(opt *redis.ClusterOptions) *redis.ClusterClient {
	if opt.DialTimeout == 0 {
		opt.DialTimeout = clusterDialTimeout
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = clusterDialerRetries
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = clusterReadTimeout
	}
	if opt.MaxRedirects == 0 {
		opt.MaxRedirects = clusterMaxRedirects
	}
	if opt.Protocol == 0 {
		opt.Protocol = Protocol
	}
	c := redis.NewClusterClient(opt)
	// On the node clients rather than the cluster client: a node's failure is seen at the first
	// attempt, while the cluster client's own hook would see it only once every retry had failed
	// against the same stale topology. Node clients are created lazily, after this registration.
	c.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnNetworkError{cluster: c}) })
	return c
}

// reloadOnNetworkError reloads a cluster client's topology (CLUSTER SLOTS from another node) as soon
// as one of its nodes fails on the network. go-redis reloads on MOVED, ASK and READONLY answers, but
// a master killed outright answers nothing: without this the client keeps dialling it for the slots
// it held until its periodic reload, long after a replica has taken them over. ReloadState is lazy
// and coalesced (one reload at a time, then a 200 ms pause), so a burst of failures costs one or two
// CLUSTER SLOTS, not one each.
type reloadOnNetworkError struct {
	cluster *redis.ClusterClient
}

func (h reloadOnNetworkError) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnNetworkError) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// The reload's own CLUSTER SLOTS failing on a dead node moves it to the next node; asking
		// for another reload then would only repeat it.
		if isNetworkError(err) && cmd.Name() != "cluster" {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnNetworkError) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if isNetworkError(err) || slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return isNetworkError(c.Err()) }) {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

// isNetworkError reports whether err says the node is unreachable or no longer serves its slots: a
// failed dial, read or write (refused, reset, timed out), a connection closed under the command,
// the client's pool closed (go-redis closes the clients of nodes gone from the topology), or
// CLUSTERDOWN from a master cut off from the rest of its cluster. Answers such as redis.Nil or a
// script's error, and the caller's own cancellation, are not.
func isNetworkError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	return strings.HasPrefix(err.Error(), "CLUSTERDOWN ")
}

// ClusterConnOpt is the asynq.RedisConnOpt of a Redis Cluster: like asynq.RedisClusterClientOpt,
// but its clients come from NewClusterClient, so Asynq's workers, schedulers and the dashboard
// follow a failover as quickly as the engine. Asynq and asynqmon need only MakeRedisClient to
// return a redis.UniversalClient (the dashboard shows cluster details for a *redis.ClusterClient).
type ClusterConnOpt struct {
	opt redis.ClusterOptions
}

// MakeRedisClient returns a new *redis.ClusterClient; each call gets its own copy of the options,
// since go-redis fills in defaults and appends discovered nodes in place.
func (o ClusterConnOpt) MakeRedisClient() any {
	opt := o.opt
	opt.Addrs = slices.Clone(o.opt.Addrs)
	return NewClusterClient(&opt)
}
