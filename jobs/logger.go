package jobs

import (
	"fmt"
	"log/slog"
)

// slogAdapter lets Asynq log through slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "source", "asynq") }
func (a slogAdapter) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "source", "asynq") }
func (a slogAdapter) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "source", "asynq") }
func (a slogAdapter) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }

// Fatal logs at error level and does not exit: Asynq's library code never calls it, and a logger
// must not end a process that has a graceful shutdown to run.
func (a slogAdapter) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }
