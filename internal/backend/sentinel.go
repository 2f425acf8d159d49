package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// sentinelDialTimeout bounds a dial to a sentinel or to the master it names: go-redis' default of
// 5 s, tried 5 times, would keep a command on a master whose host is gone for half a minute, when
// Sentinel promotes a replica within seconds.
const sentinelDialTimeout = time.Second

// openSentinel opens Redis through Sentinel: go-redis' failover client asks the sentinels where the
// master is at every dial and follows their +switch-master announcements, closing its connections to
// the old master; Asynq and the dashboard get the same through asynq.RedisFailoverClientOpt. It waits
// until a sentinel names the master and the master answers, and a failure names the setting.
func openSentinel(ctx context.Context, o RedisOptions) (*Redis, error) {
	if o.Cluster {
		return nil, errors.New("SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_CLUSTER are exclusive")
	}
	if o.SentinelMaster == "" || len(o.SentinelAddrs) == 0 {
		return nil, errors.New("SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_SENTINEL_ADDRS must be set together")
	}
	// The URL, when given, only carries the credentials and the database: Sentinel names the host.
	auth := &redis.Options{}
	if o.URL != "" {
		var err error
		if auth, err = redis.ParseURL(o.URL); err != nil {
			return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: %w", err)
		}
	}
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: o.SentinelMaster, SentinelAddrs: o.SentinelAddrs,
		Username: auth.Username, Password: auth.Password, DB: auth.DB, TLSConfig: auth.TLSConfig,
		DialTimeout: sentinelDialTimeout, PoolSize: poolSize, PoolTimeout: 30 * time.Second, Protocol: Protocol,
	})
	r := &Redis{Client: client, Asynq: asynq.RedisFailoverClientOpt{
		MasterName: o.SentinelMaster, SentinelAddrs: o.SentinelAddrs,
		Username: auth.Username, Password: auth.Password, DB: auth.DB, TLSConfig: auth.TLSConfig,
		DialTimeout: sentinelDialTimeout,
	}}

	// Each attempt says which setting its failure points at; the last one is reported.
	var setting string
	err := retry(ctx, o.StartTimeout, func(ctx context.Context) error {
		var err error
		setting, err = probeSentinel(ctx, o, auth)
		if err == nil {
			setting = "SLOTWHEEL_REDIS_SENTINEL_MASTER"
			err = client.Ping(ctx).Err()
			if err != nil {
				err = fmt.Errorf("the master %q did not answer: %w", o.SentinelMaster, err)
			}
		}
		return err
	})
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: redis through Sentinel was not ready within %s: %w", setting, o.StartTimeout, err)
	}
	return r, nil
}

// probeSentinel asks every sentinel at once where the master is (one that accepts and never answers
// must not hide the others), so that a start that fails can say whether no sentinel answered
// (SLOTWHEEL_REDIS_SENTINEL_ADDRS) or none knows the master's name (SLOTWHEEL_REDIS_SENTINEL_MASTER);
// the failover client alone reports both alike.
func probeSentinel(ctx context.Context, o RedisOptions, auth *redis.Options) (setting string, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the asks still out once one has answered
	type answer struct {
		addr string
		err  error
	}
	answers := make(chan answer, len(o.SentinelAddrs))
	for _, addr := range o.SentinelAddrs {
		go func() {
			// ContextTimeoutEnabled: a sentinel that accepts and never answers holds the ask only
			// until the attempt's deadline.
			s := redis.NewSentinelClient(&redis.Options{Addr: addr, TLSConfig: auth.TLSConfig,
				DialTimeout: sentinelDialTimeout, DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
			defer func() { _ = s.Close() }()
			answers <- answer{addr, s.GetMasterAddrByName(ctx, o.SentinelMaster).Err()}
		}()
	}
	var unknown string
	var errs []string
	for range o.SentinelAddrs {
		a := <-answers
		switch {
		case a.err == nil:
			return "", nil
		case errors.Is(a.err, redis.Nil):
			unknown = a.addr
		default:
			errs = append(errs, fmt.Sprintf("%s: %v", a.addr, a.err))
		}
	}
	if unknown != "" {
		return "SLOTWHEEL_REDIS_SENTINEL_MASTER", fmt.Errorf("the sentinel at %s knows no master named %q", unknown, o.SentinelMaster)
	}
	return "SLOTWHEEL_REDIS_SENTINEL_ADDRS", fmt.Errorf("no sentinel answered (%s)", strings.Join(errs, "; "))
}
