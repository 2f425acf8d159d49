package engine

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// The operations page of the back office (docs/API.md "Operations"): what falls due, what is late,
// what failed and what the capacity ledger found, with the task queue's retrying and dead-letter
// tasks and a re-drive of one through the engine. Admin only.

// TaskQueue is what the back office sees of the task queue; jobs implements it, and the engine
// finds it in the scheduler it is given (SetScheduler).
type TaskQueue interface {
	// QueueCounts answers each queue's tasks by state.
	QueueCounts(ctx context.Context) ([]QueueCount, error)
	// Tasks lists up to limit tasks in state (retry or archived) across the queues.
	Tasks(ctx context.Context, state string, limit int) ([]Task, error)
	// Redrive runs task id of queue now, through the same engine call its handler makes, and on
	// success deletes it from the queue.
	Redrive(ctx context.Context, queue, id string) (Redrive, error)
}

// QueueCount is one queue's tasks by state.
type QueueCount struct {
	Queue                                                 string
	Pending, Active, Scheduled, Retry, Archived, Complete int
}

// Task is a task waiting for a retry or in the dead-letter queue (archived).
type Task struct {
	Queue, ID, Type, State string
	BookingID              uint64    // the booking a release task is for; 0 for other tasks
	ReleaseAt              time.Time // a release task's release_at
	Subject                string    // what another task is about (its payload)
	Retried, MaxRetry      int
	LastError              string
	LastFailedAt           time.Time
	NextProcessAt          time.Time // a retry's next run
}

// Redrive is the outcome of a re-drive: Done when the work succeeded (the task is gone), else the
// error it met (the task stays where it was). Outcome is a release's (released, not_needed, ...).
type Redrive struct {
	Task    Task
	Done    bool
	Outcome string
	Error   string
}

// TaskStates are the states Tasks lists.
var TaskStates = []string{"retry", "archived"}

// Operations is what the operations page shows.
type Operations struct {
	Now              time.Time
	DueSoon, Overdue []booking.Booking
	Queues           []QueueCount
	FailedRefunds    int64
	FailedDeliveries int64
	OverCapacity     []SlotAlert
	RefusedByLedger  []wire.Refund // the last day's
}

// SlotAlert is a slot whose capacity ledger counts more units than it has.
type SlotAlert struct {
	ResourceID         uint64
	Start, End         time.Time
	Capacity, Occupied int
}

// dueSoon is how far ahead the operations page looks for releases and deadlines.
const dueSoon = 15 * time.Minute

// overdueAfter is how late a release is before the page calls it overdue: the release loop decides
// within a second of release_at, so a few seconds late is already a fault.
const overdueAfter = 5 * time.Second

const opsListLimit = 50

// Operations answers the operations page, of one venue's releases when venueID != 0. Admin only.
func (e *Engine) Operations(ctx context.Context, a booking.Actor, venueID uint64) (Operations, error) {
	if err := a.RequireAdmin(); err != nil {
		return Operations{}, err
	}
	now := e.clock.Now()
	out := Operations{Now: now}
	view := func(rows []sqlstore.Booking) []booking.Booking {
		bs := make([]booking.Booking, len(rows))
		for i := range rows {
			bs[i] = rows[i].In(e.cat.Zone(ctx, rows[i].VenueID)) // as the API shows bookings: in their venue's zone
		}
		return bs
	}
	soon, err := e.ss.DueBetween(ctx, venueID, now, now.Add(dueSoon), opsListLimit)
	if err != nil {
		return Operations{}, err
	}
	late, err := e.ss.DueBetween(ctx, venueID, time.Time{}, now.Add(-overdueAfter), opsListLimit)
	if err != nil {
		return Operations{}, err
	}
	out.DueSoon, out.Overdue = view(soon), view(late)
	if out.FailedRefunds, out.FailedDeliveries, err = e.ss.Failures(ctx); err != nil {
		return Operations{}, err
	}
	slots, err := e.ss.OverCapacity(ctx, booking.LocalDay(now, time.UTC).AddDate(0, 0, -1), opsListLimit)
	if err != nil {
		return Operations{}, err
	}
	for _, s := range slots {
		out.OverCapacity = append(out.OverCapacity, SlotAlert{ResourceID: s.ResourceID, Start: s.Start, End: s.End,
			Capacity: s.Capacity, Occupied: s.Occupied})
	}
	refused, err := e.ss.RefusedByLedger(ctx, now.Add(-24*time.Hour), opsListLimit)
	if err != nil {
		return Operations{}, err
	}
	for _, r := range refused {
		out.RefusedByLedger = append(out.RefusedByLedger, refundView(r, e.cat.Zone(ctx, r.VenueID)))
	}
	if e.tasks != nil {
		if out.Queues, err = e.tasks.QueueCounts(ctx); err != nil {
			return Operations{}, err
		}
	}
	return out, nil
}

// Tasks lists the task queue's tasks in state (retry or archived). Admin only.
func (e *Engine) Tasks(ctx context.Context, a booking.Actor, state string, limit int) ([]Task, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, err
	}
	if err := checkTaskState(state); err != nil {
		return nil, err
	}
	limit, err := booking.PageSize(limit)
	if err != nil {
		return nil, err
	}
	if e.tasks == nil {
		return []Task{}, nil
	}
	return e.tasks.Tasks(ctx, state, limit)
}

// RedriveTask runs a retrying or dead-letter task now through the engine. Admin only.
func (e *Engine) RedriveTask(ctx context.Context, a booking.Actor, queue, id string) (Redrive, error) {
	if err := a.RequireAdmin(); err != nil {
		return Redrive{}, err
	}
	if e.tasks == nil {
		return Redrive{}, booking.ErrNotFound
	}
	return e.tasks.Redrive(ctx, queue, id)
}

func checkTaskState(s string) error {
	for _, ok := range TaskStates {
		if s == ok {
			return nil
		}
	}
	return booking.Invalid("invalid_status", "state must be retry or archived").WithField("state")
}
