package rushbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slotwheel/slotwheel/models"
)

// sqlSchema is the plain SQL design's tables, after seed 003: a row per slot of a resource with its
// capacity, the units occupied and a version; a row per hold; and the Idempotency-Key records, each
// inserted under a unique key in the transaction whose answer it keeps.
var sqlSchema = []string{
	`CREATE TABLE rush_slots (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		resource_id BIGINT UNSIGNED NOT NULL,
		slot_start DATETIME NOT NULL,
		slot_end DATETIME NOT NULL,
		capacity INT NOT NULL,
		occupied INT NOT NULL DEFAULT 0,
		version BIGINT NOT NULL DEFAULT 0,
		price_cents BIGINT NOT NULL,
		UNIQUE KEY rush_slots_resource_start (resource_id, slot_start)
	) ENGINE=InnoDB`,
	`CREATE TABLE rush_holds (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		slot_id BIGINT UNSIGNED NOT NULL,
		user_id VARCHAR(128) NOT NULL,
		quantity INT NOT NULL,
		amount_cents BIGINT NOT NULL,
		expires_at DATETIME(3) NOT NULL,
		created_at DATETIME(3) NOT NULL,
		KEY rush_holds_slot (slot_id)
	) ENGINE=InnoDB`,
	`CREATE TABLE rush_idempotency (
		scope CHAR(64) NOT NULL PRIMARY KEY,
		request_hash CHAR(64) NOT NULL,
		status SMALLINT NOT NULL,
		body TEXT NOT NULL,
		created_at DATETIME(3) NOT NULL
	) ENGINE=InnoDB`,
}

// startSQL creates the plain SQL design's tables and slots in db, then starts the binary's
// `bench rush-sql-server` on them.
func startSQL(ctx context.Context, env *Env, cfg Config, db *database, secret []byte, run int) (*system, error) {
	g, err := newGrid(cfg.Slots, time.Now())
	if err != nil {
		return nil, err
	}
	if err := createSQLTables(ctx, db.dsn, cfg, g); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	settings := append([]string{"SLOTWHEEL_HTTP_ADDR=" + addr, "SLOTWHEEL_MYSQL_DSN=" + db.dsn,
		"SLOTWHEEL_JWT_SECRET=" + string(secret), "SLOTWHEEL_HOLD_TTL=" + holdTTL.String()}, poolSettings(env.Pool)...)
	c, err := startChild(DesignSQL.Label(), env.Binary, []string{"bench", "rush-sql-server"}, childEnv(settings...),
		logPath(env, DesignSQL, run))
	if err != nil {
		return nil, err
	}
	sys := &system{child: c, base: "http://" + addr, grid: g, capacity: cfg.Capacity,
		check: func(ctx context.Context) (Check, error) { return sqlCheck(ctx, db.dsn) }}
	if err := c.waitReady(ctx, sys.base+"/healthz"); err != nil {
		return nil, errors.Join(err, sys.stop(context.WithoutCancel(ctx)))
	}
	resources := make([]string, cfg.Resources)
	for i := range resources {
		resources[i] = strconv.Itoa(i + 1)
	}
	sys.offer(resources)
	return sys, nil
}

// createSQLTables creates the design's tables with every slot of the sale: resources 1 to
// cfg.Resources, the grid's slots each.
func createSQLTables(ctx context.Context, dsn string, cfg Config, g grid) error {
	db, err := models.MySQLPool(dsn, models.Pool{MaxOpen: 1, MaxIdle: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range sqlSchema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("plain SQL schema: %w", err)
		}
	}
	var rows []string
	var args []any
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		_, err := db.ExecContext(ctx, "INSERT INTO rush_slots (resource_id, slot_start, slot_end, capacity, price_cents) VALUES "+
			strings.Join(rows, ","), args...)
		rows, args = rows[:0], args[:0]
		return err
	}
	for r := range cfg.Resources {
		for j := range g.slots {
			rows = append(rows, "(?, ?, ?, ?, ?)")
			args = append(args, r+1, g.start(j).UTC(), g.start(j).Add(g.length()).UTC(), cfg.Capacity, priceCents)
			if len(rows) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// sqlCheck reads the plain SQL design's own account of the sale: per slot, the larger of its
// occupied column and the units of its holds, against its capacity.
func sqlCheck(ctx context.Context, dsn string) (Check, error) {
	db, err := models.MySQLPool(dsn, models.Pool{MaxOpen: 1, MaxIdle: 1})
	if err != nil {
		return Check{}, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT s.capacity, s.occupied, COALESCE(SUM(h.quantity), 0)
		FROM rush_slots s LEFT JOIN rush_holds h ON h.slot_id = s.id GROUP BY s.id, s.capacity, s.occupied`)
	if err != nil {
		return Check{}, err
	}
	defer rows.Close()
	ch := Check{Source: "its tables: per slot, the larger of occupied and its holds' units, against capacity"}
	for rows.Next() {
		var capacity, occupied, held int
		if err := rows.Scan(&capacity, &occupied, &held); err != nil {
			return Check{}, err
		}
		ch.add(capacity, max(occupied, held))
	}
	return ch, rows.Err()
}

// SQLServer is the plain SQL design of the seeds behind HTTP, as `slotwheel bench rush-sql-server`
// runs it: Gin, the Bearer token check of slotwheel's API (HS256 only, exp required, a sub and a
// known role), a log line per request as slotwheel's API writes, and per hold one transaction on
// its own tables — SELECT … FOR UPDATE of the slot, a check of occupied against capacity, UPDATE
// occupied (and the version), INSERT the hold, and, with an Idempotency-Key, INSERT its record
// under a unique key — then COMMIT: 201, or 409 slot_full. A repeated key is answered with the
// first answer, or 422 idempotency_key_reused for another body. A deadlock or a lock wait timeout
// runs the transaction again, up to five attempts in all, as slotwheel's SQL store does.
type SQLServer struct {
	DSN       string // its database, with the tables startSQL made
	Addr      string // listen address
	JWTSecret []byte
	Pool      models.Pool
	HoldTTL   time.Duration // default 10 minutes
	Logger    *slog.Logger  // default slog.Default()
}

// Run serves until ctx ends, then drains for up to four seconds.
func (s SQLServer) Run(ctx context.Context) error {
	if len(s.JWTSecret) == 0 || s.DSN == "" {
		return errors.New("rush-sql-server: SLOTWHEEL_MYSQL_DSN and SLOTWHEEL_JWT_SECRET are required")
	}
	if s.HoldTTL <= 0 {
		s.HoldTTL = 10 * time.Minute
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	db, err := models.MySQLPool(s.DSN, s.Pool)
	if err != nil {
		return err
	}
	defer db.Close()
	loc, err := time.LoadLocation(benchZone)
	if err != nil {
		return err
	}
	h := &sqlHandler{db: db, secret: s.JWTSecret, ttl: s.HoldTTL, log: s.Logger, loc: loc}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(h.requestID, h.accessLog, gin.Recovery())
	r.GET("/healthz", h.healthz)
	r.GET("/api/v1/availability", h.availability)
	r.POST("/api/v1/holds", h.authenticate, h.hold)
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("SLOTWHEEL_HTTP_ADDR: listen on %s: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.Logger.Info("plain SQL design listening", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	// A client's transport may have dialled a connection it never sent a request on; Shutdown
	// counts such a connection as active for five seconds, so after the grace the rest is closed.
	sctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return srv.Close()
	}
	return nil
}

type sqlHandler struct {
	db     *sql.DB
	secret []byte
	ttl    time.Duration
	log    *slog.Logger
	loc    *time.Location // of the venue: availability's dates
}

const (
	ctxRequestID = "request_id"
	ctxUser      = "user"
	holdsPath    = "/api/v1/holds"
)

func (h *sqlHandler) requestID(c *gin.Context) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	c.Set(ctxRequestID, id)
	c.Header("X-Request-Id", id)
}

func (h *sqlHandler) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if c.Writer.Status() >= 500 {
		level = slog.LevelError
	}
	h.log.Log(c.Request.Context(), level, "http request", "request_id", c.GetString(ctxRequestID), "method", c.Request.Method,
		"path", c.Request.URL.Path, "route", c.FullPath(), "status", c.Writer.Status(), "latency", time.Since(start), "bytes", c.Writer.Size())
}

// errorBody is docs/API.md's error answer.
func errorBody(code, message, requestID string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message, "request_id": requestID}})
	return b
}

func (h *sqlHandler) fail(c *gin.Context, status int, code, message string) {
	c.Abort()
	c.Data(status, "application/json; charset=utf-8", errorBody(code, message, c.GetString(ctxRequestID)))
}

func (h *sqlHandler) healthz(c *gin.Context) {
	if err := h.db.PingContext(c.Request.Context()); err != nil {
		h.fail(c, http.StatusServiceUnavailable, "storage_unavailable", err.Error())
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// sqlClaims are docs/API.md's token claims.
type sqlClaims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

func (h *sqlHandler) authenticate(c *gin.Context) {
	tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	var cl sqlClaims
	if ok {
		_, err := jwt.ParseWithClaims(tok, &cl, func(*jwt.Token) (any, error) { return h.secret, nil },
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired())
		ok = err == nil && cl.Subject != "" && len(cl.Subject) <= 128 &&
			(cl.Role == "user" || cl.Role == "staff" || cl.Role == "admin")
	}
	if !ok {
		h.fail(c, http.StatusUnauthorized, "unauthenticated", "a valid Bearer token is required")
		return
	}
	c.Set(ctxUser, cl.Subject)
}

// availability answers a resource's day, as slotwheel's GET /api/v1/availability does.
func (h *sqlHandler) availability(c *gin.Context) {
	rid, err := strconv.ParseUint(c.Query("resource_id"), 10, 64)
	day, derr := time.ParseInLocation(time.DateOnly, c.Query("date"), h.loc)
	if err != nil || derr != nil {
		h.fail(c, http.StatusBadRequest, "invalid_request", "resource_id and date=YYYY-MM-DD are required")
		return
	}
	rows, err := h.db.QueryContext(c.Request.Context(), `SELECT slot_start, slot_end, capacity, occupied FROM rush_slots
		WHERE resource_id = ? AND slot_start >= ? AND slot_start < ? ORDER BY slot_start`, rid, day.UTC(), day.AddDate(0, 0, 1).UTC())
	if err != nil {
		h.internal(c, err)
		return
	}
	defer rows.Close()
	type slot struct {
		Start      string `json:"start"`
		End        string `json:"end"`
		Available  bool   `json:"available"`
		Remaining  int    `json:"remaining"`
		ResourceID string `json:"resource_id"`
	}
	slots := []slot{}
	for rows.Next() {
		var start, end time.Time
		var capacity, occupied int
		if err := rows.Scan(&start, &end, &capacity, &occupied); err != nil {
			h.internal(c, err)
			return
		}
		slots = append(slots, slot{Start: start.In(h.loc).Format(time.RFC3339), End: end.In(h.loc).Format(time.RFC3339),
			Available: occupied < capacity, Remaining: max(capacity-occupied, 0), ResourceID: c.Query("resource_id")})
	}
	if err := rows.Err(); err != nil {
		h.internal(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"slots": slots})
}

func (h *sqlHandler) internal(c *gin.Context, err error) {
	h.log.Error("request failed", "request_id", c.GetString(ctxRequestID), "err", err)
	h.fail(c, http.StatusInternalServerError, "internal", "internal error")
}

// sqlHoldRequest is a hold's body: {resource_id, start, end, quantity}.
type sqlHoldRequest struct {
	resourceID uint64
	start, end time.Time
	quantity   int
}

func parseHoldRequest(body []byte) (sqlHoldRequest, error) {
	var in struct {
		ResourceID json.RawMessage `json:"resource_id"`
		Start      *time.Time      `json:"start"`
		End        *time.Time      `json:"end"`
		Quantity   *int            `json:"quantity"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return sqlHoldRequest{}, fmt.Errorf("body: %w", err)
	}
	id, err := strconv.ParseUint(strings.Trim(string(in.ResourceID), `"`), 10, 64)
	if err != nil || in.Start == nil || in.End == nil {
		return sqlHoldRequest{}, errors.New("resource_id, start and end are required")
	}
	r := sqlHoldRequest{resourceID: id, start: *in.Start, end: *in.End, quantity: 1}
	if in.Quantity != nil {
		r.quantity = *in.Quantity
	}
	if r.quantity < 1 || r.quantity > 100 {
		return sqlHoldRequest{}, errors.New("quantity must be between 1 and 100")
	}
	return r, nil
}

// sqlAnswer is what a hold answers, as sent and as its idempotency record keeps it.
type sqlAnswer struct {
	status   int
	body     []byte
	replayed bool
}

const maxAttempts = 5

func (h *sqlHandler) hold(c *gin.Context) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, 64<<10))
	if err != nil {
		h.fail(c, http.StatusBadRequest, "invalid_request", "unreadable body")
		return
	}
	req, err := parseHoldRequest(body)
	if err != nil {
		h.fail(c, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 255 {
		h.fail(c, http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key is longer than 255 characters")
		return
	}
	var a sqlAnswer
	for attempt := 1; ; attempt++ {
		a, err = h.holdTx(c.Request.Context(), c.GetString(ctxUser), c.GetString(ctxRequestID), req, key, body)
		var me *mysqldriver.MySQLError
		if err == nil || attempt == maxAttempts || !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			break
		}
	}
	if err != nil {
		h.internal(c, err)
		return
	}
	if a.replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.Data(a.status, "application/json; charset=utf-8", a.body)
}

// holdTx is one attempt at a hold: one transaction.
func (h *sqlHandler) holdTx(ctx context.Context, user, requestID string, req sqlHoldRequest, key string, body []byte) (sqlAnswer, error) {
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return sqlAnswer{}, err
	}
	defer func() { _ = tx.Rollback() }() // after a COMMIT, a no-op
	var slotID uint64
	var end time.Time
	var capacity, occupied int
	var version, price int64
	err = tx.QueryRowContext(ctx, `SELECT id, slot_end, capacity, occupied, version, price_cents FROM rush_slots
		WHERE resource_id = ? AND slot_start = ? FOR UPDATE`, req.resourceID, req.start.UTC()).Scan(&slotID, &end, &capacity, &occupied, &version, &price)
	var a sqlAnswer
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && !end.Equal(req.end)):
		return sqlAnswer{status: http.StatusNotFound, body: errorBody("slot_not_found", "no such slot", requestID)}, nil
	case err != nil:
		return sqlAnswer{}, err
	case occupied+req.quantity > capacity:
		a = sqlAnswer{status: http.StatusConflict, body: errorBody("slot_full", "every unit of this slot is taken", requestID)}
	default:
		if a, err = h.take(ctx, tx, user, req, slotID, version, price); err != nil {
			return sqlAnswer{}, err
		}
	}
	if key != "" {
		sum := sha256.Sum256([]byte(user + "\x00POST\x00" + holdsPath + "\x00" + key))
		scope, hash := hex.EncodeToString(sum[:]), sha256.Sum256(body)
		_, err = tx.ExecContext(ctx, `INSERT INTO rush_idempotency (scope, request_hash, status, body, created_at) VALUES (?, ?, ?, ?, ?)`,
			scope, hex.EncodeToString(hash[:]), a.status, a.body, time.Now().UTC())
		var me *mysqldriver.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			_ = tx.Rollback()
			return h.replay(ctx, scope, hex.EncodeToString(hash[:]), requestID)
		}
		if err != nil {
			return sqlAnswer{}, err
		}
	}
	return a, tx.Commit()
}

// take takes the units of a slot locked FOR UPDATE and inserts the hold.
func (h *sqlHandler) take(ctx context.Context, tx *sql.Tx, user string, req sqlHoldRequest, slotID uint64, version, price int64) (sqlAnswer, error) {
	res, err := tx.ExecContext(ctx, `UPDATE rush_slots SET occupied = occupied + ?, version = version + 1 WHERE id = ? AND version = ?`,
		req.quantity, slotID, version)
	if err != nil {
		return sqlAnswer{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return sqlAnswer{}, fmt.Errorf("slot %d changed under its lock (%d rows, %v)", slotID, n, err)
	}
	now := time.Now().UTC()
	expires := now.Add(h.ttl)
	res, err = tx.ExecContext(ctx, `INSERT INTO rush_holds (slot_id, user_id, quantity, amount_cents, expires_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, slotID, user, req.quantity, price*int64(req.quantity), expires, now)
	if err != nil {
		return sqlAnswer{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return sqlAnswer{}, err
	}
	b, err := json.Marshal(map[string]any{"hold_id": strconv.FormatInt(id, 10), "status": "HELD", "user_id": user,
		"resource_id": strconv.FormatUint(req.resourceID, 10), "quantity": req.quantity, "start": req.start.Format(time.RFC3339),
		"end": req.end.Format(time.RFC3339), "expires_at": expires.In(h.loc).Format(time.RFC3339), "amount_cents": price * int64(req.quantity)})
	return sqlAnswer{status: http.StatusCreated, body: b}, err
}

// replay answers a repeated Idempotency-Key with the first answer, or 422 for another body.
func (h *sqlHandler) replay(ctx context.Context, scope, hash, requestID string) (sqlAnswer, error) {
	var stored string
	a := sqlAnswer{replayed: true}
	err := h.db.QueryRowContext(ctx, `SELECT request_hash, status, body FROM rush_idempotency WHERE scope = ?`, scope).Scan(&stored, &a.status, &a.body)
	if err != nil {
		return sqlAnswer{}, err
	}
	if stored != hash {
		return sqlAnswer{status: http.StatusUnprocessableEntity, body: errorBody("idempotency_key_reused",
			"this Idempotency-Key was used with another request", requestID)}, nil
	}
	return a, nil
}
