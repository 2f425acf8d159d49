package releasebench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// anchorTable is the anchors' plain bookings table: nothing of slotwheel's schema or code, just
// what a naive release needs — a status, release_at and released_at, and an index on
// (status, release_at) for the poll.
type anchorTable struct {
	db    *sql.DB
	mysql bool
	// releaseOne is the naive release of one booking (stock Asynq's handler); releaseDue the poll's
	// release of every due one. Both stamp released_at with the database's clock.
	releaseOne, releaseDue string
}

// anchorRig is what both anchors run on: a database of their own, its bookings table, and the busy
// case's confirm load (nil in the other cases).
type anchorRig struct {
	db   *database
	t    *anchorTable
	load *confirmLoad
}

// newAnchorRig sets an anchor's rig up; close takes down what it set up, also after it failed.
func newAnchorRig(ctx context.Context, env *Env, cfg Config, s spec, p *Progress) (*anchorRig, error) {
	p.Stage("creating a database", 0)
	db, err := env.newDatabase(ctx, false)
	if err != nil {
		return nil, err
	}
	r := &anchorRig{db: db}
	if r.t, err = newAnchorTable(ctx, db); err == nil {
		r.load, err = anchorLoad(ctx, env, cfg, s, p)
	}
	if err != nil {
		return nil, errors.Join(err, r.close(context.WithoutCancel(ctx)))
	}
	return r, nil
}

// close stops the load and drops the database.
func (r *anchorRig) close(ctx context.Context) error {
	return errors.Join(r.load.close(), r.db.drop(ctx))
}

// sqliteTime is how the SQLite anchor table keeps times: text that sorts as time does, and is what
// strftime('%Y-%m-%d %H:%M:%f') writes.
const sqliteTime = "2006-01-02 15:04:05.000"

// Anchor statuses. Rows made to estimate the setup rate are SCRATCH: never released, never counted.
const (
	anchorConfirmed = "CONFIRMED"
	anchorScratch   = "SCRATCH"
)

func newAnchorTable(ctx context.Context, d *database) (*anchorTable, error) {
	t := &anchorTable{db: d.sql, mysql: d.mysql}
	now := "NOW(3)" // the session runs in UTC (newDatabase)
	ddl := []string{`CREATE TABLE bench_bookings (id BIGINT NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL,
		release_at DATETIME(3) NOT NULL, released_at DATETIME(3) NULL, KEY idx_status_release (status, release_at)) ENGINE=InnoDB`}
	if !d.mysql {
		now = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
		ddl = []string{`CREATE TABLE bench_bookings (id INTEGER PRIMARY KEY, status TEXT NOT NULL, release_at TEXT NOT NULL, released_at TEXT)`,
			`CREATE INDEX idx_status_release ON bench_bookings (status, release_at)`}
	}
	for _, q := range ddl {
		if _, err := t.db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("create the anchor table: %w", err)
		}
	}
	t.releaseOne = "UPDATE bench_bookings SET status = 'RELEASED', released_at = " + now + " WHERE id = ? AND status = 'CONFIRMED'"
	t.releaseDue = "UPDATE bench_bookings SET status = 'RELEASED', released_at = " + now + " WHERE status = 'CONFIRMED' AND release_at <= " + now
	return t, nil
}

func (t *anchorTable) arg(at time.Time) any {
	if t.mysql {
		return at.UTC()
	}
	return at.UTC().Format(sqliteTime)
}

// insert adds rows firstID, firstID+1, … due at ats, in multi-row INSERTs.
func (t *anchorTable) insert(ctx context.Context, firstID int64, ats []time.Time, status string) error {
	const batch = 400 // 1,200 parameters: within every SQLite build's limit
	for lo := 0; lo < len(ats); lo += batch {
		hi := min(lo+batch, len(ats))
		var b strings.Builder
		b.WriteString("INSERT INTO bench_bookings (id, status, release_at) VALUES ")
		args := make([]any, 0, 3*(hi-lo))
		for i := lo; i < hi; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, firstID+int64(i), status, t.arg(ats[i]))
		}
		if _, err := t.db.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("insert anchor bookings: %w", err)
		}
	}
	return nil
}

// watcher reads the table through obs, a pool of its own.
func (t *anchorTable) watcher(obs *sql.DB) *sqlWatcher {
	return &sqlWatcher{db: obs,
		pendingQuery: "SELECT 1 FROM bench_bookings WHERE status = 'CONFIRMED' LIMIT 1",
		countQuery:   "SELECT COUNT(*) FROM bench_bookings WHERE status = 'RELEASED'"}
}

// lags reads released_at − release_at of every released booking into m, and m.last.
func (t *anchorTable) lags(ctx context.Context, m *measurement, lastDue time.Time) error {
	rows, err := t.db.QueryContext(ctx, "SELECT release_at, released_at FROM bench_bookings WHERE status = 'RELEASED'")
	if err != nil {
		return err
	}
	defer rows.Close()
	var latest time.Time
	for rows.Next() {
		var due, done any
		if err := rows.Scan(&due, &done); err != nil {
			return err
		}
		d, err := parseTime(due)
		if err != nil {
			return err
		}
		r, err := parseTime(done)
		if err != nil {
			return err
		}
		m.lags = append(m.lags, r.Sub(d))
		latest = later(latest, r)
	}
	if !latest.IsZero() {
		m.last = latest.Sub(lastDue)
	}
	return rows.Err()
}

// parseTime reads a time as the drivers return it: MySQL's as time.Time, SQLite's as text.
func parseTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		return time.ParseInLocation(sqliteTime, x, time.UTC)
	case []byte:
		return time.ParseInLocation(sqliteTime, string(x), time.UTC)
	}
	return time.Time{}, fmt.Errorf("anchor table: unexpected time %T %v", v, v)
}

// scratchTimes are k release_at values a day ahead, for the rows and tasks that estimate the
// setup rate.
func scratchTimes(k int) []time.Time {
	at := time.Now().Add(24 * time.Hour).Truncate(time.Millisecond)
	out := make([]time.Time, k)
	for i := range out {
		out[i] = at
	}
	return out
}
