// Package replica owns slotwheel's MySQL read replicas: a GORM handle, separate from the primary's,
// on which gorm.io/plugin/dbresolver sends reads to a replica, and the loop that keeps a replica in
// rotation only while it answers and is no further behind than MaxLag (measured with a heartbeat row
// the loop writes on the primary). Only reads the store names as replica-safe use Set.DB: a read
// nobody named runs on the primary's own handle, which has no resolver, so it cannot reach a replica
// by accident. When no replica is in rotation the resolver hands back the primary, so replica
// trouble costs the primary load, never a request. It imports models and nothing of the engine.
package replica

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"

	"github.com/slotwheel/slotwheel/models"
)

// Defaults of Options.
const (
	DefaultMaxLag   = 5 * time.Second
	DefaultInterval = time.Second
	// DefaultReadTimeout bounds one read on a replica before it is asked of the primary instead: a
	// replica that accepts connections and never answers must not hold a request to its timeout.
	DefaultReadTimeout = 3 * time.Second
	// probeTimeout bounds each of a probe's round trips.
	probeTimeout = time.Second
)

// Options configure a Set.
type Options struct {
	DSNs []string
	// Pool sizes each replica's connections; default models.Pool's.
	Pool models.Pool
	// MaxLag: a replica further behind serves no reads until it is back within half of it (so that
	// one hovering at the bound does not flap). Default DefaultMaxLag.
	MaxLag time.Duration
	// Interval between probes of the replicas (and heartbeats on the primary); default
	// DefaultInterval.
	Interval time.Duration
	// ReadTimeout bounds a read on a replica; default DefaultReadTimeout.
	ReadTimeout time.Duration
	Log         *slog.Logger // default slog.Default()
}

// Metrics are package-level so that several sets in one process (tests) share one registration.
var (
	metricUp = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slotwheel_mysql_replica_up", Help: "1 when the read replica answered its last probe, else 0.",
	}, []string{"replica"})
	metricLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slotwheel_mysql_replica_lag_seconds", Help: "How far behind the primary the read replica was at its last probe (heartbeat row); +Inf when it could not be told.",
	}, []string{"replica"})
	metricInRotation = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slotwheel_mysql_replica_in_rotation", Help: "1 while the read replica serves reads (up and within SLOTWHEEL_MYSQL_REPLICA_MAX_LAG), else 0.",
	}, []string{"replica"})
	// One series whatever the configuration (0 without replicas), so that the alert on it exists on
	// every instance's /metrics.
	metricOut = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "slotwheel_mysql_replicas_out_of_rotation", Help: "Read replicas configured that serve no reads now (down, or behind by more than SLOTWHEEL_MYSQL_REPLICA_MAX_LAG): their reads go to the primary.",
	})
	metricReads = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_mysql_replica_reads_total", Help: "Replica-safe reads by where they ran: a replica's address, or \"primary\" when no replica was in rotation or the replica's read failed.",
	}, []string{"replica"})
)

// member is one replica.
type member struct {
	name string // host:port, for metrics and logs
	conn *sql.DB

	up         atomic.Bool
	inRotation atomic.Bool
	lag        atomic.Int64 // nanoseconds; -1 unknown
	reads      atomic.Int64
}

// Set is a primary's read replicas. It is safe for concurrent use.
type Set struct {
	o        Options
	db       *gorm.DB // the resolver's handle
	primary  *sql.DB
	members  []*member
	byPool   map[gorm.ConnPool]*member
	instance string // this set's heartbeat row

	next         atomic.Uint64 // round robin
	primaryReads atomic.Int64

	probeMu sync.Mutex // one Probe at a time; guards the heartbeats
	// The first and the last heartbeat this set wrote.
	firstHeartbeat, lastHeartbeat time.Time

	recent recentWrites

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{} // closed when the probe loop has returned
	started   atomic.Bool
	startOnce sync.Once
	closeOnce sync.Once
}

// Open opens the replicas' pools beside primary (the main handle, whose pool the resolver's handle
// shares for everything it does not send to a replica). It does no I/O: a replica that is down at
// start is simply out of rotation until it answers. Call Start to begin probing; until the first
// probe every replica is out of rotation.
func Open(primary *gorm.DB, o Options) (*Set, error) {
	if len(o.DSNs) == 0 {
		return nil, errors.New("replica: no DSNs")
	}
	if o.MaxLag <= 0 {
		o.MaxLag = DefaultMaxLag
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	pconn, err := primary.DB()
	if err != nil {
		return nil, fmt.Errorf("replica: primary pool: %w", err)
	}
	s := &Set{o: o, primary: pconn, byPool: map[gorm.ConnPool]*member{}, instance: newInstance(),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	var dialectors []gorm.Dialector
	for i, dsn := range o.DSNs {
		cfg, err := mysqldriver.ParseDSN(dsn)
		if err != nil {
			s.closeConns()
			return nil, fmt.Errorf("SLOTWHEEL_MYSQL_REPLICA_DSNS: replica %d: %w", i+1, err)
		}
		conn, err := models.MySQLPool(dsn, o.Pool)
		if err != nil {
			s.closeConns()
			return nil, fmt.Errorf("SLOTWHEEL_MYSQL_REPLICA_DSNS: replica %d: %w", i+1, err)
		}
		m := &member{name: cfg.Addr, conn: conn}
		m.lag.Store(-1)
		s.members = append(s.members, m)
		s.byPool[conn] = m
		dialectors = append(dialectors, mysql.New(mysql.Config{Conn: conn, SkipInitializeWithVersion: true}))
		metricUp.WithLabelValues(m.name).Set(0)
		metricInRotation.WithLabelValues(m.name).Set(0)
		metricLag.WithLabelValues(m.name)
		metricReads.WithLabelValues(m.name)
	}
	metricReads.WithLabelValues("primary")
	// The primary is the resolver's last "replica": with one replica listed dbresolver would take it
	// without asking the policy, and the policy must be able to answer "the primary" when no
	// replica is in rotation.
	dialectors = append(dialectors, mysql.New(mysql.Config{Conn: pconn, SkipInitializeWithVersion: true}))
	if s.db, err = models.ReadGorm(pconn); err != nil {
		s.closeConns()
		return nil, err
	}
	if err := s.db.Use(dbresolver.Register(dbresolver.Config{Replicas: dialectors, Policy: dbresolver.PolicyFunc(s.resolve)})); err != nil {
		s.closeConns()
		return nil, fmt.Errorf("replica: resolver: %w", err)
	}
	metricOut.Add(float64(len(s.members))) // out until their first probe
	return s, nil
}

func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DB is the handle for replica-safe reads: outside a transaction each query goes to a replica in
// rotation, or to the primary when there is none. Never write or open a transaction on it.
func (s *Set) DB() *gorm.DB { return s.db }

// ReadTimeout is how long a read on a replica may take before the primary is asked instead.
func (s *Set) ReadTimeout() time.Duration { return s.o.ReadTimeout }

// resolve is the resolver's policy. pools are the replicas in Options.DSNs order, then the primary.
func (s *Set) resolve(pools []gorm.ConnPool) gorm.ConnPool {
	n := len(s.members)
	start := int(s.next.Add(1) % uint64(n))
	for i := range n {
		m := s.members[(start+i)%n]
		if m.inRotation.Load() {
			m.reads.Add(1)
			metricReads.WithLabelValues(m.name).Inc()
			return m.conn
		}
	}
	s.primaryReads.Add(1)
	metricReads.WithLabelValues("primary").Inc()
	return pools[len(pools)-1]
}

// ReadFailed tells the set that a read it sent to a replica failed: the replicas are probed at once
// rather than at the next interval, so that a replica that went down leaves rotation within moments.
// The caller runs the read on the primary.
func (s *Set) ReadFailed() {
	metricReads.WithLabelValues("primary").Inc()
	s.primaryReads.Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Status is what the set knows of one replica.
type Status struct {
	Name       string        // host:port
	Up         bool          // answered the last probe
	InRotation bool          // serves reads
	Lag        time.Duration // at the last probe; -1 when unknown
	Reads      int64         // reads the resolver sent to it
}

// Status reports every replica, in Options.DSNs order.
func (s *Set) Status() []Status {
	out := make([]Status, len(s.members))
	for i, m := range s.members {
		out[i] = Status{Name: m.name, Up: m.up.Load(), InRotation: m.inRotation.Load(), Lag: time.Duration(m.lag.Load()),
			Reads: m.reads.Load()}
	}
	return out
}

// PrimaryReads counts the replica-safe reads that ran on the primary (no replica in rotation, or the
// replica's read failed).
func (s *Set) PrimaryReads() int64 { return s.primaryReads.Load() }

// Start probes the replicas once, so that reads go to them from the first request, then every
// Interval until Close.
func (s *Set) Start(ctx context.Context) {
	s.startOnce.Do(func() {
		s.prune(ctx)
		s.Probe(ctx)
		s.started.Store(true)
		go s.loop()
	})
}

func (s *Set) loop() {
	defer close(s.done)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.Interval+2*probeTimeout)
		s.Probe(ctx)
		cancel()
	}
}

// prune deletes the heartbeat rows of instances gone for a day.
func (s *Set) prune(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, _ = s.primary.ExecContext(pctx, "DELETE FROM replica_heartbeats WHERE at < ?", time.Now().UTC().Add(-24*time.Hour))
}

// Probe writes a heartbeat on the primary and reads it back from every replica, putting each replica
// in or out of rotation by what it finds: its runOnce.
func (s *Set) Probe(ctx context.Context) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	s.heartbeat(ctx)
	var wg sync.WaitGroup
	for _, m := range s.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.probe(ctx, m)
		}()
	}
	wg.Wait()
}

// heartbeat stamps this set's row on the primary. The stamp is this process's clock and is compared
// with this process's clock only, so clocks of other instances or servers never enter a lag.
func (s *Set) heartbeat(ctx context.Context) {
	at := time.Now().UTC().Truncate(time.Microsecond)
	hctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := s.primary.ExecContext(hctx, "INSERT INTO replica_heartbeats (instance, at) VALUES (?, ?) ON DUPLICATE KEY UPDATE at = VALUES(at)",
		s.instance, at)
	if err != nil {
		// Without a fresh heartbeat the lags are measured from the last one that was written: a
		// primary that cannot be written is no reason to take readable replicas out.
		s.o.Log.Debug("replica heartbeat not written", "err", err)
		return
	}
	s.lastHeartbeat = at
	if s.firstHeartbeat.IsZero() {
		s.firstHeartbeat = at
	}
}

func (s *Set) probe(ctx context.Context, m *member) {
	lag, err := s.measure(ctx, m)
	wasIn := m.inRotation.Load()
	if err != nil {
		m.up.Store(false)
		m.setRotation(false)
		m.lag.Store(-1)
		metricUp.WithLabelValues(m.name).Set(0)
		metricLag.WithLabelValues(m.name).Set(inf)
		if wasIn {
			s.o.Log.Warn("read replica out of rotation: it does not answer; its reads go to the primary", "replica", m.name, "err", err)
		}
		return
	}
	m.up.Store(true)
	metricUp.WithLabelValues(m.name).Set(1)
	m.lag.Store(int64(lag))
	if lag < 0 {
		metricLag.WithLabelValues(m.name).Set(inf)
	} else {
		metricLag.WithLabelValues(m.name).Set(lag.Seconds())
	}
	in := lag >= 0 && lag <= s.o.MaxLag
	if !wasIn {
		in = lag >= 0 && lag <= s.o.MaxLag/2
	}
	m.setRotation(in)
	switch {
	case wasIn && !in:
		s.o.Log.Warn("read replica out of rotation: too far behind; its reads go to the primary", "replica", m.name,
			"lag", lagString(lag), "max_lag", s.o.MaxLag)
	case !wasIn && in:
		s.o.Log.Info("read replica in rotation", "replica", m.name, "lag", lag)
	}
}

// setRotation puts m in rotation or out, keeping the metrics with it.
func (m *member) setRotation(in bool) {
	if m.inRotation.Swap(in) == in {
		return
	}
	metricInRotation.WithLabelValues(m.name).Set(b2f(in))
	if in {
		metricOut.Dec()
	} else {
		metricOut.Inc()
	}
}

var inf = math.Inf(1)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func lagString(d time.Duration) string {
	if d < 0 {
		return "unknown"
	}
	return d.Round(time.Millisecond).String()
}

// measure answers how far m is behind: -1 when it answers but cannot say (replication stopped with
// no heartbeat to go by), an error when it does not answer.
func (s *Set) measure(ctx context.Context, m *member) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := m.conn.PingContext(pctx); err != nil {
		return 0, err
	}
	if !s.lastHeartbeat.IsZero() {
		var at time.Time
		err := m.conn.QueryRowContext(pctx, "SELECT at FROM replica_heartbeats WHERE instance = ?", s.instance).Scan(&at)
		switch {
		case err == nil:
			return max(0, s.lastHeartbeat.Sub(at)), nil
		case errors.Is(err, sql.ErrNoRows):
			// The first heartbeat has not arrived yet.
			return s.sinceFirstHeartbeat(), nil
		}
		var me *mysqldriver.MySQLError
		if !errors.As(err, &me) || me.Number != 1146 { // ER_NO_SUCH_TABLE: a schema not migrated yet
			return 0, err
		}
	}
	return s.secondsBehindMaster(pctx, m)
}

// sinceFirstHeartbeat is the lag of a replica that has not seen this set's row yet: at least the age
// of the row.
func (s *Set) sinceFirstHeartbeat() time.Duration {
	return s.lastHeartbeat.Sub(s.firstHeartbeat)
}

// secondsBehindMaster is the replica's own estimate, for a schema without the heartbeat table; -1
// when replication is stopped (NULL) or the account may not ask.
func (s *Set) secondsBehindMaster(ctx context.Context, m *member) (time.Duration, error) {
	rows, err := m.conn.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		var me *mysqldriver.MySQLError
		if errors.As(err, &me) {
			return -1, nil // no privilege
		}
		return 0, err
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	if !rows.Next() {
		return -1, rows.Err() // not a replica at all
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return 0, err
	}
	for i, c := range cols {
		if c == "Seconds_Behind_Master" {
			if !vals[i].Valid {
				return -1, nil
			}
			var sec int64
			if _, err := fmt.Sscan(vals[i].String, &sec); err != nil {
				return -1, nil
			}
			return time.Duration(sec) * time.Second, nil
		}
	}
	return -1, nil
}

// Close stops the probes and closes the replicas' pools (not the primary's).
func (s *Set) Close() {
	s.closeOnce.Do(func() {
		s.startOnce.Do(func() {}) // a Start after Close starts nothing
		close(s.stop)
		if s.started.Load() {
			<-s.done
		}
		for _, m := range s.members {
			if !m.inRotation.Load() {
				metricOut.Dec() // a closed set leaves none counted
			}
		}
		s.closeConns()
	})
}

func (s *Set) closeConns() {
	for _, m := range s.members {
		_ = m.conn.Close()
	}
}

// recentWrites remembers whose bookings this process wrote lately, for read-your-writes: a user who
// changed a booking within the window reads their list from the primary, where a replica (as much as
// MaxLag behind, and more by the time the next probe notices) might not have the change yet.
type recentWrites struct {
	mu        sync.Mutex
	users     map[string]time.Time
	bookings  map[uint64]time.Time
	lastPrune time.Time
}

// FreshWindow is how long after a write its writer's reads stay on the primary: the most a replica in
// rotation can be behind, MaxLag, plus the two intervals it may fall further before a probe takes it
// out.
func (s *Set) FreshWindow() time.Duration { return s.o.MaxLag + 2*s.o.Interval }

// Wrote records that users' bookings (and the bookings named) changed now. It runs on the wall
// clock, as replication does, whatever clock the engine keeps.
func (s *Set) Wrote(users []string, bookings []uint64) {
	if len(users) == 0 && len(bookings) == 0 {
		return
	}
	now := time.Now()
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.users == nil {
		r.users, r.bookings = map[string]time.Time{}, map[uint64]time.Time{}
	}
	for _, u := range users {
		r.users[u] = now
	}
	for _, id := range bookings {
		r.bookings[id] = now
	}
	if window := s.FreshWindow(); now.Sub(r.lastPrune) > window {
		r.lastPrune = now
		for u, at := range r.users {
			if now.Sub(at) > window {
				delete(r.users, u)
			}
		}
		for id, at := range r.bookings {
			if now.Sub(at) > window {
				delete(r.bookings, id)
			}
		}
	}
}

// UserWroteRecently reports whether a booking of user changed within FreshWindow.
func (s *Set) UserWroteRecently(user string) bool {
	r := &s.recent
	r.mu.Lock()
	at, ok := r.users[user]
	r.mu.Unlock()
	return ok && time.Since(at) <= s.FreshWindow()
}

// BookingWroteRecently reports whether booking id changed within FreshWindow.
func (s *Set) BookingWroteRecently(id uint64) bool {
	r := &s.recent
	r.mu.Lock()
	at, ok := r.bookings[id]
	r.mu.Unlock()
	return ok && time.Since(at) <= s.FreshWindow()
}
