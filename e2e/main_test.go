package e2e

import (
	"os"
	"testing"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
)

func TestMain(m *testing.M) { fleet.Main(m) }

// needServers skips the test without a MySQL server to run the instances on (the embedded pass of
// scripts/test.sh), or fails it when servers are required.
func needServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs several instances of the binary")
	}
	if os.Getenv(testenv.EnvMySQL) != "" {
		return
	}
	if os.Getenv(testenv.EnvRequire) == "1" {
		t.Fatalf("%s=1 but %s is not set", testenv.EnvRequire, testenv.EnvMySQL)
	}
	t.Skipf("instances of the binary share a MySQL server; set %s", testenv.EnvMySQL)
}
