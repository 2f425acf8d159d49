// Package notify owns the rules every event sink shares: how often a delivery that failed is tried
// again and when it is given up. The sinks live in its sub-packages (webhook for signed HTTP
// requests, wechatmsg for WeChat subscribe messages); engine/ carries the rules out and keeps the
// deliveries. It imports only the standard library.
package notify

import "time"

// backoff is the wait before each retry: the first within 10 s (docs/API.md) — 3 s, so that the
// queue's whole-second scheduling and its polling (jobs.Options) still leave room — then longer and
// longer, for over 24 hours in all (86,623 s), so that a receiver down for a day still gets
// everything.
var backoff = []time.Duration{
	3 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
	8 * time.Hour, 8 * time.Hour,
}

// NextAttempt is when a delivery that has now failed `failed` times in a row (1 after the first
// failure) is tried again; ok is false once it has been retried for the whole schedule: it is then
// failed for good and kept for a retry by hand.
func NextAttempt(failed int, at time.Time) (next time.Time, ok bool) {
	if failed < 1 || failed > len(backoff) {
		return time.Time{}, false
	}
	return at.Add(backoff[failed-1]), true
}

// RetryWindow is how long a delivery is retried before it is failed: the whole schedule.
func RetryWindow() time.Duration {
	var d time.Duration
	for _, b := range backoff {
		d += b
	}
	return d
}
