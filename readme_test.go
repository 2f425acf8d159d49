package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeLayout holds README.md's package table to the packages' own comments, as
// scripts/layout.sh prints them: a package added, moved or re-described without the table fails.
func TestReadmeLayout(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("bash", "scripts/layout.sh").Output()
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "<!-- layout:begin -->\n")
	require.True(t, ok, "README.md has no layout:begin marker")
	table, _, ok := strings.Cut(rest, "<!-- layout:end -->")
	require.True(t, ok, "README.md has no layout:end marker")
	require.Equal(t, string(out), table, "README.md's Layout table is out of date: paste ./scripts/layout.sh's output in it")
}
