package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// TestBenchReleaseCommand runs `slotwheel bench release` with tiny numbers on the test backends
// (MariaDB + Redis under scripts/test.sh, embedded otherwise), each case on its own, at once, and
// checks the table, the JSON and the chart. The settings go in through --config, as the
// environment cannot differ between parallel tests.
func TestBenchReleaseCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for releases for a few seconds")
	}
	t.Parallel()
	for _, k := range []string{"burst", "steady", "busy"} {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var settings strings.Builder
			fmt.Fprintf(&settings, "redis_prefix: %s\n", testenv.Unique("swt"))
			if v := os.Getenv(testenv.EnvMySQL); v != "" {
				fmt.Fprintf(&settings, "mysql_dsn: %q\n", v)
			}
			if v := os.Getenv(testenv.EnvRedis); v != "" {
				fmt.Fprintf(&settings, "redis_url: %q\n", v)
			}
			cfgPath := filepath.Join(dir, "settings.yaml")
			require.NoError(t, os.WriteFile(cfgPath, []byte(settings.String()), 0o600))
			out := filepath.Join(dir, "out")
			var stdout bytes.Buffer
			err := run(context.Background(), []string{"bench", "release", "--config", cfgPath, "--cases", k, "--burst", "20",
				"--steady-rate", "40", "--steady-seconds", "1", "--busy-rate", "30", "--busy-seconds", "1", "--busy-confirm-rate", "30",
				"--out", out, "--progress=false"}, &stdout, slogDiscard())
			require.NoError(t, err, stdout.String())
			t.Log("\n" + stdout.String())

			n := map[string]string{"burst": "20", "steady": "40", "busy": "30"}[k]
			for _, label := range []string{`slotwheel`, `stock Asynq, defaults`, `poll UPDATE every 1s`, `poll UPDATE every 5m0s \*`} {
				require.Regexp(t, `(?m)^`+label+`\s+`+k+`\s+`+n+`\s+\S+`, stdout.String())
			}
			var rep releasebench.Report
			b, err := os.ReadFile(filepath.Join(out, "bench-release.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Rows, 4)
			sw := rep.Rows[0]
			require.Equal(t, releasebench.DesignSlotwheel, sw.Design)
			require.Equal(t, sw.Bookings, sw.Released, "slotwheel released every booking")
			require.Zero(t, sw.Early, "slotwheel never releases early")
			require.NotNil(t, sw.SeenMs)
			require.NotNil(t, sw.UnitsBackMs, "the units were seen back in Redis")
			require.True(t, rep.Rows[3].Computed)
			for _, r := range rep.Rows[:3] {
				require.Equal(t, k == "busy", r.Load != nil, "%s: a confirm load in the busy case only", r.Label)
				if r.Load != nil {
					require.Positive(t, r.Load.Confirms, "%s: confirms ran beside the releases", r.Label)
					require.Zero(t, r.Load.Errors, "%s: %s", r.Label, r.Load.FirstError)
				}
			}
			f, err := os.Open(filepath.Join(out, "bench-release.png"))
			require.NoError(t, err)
			defer f.Close()
			_, err = png.Decode(f)
			require.NoError(t, err)
		})
	}
}

func TestBenchReleaseFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--burst", "0"}, "--burst"},
		{[]string{"--steady-rate", "2000"}, "--steady-rate"},
		{[]string{"--steady-seconds", "0"}, "--steady-seconds"},
		{[]string{"--steady-rate", "1000", "--steady-seconds", "3600"}, "--steady-rate × --steady-seconds"},
		{[]string{"--busy-rate", "0"}, "--busy-rate"},
		{[]string{"--busy-seconds", "4000"}, "--busy-seconds"},
		{[]string{"--busy-confirm-rate", "0"}, "--busy-confirm-rate"},
		{[]string{"--busy-rate", "1000", "--busy-seconds", "3600"}, "--busy-rate × --busy-seconds"},
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--venues", "0"}, "--venues"},
		{[]string{"--designs", "slotwheel,kafka"}, "--designs"},
		{[]string{"--cases", "bursty"}, "--cases"},
		{[]string{"--timeout", "0s"}, "--timeout"},
		{[]string{"--cpuprofile-window"}, "--cpuprofile-window"},
		{[]string{"--out", " "}, "--out"},
	} {
		err := run(context.Background(), append([]string{"bench", "release"}, c.args...), &bytes.Buffer{}, slogDiscard())
		require.ErrorContains(t, err, c.flag, "%v", c.args)
	}
}
