package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
)

// A booking waits for the venue's approval while the only instance is killed, and its approval
// deadline passes while nothing runs: within seconds of the restart it is declined — never before
// the deadline — its unit is free again and its payment's refund is under way.
func TestApprovalDeadlinePassesWhileKilled(t *testing.T) {
	needServers(t)
	t.Parallel()
	f := fleet.Start(t, fleet.Options{})
	ctx := context.Background()
	c := f.Client(0)
	court, err := c.NewCourt(ctx, fleet.CourtSpec{Capacity: 1, MinLeft: 10 * time.Minute})
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, http.MethodPut, "/api/v1/admin/resources/"+court.Resource.ID+"/policy", court.Admin,
		map[string]any{"requires_approval": true, "approval_window_minutes": 1}, nil))

	guest := f.Token("guest-waits", "user", "")
	h, err := c.Hold(ctx, guest, court.Resource.ID, court.Start, court.End, 1)
	require.NoError(t, err)
	p, err := c.Pay(ctx, h, testenv.Unique("pay-"))
	require.NoError(t, err)
	require.Equal(t, "booked", p.Outcome)
	b := *p.Booking
	require.Equal(t, "PENDING_APPROVAL", b.Status)
	deadline, err := time.Parse(time.RFC3339, b.ApprovalDeadline)
	require.NoError(t, err)
	slot, err := c.SlotAt(ctx, court.Resource.ID, court.Start)
	require.NoError(t, err)
	require.Zero(t, slot.Remaining, "the unit is taken while it waits")

	in := f.Instance(0)
	require.NoError(t, in.Kill())
	time.Sleep(time.Until(deadline.Add(2 * time.Second))) // nothing runs: there is no signal to wait for
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, in.Restart(rctx))
	restarted := time.Now()

	var got = b
	for got.Status == "PENDING_APPROVAL" {
		require.Less(t, time.Since(restarted), 10*time.Second, "declined within seconds of the restart")
		time.Sleep(100 * time.Millisecond)
		got, err = c.Booking(ctx, court.Admin, b.BookingID)
		require.NoError(t, err)
	}
	require.Equal(t, "DECLINED", got.Status)
	cancelled, err := time.Parse(time.RFC3339, got.CancelledAt)
	require.NoError(t, err)
	require.False(t, cancelled.Before(deadline), "never before the deadline")
	slot, err = c.SlotAt(ctx, court.Resource.ID, court.Start)
	require.NoError(t, err)
	require.Equal(t, 1, slot.Remaining, "the unit is back")

	var refunds []struct {
		Reason, Status string
		Amount         int64
	}
	rows, err := f.DB().QueryContext(ctx, "SELECT reason, status, amount_cents FROM refunds WHERE booking_id = ?", b.BookingID)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var r struct {
			Reason, Status string
			Amount         int64
		}
		require.NoError(t, rows.Scan(&r.Reason, &r.Status, &r.Amount))
		refunds = append(refunds, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, refunds, 1, "one refund, started")
	require.Equal(t, "approval_declined", refunds[0].Reason)
	require.Equal(t, b.AmountCents, refunds[0].Amount, "in full")
	require.NoError(t, f.Audit(ctx))
}
