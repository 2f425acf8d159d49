package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api"
)

// Access log lines wait in the buffer; any other line goes out at once, with the lines before it in
// their order, so that what the process says of its state is readable as soon as that state is.
func TestBufferedLogHoldsOnlyAccessLines(t *testing.T) {
	var out bytes.Buffer
	b := &bufferedLog{w: bufio.NewWriter(&out)} // no flush timer: only what the handler flushes
	log := slog.New(b.handler(slog.LevelInfo))

	log.Info(api.AccessLogMessage, "path", "/api/v1/holds")
	log.Info(api.AccessLogMessage, "path", "/api/v1/holds/1")
	require.Empty(t, out.String(), "access lines wait for the flush")

	log.Info("counters reconciled; serving")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "another line takes the waiting ones out with it")
	require.True(t, strings.HasSuffix(lines[0], "path=/api/v1/holds"), "in their order: %q", lines[0])
	require.Contains(t, lines[2], "counters reconciled")

	log.Warn(api.AccessLogMessage, "status", 503)
	require.Contains(t, out.String(), "status=503", "a warning goes out at once, access line or not")
}

// notifyingWriter tells, on a channel, each write that reaches it.
type notifyingWriter struct{ wrote chan string }

func (w notifyingWriter) Write(p []byte) (int, error) {
	w.wrote <- string(p)
	return len(p), nil
}

// An access line alone goes out by itself about logFlushEvery after it was logged, and again for
// a line logged after that flush; Close writes out what still waits.
func TestBufferedLogFlushesAWaitingLineByItself(t *testing.T) {
	w := notifyingWriter{wrote: make(chan string, 8)}
	b := newBufferedLog(w)
	log := slog.New(b.handler(slog.LevelInfo))
	for _, path := range []string{"/a", "/b"} {
		log.Info(api.AccessLogMessage, "path", path)
		select {
		case got := <-w.wrote:
			require.Contains(t, got, "path="+path)
		case <-time.After(10 * logFlushEvery):
			t.Fatalf("the access line for %s was not flushed", path)
		}
	}
	log.Info(api.AccessLogMessage, "path", "/c")
	b.Close()
	require.Contains(t, <-w.wrote, "path=/c", "Close writes out what waits")
}
