package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/slotwheel/slotwheel/config"
)

// benchReleaseFlags are the flags of `slotwheel bench release`.
type benchReleaseFlags struct{}

func (b *benchReleaseFlags) register(fs *flag.FlagSet) func() error {
	return func() error { return nil }
}

func (b *benchReleaseFlags) run(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error {
	return errors.New("bench release: not built yet")
}
