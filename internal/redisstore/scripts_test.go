package redisstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// The scripts must not restate what Go defines: hold statuses, record fields, owner kinds and
// separators reach them only through the generated prelude.
func TestScriptsRestateNoGoDefinition(t *testing.T) {
	t.Parallel()
	defined := []string{ownerHold, ownerBooking, hfStatus, hfID, hfQty, hfSlots, hfDays, hfDeadline, hfSince,
		hfBookingID, hfEnded, hfRetaken, hfOrderNo}
	for _, s := range booking.HoldStatuses() {
		defined = append(defined, string(s))
	}
	entries, err := luaFiles.ReadDir("lua")
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		src := mustRead(e.Name())
		for _, v := range defined {
			for _, q := range []string{"'" + v + "'", `"` + v + `"`} {
				require.False(t, strings.Contains(src, q), "%s writes %s itself; use the prelude's name", e.Name(), q)
			}
		}
	}
	// And every script compiles with the prelude: a name it uses is defined.
	for _, s := range []string{prelude()} {
		for _, name := range []string{"HOLD_HELD", "F_STATUS", "OWNER_HOLD", "LIST_SEP", "UNITS_SEP", "EXPIRE_BATCH"} {
			require.Contains(t, s, "local "+name+" = ")
		}
	}
}
