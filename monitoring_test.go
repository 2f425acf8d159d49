package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// The monitoring files operators load (scripts/monitoring/).
const (
	alertRulesFile = "scripts/monitoring/alerts.yml"
	alertTestsFile = "scripts/monitoring/alerts_test.yml"
	dashboardFile  = "scripts/monitoring/grafana-dashboard.json"
)

// Every metric the alert rules and the Grafana dashboard name exists on the /metrics of a running
// slotwheel (real backends under scripts/test.sh), read from the PromQL of each expression by
// Prometheus's own parser: a renamed metric or a typo fails here instead of leaving an alert that
// can never fire. The same instance serves profiles on SLOTWHEEL_PPROF_ADDR, and only there.
func TestMonitoringFilesNameLiveMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "SLOTWHEEL_SQLITE_PATH="+filepath.Join(dir, "sw.db"),
		"SLOTWHEEL_JWT_SECRET="+e2eJWT, "SLOTWHEEL_PAYMENT_SECRET="+e2ePay, "SLOTWHEEL_DEMO=false",
		"SLOTWHEEL_DASHBOARD_PASSWORD=e2e-dashboard-0123456789abcdef0123")
	if testenv.RealServers() {
		db := testenv.NewDB(t)
		r := testenv.NewRedis(t)
		env = append(env, "SLOTWHEEL_MYSQL_DSN="+db.DSN, "SLOTWHEEL_REDIS_URL="+privateDB(t, r.URL), "SLOTWHEEL_REDIS_PREFIX="+r.Prefix)
	}
	addr, pprofAddr := freeAddr(t), freeAddr(t)
	env = append(env, "SLOTWHEEL_HTTP_ADDR="+addr, "SLOTWHEEL_PPROF_ADDR="+pprofAddr)
	cmd := exec.Command(binary(t), "all")
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	c := &client{t: t, base: "http://" + addr}
	c.waitReady()

	// The snapshot gauges come with the first scrape that manages to read them: scrape until both
	// snapshots say they were read.
	var exposition string
	read := regexp.MustCompile(`(?m)^slotwheel_snapshot_last_success_timestamp_seconds\{snapshot="[a-z_]+"\} [1-9]`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		exposition = get(t, c.base+"/metrics", http.StatusOK)
		if len(read.FindAllString(exposition, -1)) == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the snapshot gauges were never read:\n%s", exposition)
		time.Sleep(200 * time.Millisecond)
	}
	live := seriesNames(exposition)

	exprs := append(alertExprs(t), dashboardExprs(t)...)
	require.NotEmpty(t, exprs)
	named := map[string]bool{}
	for _, e := range exprs {
		names := metricNames(t, e.expr)
		require.NotEmpty(t, names, "%s: %s names no metric", e.where, e.expr)
		for _, n := range names {
			require.True(t, live[n], "%s names %s, which /metrics does not export (expression %s)", e.where, n, e.expr)
			named[n] = true
		}
	}
	// What the alerts are for (issue: overdue bookings, archived tasks, release lag p99, counter
	// drift) is among what they name.
	for _, n := range []string{"slotwheel_bookings_overdue_seconds", "slotwheel_asynq_tasks",
		"slotwheel_release_lag_seconds_bucket", "slotwheel_reconcile_repairs_total"} {
		require.True(t, named[n], "no alert or panel reads %s", n)
	}

	// Labels that the rules and panels select on exist before anything happened: the archived
	// count of the release queue, every transition of the domain.
	require.Contains(t, exposition, `slotwheel_asynq_tasks{queue="release",state="archived"} 0`)
	for _, tr := range append(booking.Transitions(), booking.Created) {
		require.Contains(t, exposition, `slotwheel_booking_transitions_total{from="`+string(tr.From)+`",to="`+string(tr.To)+`"}`)
	}

	require.Contains(t, get(t, "http://"+pprofAddr+"/debug/pprof/", http.StatusOK), "goroutine")
	get(t, c.base+"/debug/pprof/", http.StatusNotFound)
}

// The alert rules pass promtool's check and its unit tests (alerts_test.yml: each alert fires on
// the failure it is for, after its `for`). promtool comes with Debian's prometheus package; CI
// installs it and requires it.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatalf("%s=1 but promtool is not installed (apt-get install prometheus)", testenv.EnvRequire)
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", alertRulesFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// get answers the body of url, requiring status.
func get(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}

// seriesNames are the names of the samples of a Prometheus text exposition (a histogram's
// name_bucket, name_sum and name_count among them), which is what PromQL selects.
func seriesNames(exposition string) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// expr is one PromQL expression of a monitoring file, and where it is.
type expr struct{ where, expr string }

func alertExprs(t *testing.T) []expr {
	t.Helper()
	data, err := os.ReadFile(alertRulesFile)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &rules))
	var out []expr
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, expr{where: alertRulesFile + " " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	return out
}

// dashboardExprs reads every "expr" of the dashboard, wherever it sits (panels, rows' panels),
// with Grafana's interval variable given a value PromQL can parse. Any other variable fails: the
// test would not know what it stands for.
func dashboardExprs(t *testing.T) []expr {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(data, &doc))
	var out []expr
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = dashboardFile + " " + title
			}
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					s = strings.ReplaceAll(s, "$__rate_interval", "5m")
					require.NotContains(t, s, "$", "%s: a Grafana variable this test cannot fill in", where)
					out = append(out, expr{where: where, expr: s})
					continue
				}
				walk(x, where)
			}
		case []any:
			for _, x := range v {
				walk(x, where)
			}
		}
	}
	walk(doc, dashboardFile)
	return out
}

// metricNames parses e as PromQL and answers the metric names it selects.
func metricNames(t *testing.T, e string) []string {
	t.Helper()
	node, err := parser.ParseExpr(e)
	require.NoError(t, err, "PromQL %s", e)
	var out []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			require.NotEmpty(t, vs.Name, "%s selects by labels alone", e)
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}
