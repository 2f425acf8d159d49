package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/api"
)

// logFlushEvery is how long an access log line may wait in the buffer. One write to stderr per
// request line was a tenth of a hold's CPU in the booking-opening rush; a line a tenth of a second
// late costs an operator nothing.
const logFlushEvery = 100 * time.Millisecond

// bufferedLog is the process's log: access log lines (api.AccessLogMessage) are gathered and
// written logFlushEvery after the first of them; any other line is written at once, with those
// before it, so that what the process says of its state (started, reconciled, a warning, a failure)
// is out when that state can be seen from outside, and before the process can die of it. Nothing
// waits while nothing is buffered: an idle process has no flush timer to wake.
type bufferedLog struct {
	mu     sync.Mutex
	w      *bufio.Writer
	timer  *time.Timer // flushes logFlushEvery after the first line that waits; nil: never
	armed  bool        // timer is set for what waits
	closed bool
}

func newBufferedLog(w io.Writer) *bufferedLog {
	b := &bufferedLog{w: bufio.NewWriterSize(w, 64<<10)}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

func (b *bufferedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.w.Write(p)
	if !b.armed && !b.closed && b.timer != nil && b.w.Buffered() > 0 {
		b.armed = true
		b.timer.Reset(logFlushEvery)
	}
	return n, err
}

// Flush writes out what is buffered.
func (b *bufferedLog) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	_ = b.w.Flush()
}

// Close stops the flushing and writes out the rest; nothing may log after it.
func (b *bufferedLog) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	_ = b.w.Flush()
}

// handler is a slog text handler on b that flushes after every record but the access log's below
// level warn.
func (b *bufferedLog) handler(level slog.Level) slog.Handler {
	return urgentFlush{slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}), b}
}

type urgentFlush struct {
	slog.Handler
	b *bufferedLog
}

func (h urgentFlush) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn || r.Message != api.AccessLogMessage {
		h.b.Flush()
	}
	return err
}

func (h urgentFlush) WithAttrs(as []slog.Attr) slog.Handler {
	return urgentFlush{h.Handler.WithAttrs(as), h.b}
}

func (h urgentFlush) WithGroup(name string) slog.Handler {
	return urgentFlush{h.Handler.WithGroup(name), h.b}
}
