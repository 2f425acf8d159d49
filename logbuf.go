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
// written every logFlushEvery; any other line is written at once, with those before it, so that
// what the process says of its state (started, reconciled, a warning, a failure) is out when that
// state can be seen from outside, and before the process can die of it.
type bufferedLog struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newBufferedLog(w io.Writer) *bufferedLog {
	b := &bufferedLog{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go b.flushLoop()
	return b
}

func (b *bufferedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

// Flush writes out what is buffered.
func (b *bufferedLog) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.w.Flush()
}

func (b *bufferedLog) flushLoop() {
	defer close(b.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.Flush()
		case <-b.stop:
			b.Flush()
			return
		}
	}
}

// Close stops the flushing and writes out the rest; nothing may log after it.
func (b *bufferedLog) Close() {
	close(b.stop)
	<-b.done
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
