package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// `slotwheel token` prints a token the API accepts (signed with the deployment's secret, with the
// role, subject and venue asked for), and names the flag that is wrong otherwise.
func TestTokenCommand(t *testing.T) {
	secret := "token-test-secret-0123456789abcdef"
	t.Setenv("SLOTWHEEL_JWT_SECRET", secret)
	t.Setenv("SLOTWHEEL_SQLITE_PATH", filepath.Join(t.TempDir(), "slotwheel.db"))
	log := slog.New(slog.DiscardHandler)
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"token", "--sub", "boss-1", "--role", "manager", "--venue", "7", "--ttl", "2h"}, &out, log))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(lines[0], claims, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"}))
	require.NoError(t, err)
	require.Equal(t, "boss-1", claims["sub"])
	require.Equal(t, "manager", claims["role"])
	require.EqualValues(t, "7", claims["venue_id"])
	exp, _ := claims.GetExpirationTime()
	iat, _ := claims.GetIssuedAt()
	require.Equal(t, 7200.0, exp.Sub(iat.Time).Seconds())
	require.Contains(t, lines[1], "manager boss-1, expires")

	for args, want := range map[string]string{
		"token":                                   "--sub is required",
		"token --sub ops --role root":             "--role must be one of user, staff, manager, admin",
		"token --sub ops --role staff":            "--venue is required for staff",
		"token --sub ops --venue 3":               "--venue is only for staff and managers",
		"token --sub ops --ttl 1000h":             "--ttl must be more than 0 and at most 720h",
		"token --sub has space":                   "unexpected argument",
		"token --sub erased:0123456789abcdef0123": "--sub must be",
	} {
		out.Reset()
		err := run(t.Context(), strings.Fields(args), &out, log)
		require.ErrorContains(t, err, want, args)
	}
}
