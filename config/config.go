// Package config owns slotwheel's settings: their names, their defaults, how
// the environment and an optional YAML file are merged, how they are
// validated, how they are printed with secrets masked, and the secrets that
// embedded mode generates for itself. It imports no slotwheel package, so
// that every other package (and main) can depend on it without a cycle.
package config

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
)

// EnvPrefix starts the name of every environment variable slotwheel reads.
const EnvPrefix = "SLOTWHEEL_"

// SecretsFileName is the file, beside the SQLite file, in which embedded mode
// keeps the secrets it generated.
const SecretsFileName = "secrets.json"

// Config is every setting of the binary. Load fills it; docs/API.md documents each
// setting under its environment name, and the defaults are the ones listed
// there.
type Config struct {
	// HTTPAddr is the API listener. Defaults to 127.0.0.1:8080 in embedded
	// mode, because dev log-in is on there, and to :8080 otherwise.
	HTTPAddr string
	// MetricsAddr moves /metrics to a listener of its own; empty keeps it on
	// the API listener.
	MetricsAddr string
	// PprofAddr serves net/http/pprof on a listener of its own; empty (the
	// default) serves no profiles at all. Profiles show the program's
	// internals, so it never shares the API's listener.
	PprofAddr string
	// MySQLDSN is a go-sql-driver DSN; empty means the embedded SQLite file.
	MySQLDSN string
	// SQLitePath is the embedded database file; secrets.json lives beside it.
	SQLitePath string
	// RedisURL is redis:// or rediss://; empty means the in-process Redis. With Sentinel it only
	// supplies the password (and user) and the database number: Sentinel names the master.
	RedisURL string
	// RedisPrefix starts every key slotwheel writes, so that deployments and
	// test runs can share one Redis.
	RedisPrefix string

	HoldTTL        time.Duration // how long an unpaid hold lasts
	DefaultGrace   time.Duration // grace after start when no policy matches
	ReleaseHorizon time.Duration // how far ahead release tasks go into Asynq
	RestoreWindow  time.Duration // how long after a release the owner may restore
	CheckinOpens   time.Duration // how long before start check-in opens
	ReminderLead   time.Duration // how long before release the reminder goes out

	JWTSecret     string // HS256 secret of API tokens
	PaymentSecret string // HMAC secret of payment notifications

	WechatAppID   string
	WechatSecret  string
	WechatAPIBase string // code2Session host; tests point it at a fake

	DevLogin    bool // enables POST /api/v1/auth/dev-login
	DevPayments bool // enables POST /api/v1/holds/{id}/confirm

	DashboardUser     string
	DashboardPassword string // empty: only admin Bearer tokens open /monitoring/

	Demo bool // create the demo venue at start if missing

	MySQLMaxOpenConns int  // pool size of this instance
	MySQLMaxIdleConns int  // idle connections kept
	AutoMigrate       bool // create or upgrade the schema at start
	RedisCluster      bool // RedisURL is a Redis Cluster seed list
	ReleaseQueues     int  // release queues the tasks spread over (one Cluster slot each)
	// MySQLReplicaDSNs are read replicas of MySQLDSN, comma-separated: only the reads README's
	// routing table names as replica-safe go to them (ReplicaDSNs lists them).
	MySQLReplicaDSNs string
	// MySQLReplicaMaxLag: a replica further behind than this serves no reads.
	MySQLReplicaMaxLag time.Duration
	// RedisSentinelMaster and RedisSentinelAddrs reach Redis through Sentinel: the name of the
	// master the sentinels monitor and their host:port addresses, comma-separated. Both or neither.
	RedisSentinelMaster string
	RedisSentinelAddrs  string
	// StartTimeout bounds how long the start waits for each backend to answer.
	StartTimeout time.Duration
	// RequestTimeout bounds an API request: past it, one waiting on a backend answers 503.
	RequestTimeout time.Duration

	// ReleaseMode is the release mode of venues that set none: on, off or dry_run.
	ReleaseMode string
	// CORSOrigins lists the origins (comma-separated, or *) whose browser pages may call the API;
	// empty turns CORS off.
	CORSOrigins string

	MaxActiveHolds int // a user's unpaid holds at one venue; 0: no bound
	RateLimitPerIP int // requests per second from one client address; 0: off

	// WeChat Pay API v3 (direct merchant, JSAPI). All of them or none; WechatAppID is the payer's app.
	WechatPayMchID       string
	WechatPaySerial      string // the merchant API certificate's serial
	WechatPayPrivateKey  string // path of the merchant's private key (apiclient_key.pem)
	WechatPayAPIv3Key    string // 32 bytes
	WechatPayPublicKey   string // path of the WeChat Pay public key or platform certificate (PEM)
	WechatPayPublicKeyID string // the public key's id (PUB_KEY_ID_…); a certificate names its own serial
	WechatPayNotifyURL   string // where WeChat Pay posts payment and refund notifications
	WechatPayAPIBase     string

	dashboardPasswordGenerated bool
}

// setting ties a YAML key (and through it an environment variable) to a field.
type setting struct {
	key string
	// field returns a *string, *time.Duration, *bool or *int inside c.
	field func(c *Config) any
	// mask hides what must not reach a log; nil prints the value as is.
	mask func(string) string
}

func (s setting) env() string { return EnvPrefix + strings.ToUpper(s.key) }

// settings is in the order the start-up log prints them.
var settings = []setting{
	{key: "http_addr", field: func(c *Config) any { return &c.HTTPAddr }},
	{key: "metrics_addr", field: func(c *Config) any { return &c.MetricsAddr }},
	{key: "pprof_addr", field: func(c *Config) any { return &c.PprofAddr }},
	{key: "mysql_dsn", field: func(c *Config) any { return &c.MySQLDSN }, mask: maskDSN},
	{key: "sqlite_path", field: func(c *Config) any { return &c.SQLitePath }},
	{key: "redis_url", field: func(c *Config) any { return &c.RedisURL }, mask: maskRedisURL},
	{key: "redis_prefix", field: func(c *Config) any { return &c.RedisPrefix }},
	{key: "hold_ttl", field: func(c *Config) any { return &c.HoldTTL }},
	{key: "default_grace", field: func(c *Config) any { return &c.DefaultGrace }},
	{key: "release_horizon", field: func(c *Config) any { return &c.ReleaseHorizon }},
	{key: "restore_window", field: func(c *Config) any { return &c.RestoreWindow }},
	{key: "checkin_opens", field: func(c *Config) any { return &c.CheckinOpens }},
	{key: "reminder_lead", field: func(c *Config) any { return &c.ReminderLead }},
	{key: "jwt_secret", field: func(c *Config) any { return &c.JWTSecret }, mask: maskAll},
	{key: "payment_secret", field: func(c *Config) any { return &c.PaymentSecret }, mask: maskAll},
	{key: "wechat_appid", field: func(c *Config) any { return &c.WechatAppID }},
	{key: "wechat_secret", field: func(c *Config) any { return &c.WechatSecret }, mask: maskAll},
	{key: "wechat_api_base", field: func(c *Config) any { return &c.WechatAPIBase }},
	{key: "dev_login", field: func(c *Config) any { return &c.DevLogin }},
	{key: "dev_payments", field: func(c *Config) any { return &c.DevPayments }},
	{key: "dashboard_user", field: func(c *Config) any { return &c.DashboardUser }},
	{key: "dashboard_password", field: func(c *Config) any { return &c.DashboardPassword }, mask: maskAll},
	{key: "demo", field: func(c *Config) any { return &c.Demo }},
	{key: "mysql_max_open_conns", field: func(c *Config) any { return &c.MySQLMaxOpenConns }},
	{key: "mysql_max_idle_conns", field: func(c *Config) any { return &c.MySQLMaxIdleConns }},
	{key: "mysql_replica_dsns", field: func(c *Config) any { return &c.MySQLReplicaDSNs }, mask: maskDSNList},
	{key: "mysql_replica_max_lag", field: func(c *Config) any { return &c.MySQLReplicaMaxLag }},
	{key: "auto_migrate", field: func(c *Config) any { return &c.AutoMigrate }},
	{key: "redis_cluster", field: func(c *Config) any { return &c.RedisCluster }},
	{key: "redis_sentinel_master", field: func(c *Config) any { return &c.RedisSentinelMaster }},
	{key: "redis_sentinel_addrs", field: func(c *Config) any { return &c.RedisSentinelAddrs }},
	{key: "release_queues", field: func(c *Config) any { return &c.ReleaseQueues }},
	{key: "start_timeout", field: func(c *Config) any { return &c.StartTimeout }},
	{key: "request_timeout", field: func(c *Config) any { return &c.RequestTimeout }},
	{key: "release_mode", field: func(c *Config) any { return &c.ReleaseMode }},
	{key: "cors_origins", field: func(c *Config) any { return &c.CORSOrigins }},
	{key: "max_active_holds", field: func(c *Config) any { return &c.MaxActiveHolds }},
	{key: "rate_limit_per_ip", field: func(c *Config) any { return &c.RateLimitPerIP }},
	{key: "wechatpay_mchid", field: func(c *Config) any { return &c.WechatPayMchID }},
	{key: "wechatpay_serial", field: func(c *Config) any { return &c.WechatPaySerial }},
	{key: "wechatpay_private_key", field: func(c *Config) any { return &c.WechatPayPrivateKey }},
	{key: "wechatpay_apiv3_key", field: func(c *Config) any { return &c.WechatPayAPIv3Key }, mask: maskAll},
	{key: "wechatpay_public_key", field: func(c *Config) any { return &c.WechatPayPublicKey }},
	{key: "wechatpay_public_key_id", field: func(c *Config) any { return &c.WechatPayPublicKeyID }},
	{key: "wechatpay_notify_url", field: func(c *Config) any { return &c.WechatPayNotifyURL }},
	{key: "wechatpay_api_base", field: func(c *Config) any { return &c.WechatPayAPIBase }},
}

var settingByKey = func() map[string]setting {
	m := make(map[string]setting, len(settings))
	for _, s := range settings {
		m[s.key] = s
	}
	return m
}()

// ClusterReleaseQueues is how many release queues a Redis Cluster gets unless SLOTWHEEL_RELEASE_QUEUES
// says otherwise: each queue lives in one hash slot, and eight spread over every master of a
// three-master cluster (and most others).
const ClusterReleaseQueues = 8

func defaults(embedded, embeddedSQL bool) Config {
	c := Config{
		HTTPAddr:       ":8080",
		SQLitePath:     "./data/slotwheel.db",
		RedisPrefix:    "sw",
		HoldTTL:        10 * time.Minute,
		DefaultGrace:   15 * time.Minute,
		ReleaseHorizon: time.Hour,
		RestoreWindow:  30 * time.Minute,
		CheckinOpens:   30 * time.Minute,
		ReminderLead:   15 * time.Minute,
		WechatAPIBase:  wechatmsg.DefaultAPIBase,
		DashboardUser:  "admin",

		MySQLMaxOpenConns:  32,
		MySQLMaxIdleConns:  8,
		MySQLReplicaMaxLag: 5 * time.Second,
		ReleaseQueues:      1,
		StartTimeout:       20 * time.Second,
		RequestTimeout:     10 * time.Second,
		ReleaseMode:        "on",
		MaxActiveHolds:     5,
		WechatPayAPIBase:   wechatpay.DefaultAPIBase,
	}
	if embedded {
		// Dev log-in hands out admin tokens to anyone who asks, so an
		// embedded instance must not listen beyond this machine by default.
		c.HTTPAddr = "127.0.0.1:8080"
		c.DevLogin, c.DevPayments, c.Demo = true, true, true
	}
	// A MySQL schema is changed only by `slotwheel migrate`, so that instances
	// starting together do not race on it; the SQLite file has one instance.
	c.AutoMigrate = embeddedSQL
	return c
}

// raw is one setting as written, with where it was written so that an error
// can point the operator at the right line or variable.
type raw struct {
	text   string
	origin string
}

// Load reads the YAML file at path (none when path is empty), then the
// environment through env (os.LookupEnv in production; nil reads nothing),
// which wins over the file. An empty value in either place leaves the setting
// at its default, so that a compose file can pass an optional variable
// through unset. Every problem found is reported at once, each naming the
// variable or file key at fault.
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	given := make(map[string]raw, len(settings))
	if path != "" {
		if err := readFile(path, given); err != nil {
			return nil, err
		}
	}
	if env != nil {
		for _, s := range settings {
			if v, ok := env(s.env()); ok && v != "" {
				given[s.key] = raw{text: v, origin: s.env()}
			}
		}
	}

	// Which defaults apply depends on the backends, so they are known first. Sentinel is a real
	// Redis even without a URL, which then only carries a password.
	embeddedRedis := given["redis_url"].text == "" && given["redis_sentinel_master"].text == "" &&
		given["redis_sentinel_addrs"].text == ""
	c := defaults(given["mysql_dsn"].text == "" && embeddedRedis, given["mysql_dsn"].text == "")
	var errs []error
	for _, s := range settings {
		r, ok := given[s.key]
		if !ok {
			continue
		}
		if err := parseInto(s.field(&c), r.text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.origin, err))
		}
	}
	if len(errs) > 0 {
		// Validating half-parsed values would only add noise.
		return nil, errors.Join(errs...)
	}
	// On a cluster one release queue would put every release on one master.
	if _, set := given["release_queues"]; c.RedisCluster && !set {
		c.ReleaseQueues = ClusterReleaseQueues
	}
	name := func(key string) string {
		if r, ok := given[key]; ok {
			return r.origin
		}
		return settingByKey[key].env()
	}
	if err := errors.Join(c.validate(name)...); err != nil {
		return nil, err
	}
	return &c, nil
}

func readFile(path string, given map[string]raw) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: want a mapping of settings at the top level", path, root.Line)
	}
	var errs []error
	seen := make(map[string]bool, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		if _, ok := settingByKey[k.Value]; !ok {
			errs = append(errs, fmt.Errorf("config file %s: unknown key %q%s", where, k.Value, keyHint(k.Value)))
			continue
		}
		if seen[k.Value] {
			errs = append(errs, fmt.Errorf("config file %s: key %q given twice", where, k.Value))
			continue
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("config file %s: %s wants a single value", where, k.Value))
			continue
		}
		if v.Tag == "!!null" || v.Value == "" {
			continue
		}
		given[k.Value] = raw{text: v.Value, origin: fmt.Sprintf("%s (%s)", k.Value, where)}
	}
	return errors.Join(errs...)
}

// keyHint catches the likeliest slip: copying a variable name into the file.
func keyHint(key string) string {
	guess := strings.ToLower(strings.TrimPrefix(strings.ToUpper(key), EnvPrefix))
	if _, ok := settingByKey[guess]; ok && guess != key {
		return fmt.Sprintf(" (did you mean %q? file keys are lower case without the %s prefix)", guess, EnvPrefix)
	}
	return ""
}

func parseInto(dst any, text string) error {
	switch p := dst.(type) {
	case *string:
		*p = text
	case *time.Duration:
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("%q is not a duration (want a Go duration such as \"10m\")", text)
		}
		*p = d
	case *bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (want true or false)", text)
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(text)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", text)
		}
		*p = n
	default:
		panic(fmt.Sprintf("config: setting of unsupported type %T", dst))
	}
	return nil
}

// validate returns every problem with c; name gives the variable or file key
// a setting came from.
func (c *Config) validate(name func(key string) string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"hold_ttl", c.HoldTTL},
		{"default_grace", c.DefaultGrace},
		{"release_horizon", c.ReleaseHorizon},
		{"restore_window", c.RestoreWindow},
		{"checkin_opens", c.CheckinOpens},
		{"reminder_lead", c.ReminderLead},
		{"start_timeout", c.StartTimeout},
		{"request_timeout", c.RequestTimeout},
		{"mysql_replica_max_lag", c.MySQLReplicaMaxLag},
	} {
		if d.v <= 0 {
			fail("%s must be positive, not %s", name(d.key), d.v)
		}
	}
	// The wheel ticks about once a second; a shorter hold would expire
	// before the customer could pay for it.
	if c.HoldTTL > 0 && c.HoldTTL < time.Second {
		fail("%s must be at least 1s, not %s", name("hold_ttl"), c.HoldTTL)
	}
	// A confirm waits up to 5 s for its commit; a shorter request would cut every slow commit into
	// an answer that cannot say whether it happened.
	if c.RequestTimeout > 0 && (c.RequestTimeout < 5*time.Second || c.RequestTimeout > 5*time.Minute) {
		fail("%s must be between 5s and 5m, not %s", name("request_timeout"), c.RequestTimeout)
	}

	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		fail("%s: %q is not a host:port address", name("http_addr"), c.HTTPAddr)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			fail("%s: %q is not a host:port address", name("metrics_addr"), c.MetricsAddr)
		} else if c.MetricsAddr == c.HTTPAddr {
			fail("%s must differ from %s; leave it empty to serve /metrics on the API listener",
				name("metrics_addr"), name("http_addr"))
		}
	}
	if c.PprofAddr != "" {
		if _, _, err := net.SplitHostPort(c.PprofAddr); err != nil {
			fail("%s: %q is not a host:port address (e.g. 127.0.0.1:6060)", name("pprof_addr"), c.PprofAddr)
		} else if c.PprofAddr == c.HTTPAddr || c.PprofAddr == c.MetricsAddr {
			fail("%s must differ from %s and %s: profiles get a listener of their own",
				name("pprof_addr"), name("http_addr"), name("metrics_addr"))
		}
	}

	// Neither message below quotes the value: it may carry a password.
	if c.MySQLDSN != "" {
		if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
			fail("%s is not a valid MySQL DSN (want user:password@tcp(host:3306)/db?parseTime=true): %v",
				name("mysql_dsn"), err)
		}
	}
	if c.MySQLReplicaDSNs != "" {
		if c.MySQLDSN == "" {
			fail("%s needs %s: the embedded SQLite file has no replicas", name("mysql_replica_dsns"), name("mysql_dsn"))
		}
		for i, dsn := range c.ReplicaDSNs() {
			if _, err := mysql.ParseDSN(dsn); err != nil {
				fail("%s: replica %d is not a valid MySQL DSN (want user:password@tcp(host:3306)/db?parseTime=true): %v",
					name("mysql_replica_dsns"), i+1, err)
			}
		}
	}
	sentinel := c.RedisSentinelMaster != "" || c.RedisSentinelAddrs != ""
	switch {
	case sentinel:
		errs = append(errs, c.validateSentinel(name)...)
	case c.RedisURL != "":
		if err := checkRedisURL(c.RedisURL, c.RedisCluster); err != nil {
			fail("%s %v", name("redis_url"), err)
		}
	case c.RedisCluster:
		fail("%s needs %s (the cluster's seed list)", name("redis_cluster"), name("redis_url"))
	}
	if c.MySQLMaxOpenConns < 1 || c.MySQLMaxOpenConns > 1000 {
		fail("%s must be between 1 and 1000, not %d", name("mysql_max_open_conns"), c.MySQLMaxOpenConns)
	}
	if c.MySQLMaxIdleConns < 0 || c.MySQLMaxIdleConns > c.MySQLMaxOpenConns {
		fail("%s must be between 0 and %s (%d), not %d", name("mysql_max_idle_conns"), name("mysql_max_open_conns"),
			c.MySQLMaxOpenConns, c.MySQLMaxIdleConns)
	}
	if c.ReleaseQueues < 1 || c.ReleaseQueues > 64 {
		fail("%s must be between 1 and 64, not %d", name("release_queues"), c.ReleaseQueues)
	}

	switch {
	case c.RedisPrefix == "":
		fail("%s must not be empty", name("redis_prefix"))
	case strings.ContainsFunc(c.RedisPrefix, func(r rune) bool { return unicode.IsSpace(r) || r == '{' || r == '}' }):
		// Braces would move the Cluster hash tag that the key builder adds.
		fail("%s: %q must not contain spaces, '{' or '}'", name("redis_prefix"), c.RedisPrefix)
	}

	switch c.ReleaseMode {
	case "on", "off", "dry_run":
	default:
		fail("%s: %q is not a release mode (want on, off or dry_run)", name("release_mode"), c.ReleaseMode)
	}
	if _, err := c.CORSOriginList(); err != nil {
		fail("%s %v", name("cors_origins"), err)
	}
	if c.MaxActiveHolds < 0 || c.MaxActiveHolds > 1000 {
		fail("%s must be between 0 (no bound) and 1000, not %d", name("max_active_holds"), c.MaxActiveHolds)
	}
	if c.RateLimitPerIP < 0 || c.RateLimitPerIP > 1_000_000 {
		fail("%s must be between 0 (off) and 1000000, not %d", name("rate_limit_per_ip"), c.RateLimitPerIP)
	}
	errs = append(errs, c.validateWechatPay(name)...)

	if u, err := url.Parse(c.WechatAPIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail("%s: %q is not an http(s) URL", name("wechat_api_base"), c.WechatAPIBase)
	}
	if (c.WechatAppID == "") != (c.WechatSecret == "") {
		fail("%s and %s must be set together", name("wechat_appid"), name("wechat_secret"))
	}

	if !c.Embedded() {
		// Only embedded mode may generate secrets: several processes
		// sharing real backends must agree on them.
		why := c.realBackends()
		if c.JWTSecret == "" {
			fail("%s is required because %s", name("jwt_secret"), why)
		}
		if c.PaymentSecret == "" {
			fail("%s is required because %s", name("payment_secret"), why)
		}
		// A short or placeholder secret lets anyone mint tokens or payment notifications.
		for _, sec := range []struct{ key, v string }{
			{"jwt_secret", c.JWTSecret}, {"payment_secret", c.PaymentSecret}, {"dashboard_password", c.DashboardPassword},
		} {
			if sec.v != "" {
				if err := checkSecret(sec.v); err != nil {
					fail("%s %v", name(sec.key), err)
				}
			}
		}
	}
	return errs
}

// validateSentinel checks the Sentinel settings: both or neither, every address a host:port, not
// with a cluster, and the URL, if any, good for its password and database number.
func (c *Config) validateSentinel(name func(string) string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.RedisSentinelMaster == "" || len(c.SentinelAddrs()) == 0 {
		fail("%s and %s must be set together (the master's name and the sentinels' host:port list)",
			name("redis_sentinel_master"), name("redis_sentinel_addrs"))
	}
	if strings.ContainsFunc(c.RedisSentinelMaster, unicode.IsSpace) {
		// Sentinel's commands and events separate their arguments with spaces.
		fail("%s: %q must not contain spaces", name("redis_sentinel_master"), c.RedisSentinelMaster)
	}
	for _, a := range c.SentinelAddrs() {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			fail("%s: %q is not a host:port address (want host1:26379,host2:26379,...)", name("redis_sentinel_addrs"), a)
		}
	}
	if c.RedisCluster {
		fail("%s and %s are exclusive: Sentinel watches one master and its replicas, a cluster fails over by itself",
			name("redis_sentinel_master"), name("redis_cluster"))
	}
	if c.RedisURL != "" {
		if err := checkSentinelURL(c.RedisURL); err != nil {
			fail("%s %v", name("redis_url"), err)
		}
	}
	return errs
}

// ReplicaDSNs lists the DSNs of MySQLReplicaDSNs, spaces trimmed and empty entries dropped; nil
// without replicas. The list is split on commas, so a replica's password cannot hold one.
func (c Config) ReplicaDSNs() []string {
	var out []string
	for _, d := range strings.Split(c.MySQLReplicaDSNs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// SentinelAddrs lists the sentinels of RedisSentinelAddrs, spaces trimmed and empty entries
// dropped; nil without Sentinel.
func (c Config) SentinelAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.RedisSentinelAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// WechatPay reports whether WeChat Pay is configured.
func (c Config) WechatPay() bool { return c.WechatPayMchID != "" }

// validateWechatPay checks the WeChat Pay settings: all of them or none, keys readable, the API v3
// key 32 bytes. Key files are read again (and parsed) when the binary wires the client.
func (c *Config) validateWechatPay(name func(string) string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	required := []struct{ key, v string }{
		{"wechatpay_mchid", c.WechatPayMchID}, {"wechatpay_serial", c.WechatPaySerial},
		{"wechatpay_private_key", c.WechatPayPrivateKey}, {"wechatpay_apiv3_key", c.WechatPayAPIv3Key},
		{"wechatpay_public_key", c.WechatPayPublicKey}, {"wechatpay_notify_url", c.WechatPayNotifyURL},
	}
	set := 0
	for _, r := range required {
		if r.v != "" {
			set++
		}
	}
	if set == 0 && c.WechatPayPublicKeyID == "" {
		return nil
	}
	for _, r := range required {
		if r.v == "" {
			fail("%s is required: WeChat Pay is configured (%s is set)", name(r.key), name("wechatpay_mchid"))
		}
	}
	if c.WechatAppID == "" {
		fail("%s is required with WeChat Pay: it is the app whose users pay", name("wechat_appid"))
	}
	if c.WechatPayAPIv3Key != "" && len(c.WechatPayAPIv3Key) != 32 {
		fail("%s must be the 32-byte API v3 key, not %d bytes", name("wechatpay_apiv3_key"), len(c.WechatPayAPIv3Key))
	}
	for _, k := range []string{"wechatpay_private_key", "wechatpay_public_key"} {
		path := *settingByKey[k].field(c).(*string)
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			fail("%s: cannot read %q: %v", name(k), path, errors.Unwrap(err))
		}
	}
	if c.WechatPayNotifyURL != "" {
		if u, err := url.Parse(c.WechatPayNotifyURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			fail("%s: %q must be an absolute http(s) URL without a query", name("wechatpay_notify_url"), c.WechatPayNotifyURL)
		}
	}
	if u, err := url.Parse(c.WechatPayAPIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail("%s: %q is not an http(s) URL", name("wechatpay_api_base"), c.WechatPayAPIBase)
	}
	return errs
}

// CORSOriginList reads CORSOrigins: nil when CORS is off, ["*"] for any origin, else each origin as
// a browser sends it (scheme://host[:port], no path).
func (c Config) CORSOriginList() ([]string, error) {
	if strings.TrimSpace(c.CORSOrigins) == "" {
		return nil, nil
	}
	var out []string
	for _, o := range strings.Split(c.CORSOrigins, ",") {
		o = strings.TrimSpace(o)
		if o == "*" {
			out = append(out, o)
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("%q is not an origin (want * or scheme://host[:port], comma-separated)", o)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}

// MinSecretLen is the shortest secret accepted outside embedded mode: 256 bits, an HS256 key.
const MinSecretLen = 32

// checkSecret refuses a secret that is too short or a placeholder such as the compose file's
// examples. It never quotes the secret.
func checkSecret(v string) error {
	if strings.HasPrefix(strings.ToLower(v), "change-me") || strings.HasPrefix(strings.ToLower(v), "changeme") {
		return errors.New("is a placeholder (starts with change-me); set a random secret, e.g. `openssl rand -base64 32`")
	}
	if len(v) < MinSecretLen {
		return fmt.Errorf("is %d bytes; at least %d are required, e.g. `openssl rand -base64 32`", len(v), MinSecretLen)
	}
	return nil
}

func (c *Config) realBackends() string {
	redisSetting := EnvPrefix + "REDIS_URL"
	switch {
	case c.RedisSentinelMaster != "":
		redisSetting = EnvPrefix + "REDIS_SENTINEL_MASTER"
	case c.RedisSentinelAddrs != "":
		redisSetting = EnvPrefix + "REDIS_SENTINEL_ADDRS"
	}
	switch {
	case !c.EmbeddedSQL() && !c.EmbeddedRedis():
		return "MySQL and Redis are not embedded (" + EnvPrefix + "MYSQL_DSN and " + redisSetting + " are set)"
	case !c.EmbeddedSQL():
		return "MySQL is not embedded (" + EnvPrefix + "MYSQL_DSN is set)"
	default:
		return "Redis is not embedded (" + redisSetting + " is set)"
	}
}

func checkRedisURL(s string, cluster bool) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a valid URL (want redis://[:password@]host:port/db)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("has scheme %q, not redis or rediss", u.Scheme)
	}
	// go-redis quietly dials localhost without a host, which hides a typo
	// such as "redis:6379".
	if u.Host == "" {
		return errors.New("has no host (want redis://[:password@]host:port/db)")
	}
	if cluster {
		if _, err := redis.ParseClusterURL(s); err != nil {
			return fmt.Errorf("is refused by go-redis as a cluster seed list: %w", err)
		}
		return nil
	}
	if _, err := redis.ParseURL(s); err != nil {
		return fmt.Errorf("is refused by go-redis: %w", err)
	}
	return nil
}

// checkSentinelURL accepts the URL that, beside Sentinel, only carries the password and database
// number: its host may be left out (redis://:password@/2), and is ignored when given.
func checkSentinelURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return errors.New("is not a valid URL (with Sentinel want redis://[:password@]/db; the host is not used)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("has scheme %q, not redis or rediss", u.Scheme)
	}
	if _, err := redis.ParseURL(s); err != nil {
		return fmt.Errorf("is refused by go-redis: %w", err)
	}
	return nil
}

// EmbeddedSQL reports whether the database is the embedded SQLite file.
func (c Config) EmbeddedSQL() bool { return c.MySQLDSN == "" }

// EmbeddedRedis reports whether Redis is the in-process one: neither a URL nor Sentinel is set.
func (c Config) EmbeddedRedis() bool {
	return c.RedisURL == "" && c.RedisSentinelMaster == "" && c.RedisSentinelAddrs == ""
}

// Embedded reports whether both backends are embedded: the try-it-out mode
// with dev log-in, dev payments, the demo venue and generated secrets.
func (c Config) Embedded() bool { return c.EmbeddedSQL() && c.EmbeddedRedis() }

// SecretsFile is where FillEmbeddedSecrets keeps what it generates.
func (c Config) SecretsFile() string {
	return filepath.Join(filepath.Dir(c.SQLitePath), SecretsFileName)
}

// DashboardPasswordGenerated reports whether FillEmbeddedSecrets supplied the
// dashboard password, freshly or from an earlier start. Main prints it then,
// since an operator who never chose one has no other way to learn it.
func (c Config) DashboardPasswordGenerated() bool { return c.dashboardPasswordGenerated }

// embeddedSecrets is the shape of secrets.json.
type embeddedSecrets struct {
	JWTSecret         string `json:"jwt_secret,omitempty"`
	PaymentSecret     string `json:"payment_secret,omitempty"`
	DashboardPassword string `json:"dashboard_password,omitempty"`
}

// FillEmbeddedSecrets gives an embedded instance the JWT secret, payment
// secret and dashboard password it was not configured with. They are
// generated once and kept in SecretsFile (mode 0600), so that tokens and the
// password survive a restart. Outside embedded mode it does nothing: Load
// already demanded the secrets, and the dashboard password stays optional.
func (c *Config) FillEmbeddedSecrets() error {
	if !c.Embedded() || (c.JWTSecret != "" && c.PaymentSecret != "" && c.DashboardPassword != "") {
		return nil
	}
	path := c.SecretsFile()
	var kept embeddedSecrets
	switch data, err := os.ReadFile(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read embedded secrets: %w", err)
	default:
		// Regenerating over a damaged file would silently log everybody
		// out; better to let the operator look.
		if err := json.Unmarshal(data, &kept); err != nil {
			return fmt.Errorf("read embedded secrets %s: %w (fix or delete the file)", path, err)
		}
	}

	changed := false
	fill := func(configured string, stored *string, generate func() string) string {
		if configured != "" {
			return configured
		}
		if *stored == "" {
			*stored = generate()
			changed = true
		}
		return *stored
	}
	jwt := fill(c.JWTSecret, &kept.JWTSecret, randomSecret)
	payment := fill(c.PaymentSecret, &kept.PaymentSecret, randomSecret)
	generatedPassword := c.DashboardPassword == ""
	password := fill(c.DashboardPassword, &kept.DashboardPassword, rand.Text)

	if changed {
		if err := writeSecrets(path, kept); err != nil {
			return err
		}
	}
	c.JWTSecret, c.PaymentSecret, c.DashboardPassword = jwt, payment, password
	c.dashboardPasswordGenerated = generatedPassword
	return nil
}

// randomSecret has 256 bits, the size of an HS256 key.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails: crypto/rand aborts the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}

// writeSecrets replaces the file in one rename so that a crash mid-write
// cannot leave a half-written file that the next start would refuse.
func writeSecrets(path string, s embeddedSecrets) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode embedded secrets: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory for embedded secrets: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".secrets-*.json") // created 0600
	if err != nil {
		return fmt.Errorf("write embedded secrets: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write embedded secrets: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write embedded secrets: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write embedded secrets: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write embedded secrets: %w", err)
	}
	return nil
}

// The printing methods below take Config by value, unlike FillEmbeddedSecrets,
// so that printing a Config value (not only a *Config) is masked as well.

// Masked returns every setting by its environment variable name, as text,
// with secrets and the passwords inside MYSQL_DSN and REDIS_URL replaced by
// ***. An empty secret stays empty so that the log shows it is unset.
func (c Config) Masked() map[string]string {
	m := make(map[string]string, len(settings))
	for _, s := range settings {
		m[s.env()] = c.show(s)
	}
	return m
}

// String prints every setting, one NAME=value line each, secrets masked.
func (c Config) String() string {
	var b strings.Builder
	for i, s := range settings {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s.env())
		b.WriteByte('=')
		b.WriteString(c.show(s))
	}
	return b.String()
}

// GoString keeps %#v from bypassing the mask.
func (c Config) GoString() string { return "config.Config{\n" + c.String() + "\n}" }

// LogValue keeps slog, whose JSON handler would otherwise marshal the
// fields, from bypassing the mask.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(settings))
	for _, s := range settings {
		attrs = append(attrs, slog.String(s.key, c.show(s)))
	}
	return slog.GroupValue(attrs...)
}

func (c *Config) show(s setting) string {
	var text string
	switch p := s.field(c).(type) {
	case *string:
		text = *p
	case *time.Duration:
		text = p.String()
	case *bool:
		text = strconv.FormatBool(*p)
	case *int:
		text = strconv.Itoa(*p)
	}
	if s.mask == nil || text == "" {
		return text
	}
	return s.mask(text)
}

const masked = "***"

func maskAll(string) string { return masked }

// maskDSN finds the password where go-sql-driver does: between the first ':'
// and the last '@' before the last '/'. Anything it cannot place is masked
// whole rather than risk printing a password.
func maskDSN(dsn string) string {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return masked
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return dsn // no credentials at all
	}
	colon := strings.IndexByte(dsn[:at], ':')
	if colon < 0 {
		return dsn // a user without a password
	}
	return dsn[:colon+1] + masked + dsn[at:]
}

func maskDSNList(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = maskDSN(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func maskRedisURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return masked
	}
	if u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	// url.URL would escape the stars, so a placeholder that the escaping
	// leaves alone is swapped for them afterwards.
	const placeholder = "MASKEDPASSWORD"
	u.User = url.UserPassword(u.User.Username(), placeholder)
	return strings.Replace(u.String(), ":"+placeholder+"@", ":"+masked+"@", 1)
}
