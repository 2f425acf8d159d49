package booking

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A pseudonym is stable under one key — a repeated erasure finds the records of the first — and
// differs under another, so that whoever knows the id but not the key cannot recompute it.
func TestPseudonymIsKeyed(t *testing.T) {
	t.Parallel()
	k1, k2 := []byte("key-one"), []byte("key-two")
	a := Pseudonym(k1, "wx:o-alice")
	require.Equal(t, a, Pseudonym(k1, "wx:o-alice"))
	require.NotEqual(t, a, Pseudonym(k2, "wx:o-alice"))
	require.NotEqual(t, a, Pseudonym(k1, "wx:o-bob"))
	require.True(t, IsPseudonym(a))
	require.True(t, strings.HasPrefix(a, PseudonymPrefix))
	require.LessOrEqual(t, len(a), 64, "fits every user-id column")
	require.NotContains(t, a, "alice")

	x, err := Erase(k1, "wx:o-alice")
	require.NoError(t, err)
	require.Equal(t, Erasure{UserID: "wx:o-alice", Pseudonym: a}, x)
	for _, id := range []string{"", ActorSystem, a} {
		_, err := Erase(k1, id)
		require.ErrorIs(t, err, Invalid("invalid_user_id", ""), "%q", id)
	}
}
