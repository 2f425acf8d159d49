package jobs

import (
	"context"
	"fmt"
	"slices"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotwheel/slotwheel/engine/snapshot"
)

// taskStates are the states of tasks in a queue that the queue gauge shows. Archived tasks are the
// dead letters: the archived_releases loop deletes those whose booking no longer waits and leaves
// the rest for an operator, so a count that stays above zero means something keeps failing.
var taskStates = []struct {
	name  string
	count func(*asynq.QueueInfo) int
}{
	{"pending", func(q *asynq.QueueInfo) int { return q.Pending }},
	{"active", func(q *asynq.QueueInfo) int { return q.Active }},
	{"scheduled", func(q *asynq.QueueInfo) int { return q.Scheduled }},
	{"retry", func(q *asynq.QueueInfo) int { return q.Retry }},
	{"archived", func(q *asynq.QueueInfo) int { return q.Archived }},
}

var descQueueTasks = prometheus.NewDesc("slotwheel_asynq_tasks",
	"Tasks in an Asynq queue by state (pending, active, scheduled, retry, archived), from Asynq's inspector "+
		"(a snapshot, refreshed at most every 10 s).",
	[]string{"queue", "state"}, nil)

// StatsCollector exports the depth of every queue of these Jobs, by task state, as a snapshot: a
// scrape reads Redis at most every 10 s and never waits on it more than a second (Asynq's inspector
// takes no context; its calls end at the Redis client's read timeout). Each call builds a
// collector with its own snapshot; a process registers one.
func (j *Jobs) StatsCollector() prometheus.Collector {
	return j.statsCollector()
}

func (j *Jobs) statsCollector() *snapshot.Collector {
	return snapshot.New(snapshot.Config{Name: "asynq_queues", Descs: []*prometheus.Desc{descQueueTasks}, Logger: j.log},
		j.readQueues)
}

// readQueues reads the task counts of every queue. A queue Asynq does not know yet (nothing was
// ever put in it) has none of any state, and shows zeros, so that every series exists from the
// start.
func (j *Jobs) readQueues(ctx context.Context) ([]snapshot.Value, error) {
	known, err := j.inspector.Queues()
	if err != nil {
		return nil, fmt.Errorf("list asynq queues: %w", err)
	}
	var out []snapshot.Value
	for _, q := range j.Queues() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info := &asynq.QueueInfo{}
		if slices.Contains(known, q) {
			if info, err = j.inspector.GetQueueInfo(q); err != nil {
				return nil, fmt.Errorf("asynq queue %s: %w", q, err)
			}
		}
		for _, s := range taskStates {
			out = append(out, snapshot.Value{Desc: descQueueTasks, Value: float64(s.count(info)), Labels: []string{q, s.name}})
		}
	}
	return out, nil
}
