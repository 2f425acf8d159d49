package sqlstore

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// OverdueStats counts the CONFIRMED bookings whose release is still undecided at now (past their
// release_at) and answers the release_at of the oldest (now when there is none). Both read only the
// due_at index, which holds undecided bookings alone, so the cost follows the backlog, not the table.
func (s *Releases) OverdueStats(ctx context.Context, now time.Time) (int64, time.Time, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&models.Booking{}).Where("due_at <= ?", now.UTC()).Count(&n).Error; err != nil {
		return 0, now, sqldb.MapErr("count overdue", err)
	}
	if n == 0 {
		return 0, now, nil
	}
	oldest, err := s.Overdue(ctx, now, 1)
	if err != nil || len(oldest) == 0 { // none: released between the two reads
		return n, now, err
	}
	return n, oldest[0].ReleaseAt, nil
}
