package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/bench/rushbench"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// TestBenchRushCommand runs `slotwheel bench rush` at a tiny size — 200 clients for 8 units, then 50
// more — on MariaDB and Redis (it measures real servers only), with the binary built from this
// tree as both designs' servers, and checks the table, the JSON and the chart.
func TestBenchRushCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs both designs")
	}
	dsn, url := os.Getenv(testenv.EnvMySQL), os.Getenv(testenv.EnvRedis)
	if dsn == "" || url == "" {
		if os.Getenv(testenv.EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s or %s is not set", testenv.EnvRequire, testenv.EnvMySQL, testenv.EnvRedis)
		}
		t.Skipf("bench rush measures real servers: set %s and %s", testenv.EnvMySQL, testenv.EnvRedis)
	}
	t.Parallel()
	dir := t.TempDir()
	// The settings go in through --config, as the environment cannot differ between parallel tests;
	// the instance gets a Redis database of its own, as its Asynq queues ignore the prefix.
	settings := fmt.Sprintf("mysql_dsn: %q\nredis_url: %q\nredis_prefix: %s\n", dsn, privateDB(t, url), testenv.Unique("swt"))
	cfgPath := filepath.Join(dir, "settings.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(settings), 0o600))
	out := filepath.Join(dir, "out")
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"bench", "rush", "--config", cfgPath, "--clients", "200", "--resources", "2",
		"--slots", "2", "--capacity", "2", "--second-wave", "50", "--conns", "32", "--out", out, "--binary", binary(t),
		"--progress=false"}, &stdout, slogDiscard())
	require.NoError(t, err, stdout.String())
	t.Log("\n" + stdout.String())

	for _, row := range []string{`slotwheel\s+rush\s+200\s+\d`, `slotwheel\s+after sell-out\s+50\s+—`, `plain SQL\s+rush\s+200\s+\d`,
		`plain SQL\s+after sell-out\s+50\s+—`} {
		require.Regexp(t, `(?m)^`+row, stdout.String())
	}
	require.Regexp(t, `(?m)^  (MET   |MISSED)  oversold: `, stdout.String())

	var rep rushbench.Report
	b, err := os.ReadFile(filepath.Join(out, "bench-rush.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Rows, 4)
	for _, r := range rep.Rows {
		require.False(t, r.Failed, r.Note)
		require.Zero(t, r.Errors, "%s %s: %v", r.Label, r.Wave, r.ErrorKinds)
		require.Zero(t, r.Oversold, "%s %s", r.Label, r.Wave)
		if r.Wave == rushbench.WaveRush {
			require.Equal(t, 8, r.Sales, r.Label)
			require.Equal(t, 192, r.Refusals, r.Label)
			require.NotNil(t, r.SoldOutMs, r.Label)
		} else {
			require.Equal(t, 50, r.Refusals, "%s: everything was sold", r.Label)
		}
		require.NotNil(t, r.CPU.Server, "%s: its process's CPU was read", r.Label)
	}
	require.Len(t, rep.Checks, 2)
	for _, c := range rep.Checks {
		require.Equal(t, 8, c.Taken, "%s counts the units it sold", c.Label)
		require.Zero(t, c.OversoldUnits, c.Label)
	}
	for _, log := range rep.Logs {
		l, err := os.ReadFile(log)
		require.NoError(t, err)
		require.Contains(t, string(l), "http request", "each server logged its requests to %s", log)
	}
	b, err = os.ReadFile(filepath.Join(out, "bench-rush.png"))
	require.NoError(t, err)
	_, err = png.DecodeConfig(bytes.NewReader(b))
	require.NoError(t, err)
}

// TestBenchRushFlags checks that each value out of range is refused, naming its flag (the first
// argument of each case).
func TestBenchRushFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--clients", "0"}, {"--slots", "65"}, {"--capacity", "0"}, {"--second-wave", "-1"},
		{"--conns", "0"}, {"--runs", "0"}, {"--timeout", "0s"}, {"--designs", "slotwheel,kafka"}, {"--out", " "}} {
		err := run(context.Background(), append([]string{"bench", "rush"}, args...), &bytes.Buffer{}, slogDiscard())
		require.ErrorContains(t, err, args[0])
	}
}
