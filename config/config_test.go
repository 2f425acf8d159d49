package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envOf stands in for os.LookupEnv so that tests never see the real
// environment and can run in parallel.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slotwheel.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const (
	testDSN   = "root:dsn-pass-123@tcp(127.0.0.1:3306)/slotwheel?parseTime=true&loc=UTC"
	testRedis = "redis://:redis-pass-456@127.0.0.1:6379/0"
)

// realEnv is the least a deployment with real backends must set.
func realEnv() map[string]string {
	return map[string]string{
		"SLOTWHEEL_MYSQL_DSN":      testDSN,
		"SLOTWHEEL_REDIS_URL":      testRedis,
		"SLOTWHEEL_JWT_SECRET":     testJWT,
		"SLOTWHEEL_PAYMENT_SECRET": testPay,
	}
}

// testClusterURL is a Redis Cluster's seed list.
const testClusterURL = "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002"

// sentinelEnv is realEnv with Redis reached through Sentinel instead of a URL.
func sentinelEnv() map[string]string {
	env := realEnv()
	delete(env, "SLOTWHEEL_REDIS_URL")
	return withEnv(env, "SLOTWHEEL_REDIS_SENTINEL_MASTER", "slotwheel",
		"SLOTWHEEL_REDIS_SENTINEL_ADDRS", "10.0.0.1:26379, 10.0.0.2:26379,10.0.0.3:26379")
}

// withEnv is env with the pairs (name, value, name, value, …) set.
func withEnv(env map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// Secrets long enough for a deployment with real backends.
const (
	testJWT = "jwt-0123456789abcdef0123456789abcdef"
	testPay = "pay-0123456789abcdef0123456789abcdef"
)

func TestLoadDefaults(t *testing.T) {
	t.Parallel()

	common := Config{
		SQLitePath:     "./data/slotwheel.db",
		RedisPrefix:    "sw",
		HoldTTL:        10 * time.Minute,
		DefaultGrace:   15 * time.Minute,
		ReleaseHorizon: time.Hour,
		RestoreWindow:  30 * time.Minute,
		CheckinOpens:   30 * time.Minute,
		ReminderLead:   15 * time.Minute,
		WechatAPIBase:  "https://api.weixin.qq.com",
		DashboardUser:  "admin",

		MySQLMaxOpenConns:  32,
		MySQLMaxIdleConns:  8,
		MySQLReplicaMaxLag: 5 * time.Second,
		ReleaseQueues:      1,
		StartTimeout:       20 * time.Second,
		RequestTimeout:     10 * time.Second,
		ReleaseMode:        "on",
		MaxActiveHolds:     5,
		WechatPayAPIBase:   "https://api.mch.weixin.qq.com",
	}
	with := func(f func(c *Config)) Config {
		c := common
		f(&c)
		return c
	}

	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{
			name: "embedded",
			env:  nil,
			want: with(func(c *Config) {
				c.HTTPAddr = "127.0.0.1:8080"
				c.DevLogin, c.DevPayments, c.Demo, c.AutoMigrate = true, true, true, true
			}),
		},
		{
			name: "empty variables count as unset",
			env:  map[string]string{"SLOTWHEEL_MYSQL_DSN": "", "SLOTWHEEL_HOLD_TTL": "", "SLOTWHEEL_REDIS_PREFIX": ""},
			want: with(func(c *Config) {
				c.HTTPAddr = "127.0.0.1:8080"
				c.DevLogin, c.DevPayments, c.Demo, c.AutoMigrate = true, true, true, true
			}),
		},
		{
			name: "both backends real",
			env:  realEnv(),
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN, c.RedisURL = testDSN, testRedis
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "only MySQL real",
			env: map[string]string{
				"SLOTWHEEL_MYSQL_DSN":      testDSN,
				"SLOTWHEEL_JWT_SECRET":     testJWT,
				"SLOTWHEEL_PAYMENT_SECRET": testPay,
			},
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN = testDSN
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "a cluster spreads releases over several queues",
			env:  withEnv(realEnv(), "SLOTWHEEL_REDIS_URL", testClusterURL, "SLOTWHEEL_REDIS_CLUSTER", "true"),
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN, c.RedisURL, c.RedisCluster, c.ReleaseQueues = testDSN, testClusterURL, true, ClusterReleaseQueues
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "a cluster's release queues as set",
			env:  withEnv(realEnv(), "SLOTWHEEL_REDIS_URL", testClusterURL, "SLOTWHEEL_REDIS_CLUSTER", "true", "SLOTWHEEL_RELEASE_QUEUES", "3"),
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN, c.RedisURL, c.RedisCluster, c.ReleaseQueues = testDSN, testClusterURL, true, 3
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "Redis through Sentinel needs no URL",
			env:  sentinelEnv(),
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN = testDSN
				c.RedisSentinelMaster, c.RedisSentinelAddrs = "slotwheel", "10.0.0.1:26379, 10.0.0.2:26379,10.0.0.3:26379"
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "Sentinel alone makes Redis real",
			env: map[string]string{
				"SLOTWHEEL_REDIS_SENTINEL_MASTER": "slotwheel", "SLOTWHEEL_REDIS_SENTINEL_ADDRS": "10.0.0.1:26379",
				"SLOTWHEEL_JWT_SECRET": testJWT, "SLOTWHEEL_PAYMENT_SECRET": testPay,
			},
			want: with(func(c *Config) {
				c.HTTPAddr, c.AutoMigrate = ":8080", true
				c.RedisSentinelMaster, c.RedisSentinelAddrs = "slotwheel", "10.0.0.1:26379"
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "Sentinel with a URL for the password and database",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_URL", "redis://:redis-pass-456@/2"),
			want: with(func(c *Config) {
				c.HTTPAddr = ":8080"
				c.MySQLDSN, c.RedisURL = testDSN, "redis://:redis-pass-456@/2"
				c.RedisSentinelMaster, c.RedisSentinelAddrs = "slotwheel", "10.0.0.1:26379, 10.0.0.2:26379,10.0.0.3:26379"
				c.JWTSecret, c.PaymentSecret = testJWT, testPay
			}),
		},
		{
			name: "embedded defaults can be switched off",
			env: map[string]string{
				"SLOTWHEEL_DEV_LOGIN":    "false",
				"SLOTWHEEL_DEV_PAYMENTS": "0",
				"SLOTWHEEL_DEMO":         "FALSE",
				"SLOTWHEEL_HTTP_ADDR":    ":9090",
			},
			want: with(func(c *Config) { c.HTTPAddr, c.AutoMigrate = ":9090", true }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Load("", envOf(tt.env))
			require.NoError(t, err)
			require.Equal(t, tt.want, *got)
		})
	}
}

func TestLoadNilEnvReadsNothing(t *testing.T) {
	t.Parallel()
	got, err := Load("", nil)
	require.NoError(t, err)
	require.True(t, got.Embedded())
}

func TestEmbeddedModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		c                       Config
		embedded, redis, sqlite bool
	}{
		{"both embedded", Config{}, true, true, true},
		{"real MySQL", Config{MySQLDSN: testDSN}, false, true, false},
		{"real Redis", Config{RedisURL: testRedis}, false, false, true},
		{"both real", Config{MySQLDSN: testDSN, RedisURL: testRedis}, false, false, false},
		{"Redis through Sentinel", Config{RedisSentinelMaster: "m", RedisSentinelAddrs: "h:26379"}, false, false, true},
		{"Sentinel with MySQL", Config{MySQLDSN: testDSN, RedisSentinelMaster: "m", RedisSentinelAddrs: "h:26379"}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.embedded, tt.c.Embedded())
			require.Equal(t, tt.redis, tt.c.EmbeddedRedis())
			require.Equal(t, tt.sqlite, tt.c.EmbeddedSQL())
		})
	}
}

func TestSentinelAddrs(t *testing.T) {
	t.Parallel()
	c, err := Load("", envOf(sentinelEnv()))
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"}, c.SentinelAddrs(), "spaces trimmed")
	require.Nil(t, Config{}.SentinelAddrs())
}

func TestReplicaDSNs(t *testing.T) {
	t.Parallel()
	c, err := Load("", envOf(withEnv(realEnv(), "SLOTWHEEL_MYSQL_REPLICA_DSNS",
		" app:pw@tcp(r1:3306)/slotwheel?parseTime=true ,, app:pw@tcp(r2:3306)/slotwheel?parseTime=true")))
	require.NoError(t, err)
	require.Equal(t, []string{"app:pw@tcp(r1:3306)/slotwheel?parseTime=true", "app:pw@tcp(r2:3306)/slotwheel?parseTime=true"},
		c.ReplicaDSNs(), "spaces and empty entries dropped")
	require.Equal(t, 5*time.Second, c.MySQLReplicaMaxLag)
	require.Nil(t, Config{}.ReplicaDSNs())

	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"malformed replica", withEnv(realEnv(), "SLOTWHEEL_MYSQL_REPLICA_DSNS", "app:pw@tcp(r1:3306)/s,app:pw-sekrit@r2:3306/s"),
			[]string{"SLOTWHEEL_MYSQL_REPLICA_DSNS: replica 2 is not a valid MySQL DSN"}},
		{"replicas of SQLite", map[string]string{"SLOTWHEEL_MYSQL_REPLICA_DSNS": "app@tcp(r1:3306)/s"},
			[]string{"SLOTWHEEL_MYSQL_REPLICA_DSNS needs SLOTWHEEL_MYSQL_DSN"}},
		{"no lag allowed", withEnv(realEnv(), "SLOTWHEEL_MYSQL_REPLICA_MAX_LAG", "0s"),
			[]string{"SLOTWHEEL_MYSQL_REPLICA_MAX_LAG must be positive"}},
	} {
		_, err := Load("", envOf(tt.env))
		require.Error(t, err, tt.name)
		for _, w := range tt.want {
			require.Contains(t, err.Error(), w, tt.name)
		}
		require.NotContains(t, err.Error(), "sekrit", "%s: a password never reaches the message", tt.name)
	}
}

func TestLoadEnvBeatsFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
http_addr: ":7070"
hold_ttl: 5m
redis_prefix: fromfile
dev_login: false
`)
	got, err := Load(path, envOf(map[string]string{
		"SLOTWHEEL_HOLD_TTL":     "7m",
		"SLOTWHEEL_REDIS_PREFIX": "fromenv",
	}))
	require.NoError(t, err)
	require.Equal(t, ":7070", got.HTTPAddr, "file value kept where env is silent")
	require.Equal(t, 7*time.Minute, got.HoldTTL)
	require.Equal(t, "fromenv", got.RedisPrefix)
	require.False(t, got.DevLogin)
	require.True(t, got.DevPayments, "embedded default kept")
}

// Profiles are off unless an address is given, from the environment or the file, and then served
// on that address alone.
func TestPprofAddr(t *testing.T) {
	t.Parallel()
	got, err := Load("", envOf(nil))
	require.NoError(t, err)
	require.Empty(t, got.PprofAddr, "off by default")

	got, err = Load(writeFile(t, "pprof_addr: \"127.0.0.1:6061\"\n"), envOf(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6061", got.PprofAddr)

	env := realEnv()
	env["SLOTWHEEL_PPROF_ADDR"] = "127.0.0.1:6060"
	got, err = Load("", envOf(env))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6060", got.PprofAddr)
	require.Equal(t, "127.0.0.1:6060", got.Masked()["SLOTWHEEL_PPROF_ADDR"], "printed at start like the other addresses")
}

func TestLoadFileDecidesEmbeddedMode(t *testing.T) {
	t.Parallel()
	path := writeFile(t, fmt.Sprintf("mysql_dsn: %q\nredis_url: %q\njwt_secret: %s\npayment_secret: %s\n", testDSN, testRedis, testJWT, testPay))
	got, err := Load(path, nil)
	require.NoError(t, err)
	require.False(t, got.Embedded())
	require.Equal(t, ":8080", got.HTTPAddr)
	require.False(t, got.DevLogin)
	require.False(t, got.Demo)
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string // YAML; empty means no file
		env  map[string]string
		want []string // each must appear in the error
		hide []string // none may appear in the error
	}{
		{
			name: "bad duration in env names the variable",
			env:  map[string]string{"SLOTWHEEL_HOLD_TTL": "abc"},
			want: []string{`SLOTWHEEL_HOLD_TTL: "abc" is not a duration`},
		},
		{
			name: "bad duration in file names the key and line",
			file: "demo: true\nhold_ttl: abc\n",
			want: []string{`hold_ttl (`, `slotwheel.yaml:2): "abc" is not a duration`},
		},
		{
			name: "duration without a unit",
			file: "default_grace: 600\n",
			want: []string{`default_grace`, `"600" is not a duration`},
		},
		{
			name: "negative duration",
			env:  map[string]string{"SLOTWHEEL_HOLD_TTL": "-1m"},
			want: []string{"SLOTWHEEL_HOLD_TTL must be positive"},
		},
		{
			name: "zero duration",
			env:  map[string]string{"SLOTWHEEL_RESTORE_WINDOW": "0s"},
			want: []string{"SLOTWHEEL_RESTORE_WINDOW must be positive"},
		},
		{
			name: "WeChat Pay half configured",
			env:  map[string]string{"SLOTWHEEL_WECHATPAY_MCHID": "1900000001", "SLOTWHEEL_WECHATPAY_APIV3_KEY": "short"},
			want: []string{"SLOTWHEEL_WECHATPAY_SERIAL is required", "SLOTWHEEL_WECHATPAY_PRIVATE_KEY is required",
				"SLOTWHEEL_WECHAT_APPID is required with WeChat Pay", "SLOTWHEEL_WECHATPAY_APIV3_KEY must be the 32-byte API v3 key"},
			hide: []string{"short"},
		},
		{
			name: "WeChat Pay key file missing",
			env: map[string]string{"SLOTWHEEL_WECHATPAY_MCHID": "1900000001", "SLOTWHEEL_WECHATPAY_SERIAL": "S",
				"SLOTWHEEL_WECHATPAY_PRIVATE_KEY": "/nonexistent/key.pem", "SLOTWHEEL_WECHATPAY_APIV3_KEY": "0123456789abcdef0123456789abcdef",
				"SLOTWHEEL_WECHATPAY_PUBLIC_KEY": "/nonexistent/pub.pem", "SLOTWHEEL_WECHATPAY_NOTIFY_URL": "https://x.example/notify",
				"SLOTWHEEL_WECHAT_APPID": "wxapp", "SLOTWHEEL_WECHAT_SECRET": "s"},
			want: []string{`SLOTWHEEL_WECHATPAY_PRIVATE_KEY: cannot read "/nonexistent/key.pem"`, `SLOTWHEEL_WECHATPAY_PUBLIC_KEY: cannot read`},
		},
		{
			name: "negative hold limit",
			env:  map[string]string{"SLOTWHEEL_MAX_ACTIVE_HOLDS": "-1"},
			want: []string{"SLOTWHEEL_MAX_ACTIVE_HOLDS must be between 0 (no bound) and 1000"},
		},
		{
			name: "unknown release mode",
			env:  map[string]string{"SLOTWHEEL_RELEASE_MODE": "sometimes"},
			want: []string{`SLOTWHEEL_RELEASE_MODE: "sometimes" is not a release mode`},
		},
		{
			name: "CORS origin with a path",
			env:  map[string]string{"SLOTWHEEL_CORS_ORIGINS": "https://admin.example.com, https://h5.example.com/app"},
			want: []string{`SLOTWHEEL_CORS_ORIGINS "https://h5.example.com/app" is not an origin`},
		},
		{
			name: "hold shorter than a second",
			env:  map[string]string{"SLOTWHEEL_HOLD_TTL": "500ms"},
			want: []string{"SLOTWHEEL_HOLD_TTL must be at least 1s"},
		},
		{
			name: "request timeout shorter than a commit may take",
			env:  map[string]string{"SLOTWHEEL_REQUEST_TIMEOUT": "2s"},
			want: []string{"SLOTWHEEL_REQUEST_TIMEOUT must be between 5s and 5m, not 2s"},
		},
		{
			name: "every problem reported at once",
			env:  map[string]string{"SLOTWHEEL_HOLD_TTL": "x", "SLOTWHEEL_DEMO": "y"},
			want: []string{"SLOTWHEEL_HOLD_TTL", "SLOTWHEEL_DEMO"},
		},
		{
			name: "bad boolean",
			env:  map[string]string{"SLOTWHEEL_DEV_LOGIN": "yes please"},
			want: []string{`SLOTWHEEL_DEV_LOGIN: "yes please" is not a boolean`},
		},
		{
			name: "unknown YAML key",
			file: "hold_tll: 5m\n",
			want: []string{`unknown key "hold_tll"`, "slotwheel.yaml:1"},
		},
		{
			name: "variable name used as YAML key",
			file: "SLOTWHEEL_HOLD_TTL: 5m\n",
			want: []string{`unknown key "SLOTWHEEL_HOLD_TTL"`, `did you mean "hold_ttl"`},
		},
		{
			name: "duplicate YAML key",
			file: "hold_ttl: 5m\nhold_ttl: 6m\n",
			want: []string{`"hold_ttl" given twice`},
		},
		{
			name: "YAML value that is not a scalar",
			file: "redis_prefix: [a, b]\n",
			want: []string{"redis_prefix wants a single value"},
		},
		{
			name: "YAML that is not a mapping",
			file: "- hold_ttl\n",
			want: []string{"want a mapping"},
		},
		{
			name: "YAML syntax error",
			file: "hold_ttl: [\n",
			want: []string{"slotwheel.yaml"},
		},
		{
			name: "missing secrets with both backends real",
			env:  map[string]string{"SLOTWHEEL_MYSQL_DSN": testDSN, "SLOTWHEEL_REDIS_URL": testRedis},
			want: []string{
				"SLOTWHEEL_JWT_SECRET is required because MySQL and Redis are not embedded",
				"SLOTWHEEL_PAYMENT_SECRET is required",
			},
		},
		{
			name: "missing secret with only Redis real",
			env:  map[string]string{"SLOTWHEEL_REDIS_URL": testRedis, "SLOTWHEEL_PAYMENT_SECRET": testPay},
			want: []string{"SLOTWHEEL_JWT_SECRET is required because Redis is not embedded (SLOTWHEEL_REDIS_URL is set)"},
			hide: []string{"PAYMENT_SECRET"},
		},
		{
			name: "missing secret with only MySQL real",
			env:  map[string]string{"SLOTWHEEL_MYSQL_DSN": testDSN, "SLOTWHEEL_JWT_SECRET": testJWT},
			want: []string{"SLOTWHEEL_PAYMENT_SECRET is required because MySQL is not embedded (SLOTWHEEL_MYSQL_DSN is set)"},
		},
		{
			name: "Redis URL with another scheme",
			env:  map[string]string{"SLOTWHEEL_REDIS_URL": "http://:redis-pass-456@127.0.0.1:6379/0"},
			want: []string{"SLOTWHEEL_REDIS_URL", `scheme "http"`},
			hide: []string{"redis-pass-456"},
		},
		{
			name: "Redis URL without host",
			env:  map[string]string{"SLOTWHEEL_REDIS_URL": "redis:6379"},
			want: []string{"SLOTWHEEL_REDIS_URL has no host"},
		},
		{
			name: "unparseable Redis URL does not echo its password",
			env:  map[string]string{"SLOTWHEEL_REDIS_URL": "redis://:redis-pass-456@127.0.0.1:port/0"},
			want: []string{"SLOTWHEEL_REDIS_URL is not a valid URL"},
			hide: []string{"redis-pass-456"},
		},
		{
			name: "Redis URL with a bad database",
			env:  map[string]string{"SLOTWHEEL_REDIS_URL": "redis://:redis-pass-456@127.0.0.1:6379/zero"},
			want: []string{"SLOTWHEEL_REDIS_URL", "invalid database number"},
			hide: []string{"redis-pass-456"},
		},
		{
			name: "Sentinel master without sentinels",
			env:  map[string]string{"SLOTWHEEL_REDIS_SENTINEL_MASTER": "slotwheel"},
			want: []string{"SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_SENTINEL_ADDRS must be set together"},
		},
		{
			name: "sentinels without a master",
			env:  map[string]string{"SLOTWHEEL_REDIS_SENTINEL_ADDRS": "10.0.0.1:26379"},
			want: []string{"SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_SENTINEL_ADDRS must be set together"},
		},
		{
			name: "sentinel list of commas only",
			file: "redis_sentinel_master: slotwheel\nredis_sentinel_addrs: \" , ,\"\n",
			want: []string{"redis_sentinel_master (", "must be set together"},
		},
		{
			name: "sentinel address without a port",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_SENTINEL_ADDRS", "10.0.0.1:26379,10.0.0.2"),
			want: []string{`SLOTWHEEL_REDIS_SENTINEL_ADDRS: "10.0.0.2" is not a host:port address`},
			hide: []string{`"10.0.0.1:26379" is not`},
		},
		{
			name: "sentinel addresses with a bad port and no host",
			file: "redis_sentinel_master: slotwheel\nredis_sentinel_addrs: \"s1:port, :26379, s3:70000\"\n",
			want: []string{"redis_sentinel_addrs (", `"s1:port" is not a host:port`, `":26379" is not a host:port`,
				`"s3:70000" is not a host:port`},
		},
		{
			name: "Sentinel master name with a space",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_SENTINEL_MASTER", "my master"),
			want: []string{`SLOTWHEEL_REDIS_SENTINEL_MASTER: "my master" must not contain spaces`},
		},
		{
			name: "Sentinel and cluster together",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_CLUSTER", "true"),
			want: []string{"SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_CLUSTER are exclusive"},
			hide: []string{"seed list"},
		},
		{
			name: "Sentinel with a URL of another scheme",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_URL", "http://:redis-pass-456@/0"),
			want: []string{"SLOTWHEEL_REDIS_URL", `scheme "http"`},
			hide: []string{"redis-pass-456"},
		},
		{
			name: "Sentinel with a URL of a bad database",
			env:  withEnv(sentinelEnv(), "SLOTWHEEL_REDIS_URL", "redis://:redis-pass-456@/zero"),
			want: []string{"SLOTWHEEL_REDIS_URL", "invalid database number"},
			hide: []string{"redis-pass-456"},
		},
		{
			name: "missing secret with Redis through Sentinel",
			env:  map[string]string{"SLOTWHEEL_REDIS_SENTINEL_MASTER": "slotwheel", "SLOTWHEEL_REDIS_SENTINEL_ADDRS": "s1:26379"},
			want: []string{"SLOTWHEEL_JWT_SECRET is required because Redis is not embedded (SLOTWHEEL_REDIS_SENTINEL_MASTER is set)"},
		},
		{
			name: "bad MySQL DSN does not echo its password",
			env:  map[string]string{"SLOTWHEEL_MYSQL_DSN": "root:dsn-pass-123@tcp(127.0.0.1:3306"},
			want: []string{"SLOTWHEEL_MYSQL_DSN is not a valid MySQL DSN"},
			hide: []string{"dsn-pass-123"},
		},
		{
			name: "prefix with a brace",
			env:  map[string]string{"SLOTWHEEL_REDIS_PREFIX": "sw{1}"},
			want: []string{`SLOTWHEEL_REDIS_PREFIX: "sw{1}" must not contain spaces`},
		},
		{
			name: "prefix with a space",
			file: "redis_prefix: \"s w\"\n",
			want: []string{"redis_prefix (", "must not contain spaces"},
		},
		{
			name: "bad listen address",
			env:  map[string]string{"SLOTWHEEL_HTTP_ADDR": "8080"},
			want: []string{`SLOTWHEEL_HTTP_ADDR: "8080" is not a host:port address`},
		},
		{
			name: "metrics on the API listener",
			env:  map[string]string{"SLOTWHEEL_METRICS_ADDR": "127.0.0.1:8080"},
			want: []string{"SLOTWHEEL_METRICS_ADDR must differ from SLOTWHEEL_HTTP_ADDR"},
		},
		{
			name: "bad pprof address",
			env:  map[string]string{"SLOTWHEEL_PPROF_ADDR": "6060"},
			want: []string{`SLOTWHEEL_PPROF_ADDR: "6060" is not a host:port address`},
		},
		{
			name: "pprof on the API listener",
			env:  map[string]string{"SLOTWHEEL_PPROF_ADDR": "127.0.0.1:8080"},
			want: []string{"SLOTWHEEL_PPROF_ADDR must differ from SLOTWHEEL_HTTP_ADDR and SLOTWHEEL_METRICS_ADDR"},
		},
		{
			name: "pprof on the metrics listener",
			file: "metrics_addr: \"127.0.0.1:9100\"\npprof_addr: \"127.0.0.1:9100\"\n",
			want: []string{"pprof_addr (", "must differ from"},
		},
		{
			name: "WeChat base that is not a URL",
			env:  map[string]string{"SLOTWHEEL_WECHAT_API_BASE": "api.weixin.qq.com"},
			want: []string{"SLOTWHEEL_WECHAT_API_BASE"},
		},
		{
			name: "WeChat app id without its secret",
			env:  map[string]string{"SLOTWHEEL_WECHAT_APPID": "wx123"},
			want: []string{"SLOTWHEEL_WECHAT_APPID and SLOTWHEEL_WECHAT_SECRET must be set together"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			got, err := Load(path, envOf(tt.env))
			require.Error(t, err)
			require.Nil(t, got)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			for _, h := range tt.hide {
				require.NotContains(t, err.Error(), h)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path, nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Contains(t, err.Error(), path)
}

func TestLoadEmptyFile(t *testing.T) {
	t.Parallel()
	got, err := Load(writeFile(t, "# nothing yet\n"), nil)
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, got.HoldTTL)
}

func TestMaskedHidesEverySecret(t *testing.T) {
	t.Parallel()
	secrets := []string{"jwt-sec-aaa-0123456789abcdef0123456789", "pay-sec-bbb-0123456789abcdef0123456789", "wx-sec-ccc",
		"dash-pw-ddd-0123456789abcdef0123456789", "dsn-pw-eee", "redis-pw-fff", "replica-pw-ggg"}
	c, err := Load("", envOf(map[string]string{
		"SLOTWHEEL_MYSQL_DSN":          "app:dsn-pw-eee@tcp(db.internal:3306)/slotwheel?parseTime=true",
		"SLOTWHEEL_REDIS_URL":          "rediss://default:redis-pw-fff@cache.internal:6380/2",
		"SLOTWHEEL_MYSQL_REPLICA_DSNS": "app:replica-pw-ggg@tcp(r1:3306)/slotwheel, app@tcp(r2:3306)/slotwheel",
		"SLOTWHEEL_JWT_SECRET":         secrets[0],
		"SLOTWHEEL_PAYMENT_SECRET":     secrets[1],
		"SLOTWHEEL_WECHAT_APPID":       "wx-app-id",
		"SLOTWHEEL_WECHAT_SECRET":      "wx-sec-ccc",
		"SLOTWHEEL_DASHBOARD_PASSWORD": secrets[3],
	}))
	require.NoError(t, err)

	m := c.Masked()
	require.Len(t, m, len(settings))
	require.Equal(t, "***", m["SLOTWHEEL_JWT_SECRET"])
	require.Equal(t, "***", m["SLOTWHEEL_PAYMENT_SECRET"])
	require.Equal(t, "***", m["SLOTWHEEL_WECHAT_SECRET"])
	require.Equal(t, "***", m["SLOTWHEEL_DASHBOARD_PASSWORD"])
	require.Equal(t, "app:***@tcp(db.internal:3306)/slotwheel?parseTime=true", m["SLOTWHEEL_MYSQL_DSN"])
	require.Equal(t, "rediss://default:***@cache.internal:6380/2", m["SLOTWHEEL_REDIS_URL"])
	require.Equal(t, "app:***@tcp(r1:3306)/slotwheel,app@tcp(r2:3306)/slotwheel", m["SLOTWHEEL_MYSQL_REPLICA_DSNS"])
	require.Equal(t, "wx-app-id", m["SLOTWHEEL_WECHAT_APPID"], "non-secrets print as they are")
	require.Equal(t, "10m0s", m["SLOTWHEEL_HOLD_TTL"])
	require.Equal(t, "false", m["SLOTWHEEL_DEV_LOGIN"])

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", *c, "ptr", c)
	printed := map[string]string{
		"String":    c.String(),
		"%v":        fmt.Sprintf("%v", *c),
		"%+v":       fmt.Sprintf("%+v", c),
		"%#v":       fmt.Sprintf("%#v", *c),
		"slog JSON": logged.String(),
	}
	for how, out := range printed {
		for _, s := range secrets {
			require.NotContains(t, out, s, how)
		}
		require.Contains(t, out, "db.internal:3306", how)
	}
	for _, s := range settings {
		require.Contains(t, c.String(), s.env()+"=")
	}
}

func TestMaskEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		mask           func(string) string
	}{
		{"DSN without password", "root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test", maskDSN},
		{"DSN without credentials", "tcp(127.0.0.1:3306)/test", "tcp(127.0.0.1:3306)/test", maskDSN},
		{"DSN password with @ and /", "u:p@ss/w0rd@tcp(h:1)/db", "u:***@tcp(h:1)/db", maskDSN},
		{"DSN without slash masked whole", "u:secret@tcp(h:1)", "***", maskDSN},
		{"Redis URL without password", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", maskRedisURL},
		{"Redis URL with user only", "redis://alice@h:6379/0", "redis://alice@h:6379/0", maskRedisURL},
		{"Redis URL with escaped password", "redis://:p%40ss@h:6379/0", "redis://:***@h:6379/0", maskRedisURL},
		{"unparseable Redis URL masked whole", "redis://:secret@h:port/0", "***", maskRedisURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.mask(tt.in))
		})
	}
}

func TestMaskedLeavesEmptySecretsEmpty(t *testing.T) {
	t.Parallel()
	c, err := Load("", nil)
	require.NoError(t, err)
	m := c.Masked()
	require.Empty(t, m["SLOTWHEEL_JWT_SECRET"], "an unset secret must look unset")
	require.Empty(t, m["SLOTWHEEL_MYSQL_DSN"])
}

func TestFillEmbeddedSecrets(t *testing.T) {
	t.Parallel()

	dir := filepath.Join(t.TempDir(), "not", "yet", "there")
	env := map[string]string{"SLOTWHEEL_SQLITE_PATH": filepath.Join(dir, "slotwheel.db")}
	start := func() *Config {
		t.Helper()
		c, err := Load("", envOf(env))
		require.NoError(t, err)
		require.NoError(t, c.FillEmbeddedSecrets())
		return c
	}

	first := start()
	require.NotEmpty(t, first.JWTSecret)
	require.NotEmpty(t, first.PaymentSecret)
	require.NotEmpty(t, first.DashboardPassword)
	require.NotEqual(t, first.JWTSecret, first.PaymentSecret)
	require.GreaterOrEqual(t, len(first.JWTSecret), 43, "256 bits in base64")
	require.True(t, first.DashboardPasswordGenerated())

	path := filepath.Join(dir, "secrets.json")
	require.Equal(t, path, first.SecretsFile())
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	var stored map[string]string
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &stored))
	require.Equal(t, map[string]string{
		"jwt_secret":         first.JWTSecret,
		"payment_secret":     first.PaymentSecret,
		"dashboard_password": first.DashboardPassword,
	}, stored)

	second := start()
	require.Equal(t, first.JWTSecret, second.JWTSecret)
	require.Equal(t, first.PaymentSecret, second.PaymentSecret)
	require.Equal(t, first.DashboardPassword, second.DashboardPassword)
	require.True(t, second.DashboardPasswordGenerated(), "a reused generated password is still printed")

	// Configured values win and are not written over the stored ones.
	env["SLOTWHEEL_JWT_SECRET"] = "from-env"
	env["SLOTWHEEL_DASHBOARD_PASSWORD"] = "chosen"
	third := start()
	require.Equal(t, "from-env", third.JWTSecret)
	require.Equal(t, "chosen", third.DashboardPassword)
	require.Equal(t, first.PaymentSecret, third.PaymentSecret)
	require.False(t, third.DashboardPasswordGenerated())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, data, after)
}

func TestFillEmbeddedSecretsOnlyInEmbeddedMode(t *testing.T) {
	t.Parallel()
	env := realEnv()
	env["SLOTWHEEL_SQLITE_PATH"] = filepath.Join(t.TempDir(), "data", "slotwheel.db")
	c, err := Load("", envOf(env))
	require.NoError(t, err)
	require.NoError(t, c.FillEmbeddedSecrets())
	require.Empty(t, c.DashboardPassword, "outside embedded mode only Bearer tokens open the dashboard")
	require.False(t, c.DashboardPasswordGenerated())
	_, err = os.Stat(c.SecretsFile())
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestFillEmbeddedSecretsRefusesDamagedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	c, err := Load("", envOf(map[string]string{"SLOTWHEEL_SQLITE_PATH": filepath.Join(dir, "slotwheel.db")}))
	require.NoError(t, err)
	err = c.FillEmbeddedSecrets()
	require.Error(t, err)
	require.Contains(t, err.Error(), path)
	require.Empty(t, c.JWTSecret)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{not json", string(data), "left for the operator to look at")
}

func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	// The names are a contract with operators (docs/API.md); a typo in a key
	// would silently ignore their setting.
	want := []string{
		"SLOTWHEEL_HTTP_ADDR", "SLOTWHEEL_METRICS_ADDR", "SLOTWHEEL_PPROF_ADDR", "SLOTWHEEL_MYSQL_DSN", "SLOTWHEEL_SQLITE_PATH",
		"SLOTWHEEL_REDIS_URL", "SLOTWHEEL_REDIS_PREFIX", "SLOTWHEEL_HOLD_TTL", "SLOTWHEEL_DEFAULT_GRACE",
		"SLOTWHEEL_RELEASE_HORIZON", "SLOTWHEEL_RESTORE_WINDOW", "SLOTWHEEL_CHECKIN_OPENS",
		"SLOTWHEEL_REMINDER_LEAD", "SLOTWHEEL_JWT_SECRET", "SLOTWHEEL_PAYMENT_SECRET",
		"SLOTWHEEL_WECHAT_APPID", "SLOTWHEEL_WECHAT_SECRET", "SLOTWHEEL_WECHAT_API_BASE",
		"SLOTWHEEL_DEV_LOGIN", "SLOTWHEEL_DEV_PAYMENTS", "SLOTWHEEL_DASHBOARD_USER",
		"SLOTWHEEL_DASHBOARD_PASSWORD", "SLOTWHEEL_DEMO", "SLOTWHEEL_MYSQL_MAX_OPEN_CONNS", "SLOTWHEEL_MYSQL_MAX_IDLE_CONNS",
		"SLOTWHEEL_MYSQL_REPLICA_DSNS", "SLOTWHEEL_MYSQL_REPLICA_MAX_LAG",
		"SLOTWHEEL_AUTO_MIGRATE", "SLOTWHEEL_REDIS_CLUSTER", "SLOTWHEEL_REDIS_SENTINEL_MASTER", "SLOTWHEEL_REDIS_SENTINEL_ADDRS",
		"SLOTWHEEL_RELEASE_QUEUES", "SLOTWHEEL_START_TIMEOUT", "SLOTWHEEL_REQUEST_TIMEOUT",
		"SLOTWHEEL_RELEASE_MODE", "SLOTWHEEL_CORS_ORIGINS", "SLOTWHEEL_MAX_ACTIVE_HOLDS", "SLOTWHEEL_RATE_LIMIT_PER_IP",
		"SLOTWHEEL_WECHATPAY_MCHID", "SLOTWHEEL_WECHATPAY_SERIAL", "SLOTWHEEL_WECHATPAY_PRIVATE_KEY",
		"SLOTWHEEL_WECHATPAY_APIV3_KEY", "SLOTWHEEL_WECHATPAY_PUBLIC_KEY", "SLOTWHEEL_WECHATPAY_PUBLIC_KEY_ID",
		"SLOTWHEEL_WECHATPAY_NOTIFY_URL", "SLOTWHEEL_WECHATPAY_API_BASE",
	}
	var got []string
	for _, s := range settings {
		got = append(got, s.env())
		require.Equal(t, s.key, strings.ToLower(strings.TrimPrefix(s.env(), EnvPrefix)))
	}
	require.ElementsMatch(t, want, got)
}

// Outside embedded mode a short or placeholder secret is refused, naming the variable and never
// quoting the secret; embedded mode generates its own and accepts what it is given.
func TestInsecureSecretsAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key, value, want string
	}{
		{"SLOTWHEEL_JWT_SECRET", "change-me-jwt-but-long-enough-to-pass-the-length", "SLOTWHEEL_JWT_SECRET is a placeholder"},
		{"SLOTWHEEL_PAYMENT_SECRET", "short-payment-secret", "SLOTWHEEL_PAYMENT_SECRET is 20 bytes; at least 32"},
		{"SLOTWHEEL_DASHBOARD_PASSWORD", "change-me-dashboard", "SLOTWHEEL_DASHBOARD_PASSWORD is a placeholder"},
		{"SLOTWHEEL_DASHBOARD_PASSWORD", "hunter2", "SLOTWHEEL_DASHBOARD_PASSWORD is 7 bytes"},
	} {
		env := realEnv()
		env[c.key] = c.value
		_, err := Load("", envOf(env))
		require.Error(t, err, c.key)
		require.Contains(t, err.Error(), c.want)
		require.NotContains(t, err.Error(), c.value, "the secret is never printed")
	}
	env := realEnv()
	env["SLOTWHEEL_DASHBOARD_PASSWORD"] = "dash-0123456789abcdef0123456789abcdef"
	_, err := Load("", envOf(env))
	require.NoError(t, err)
	_, err = Load("", envOf(map[string]string{"SLOTWHEEL_JWT_SECRET": "short", "SLOTWHEEL_SQLITE_PATH": filepath.Join(t.TempDir(), "x.db")}))
	require.NoError(t, err, "embedded mode is for trying things out")
}
