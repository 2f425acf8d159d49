package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/slotwheel/slotwheel/api"
	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// tokenFlags are the flags of `slotwheel token`: a Bearer token for an operator, signed with the
// deployment's SLOTWHEEL_JWT_SECRET, for the operator console and the admin routes where dev log-in
// is off (as it is in production).
type tokenFlags struct {
	role  string
	sub   string
	venue uint64
	ttl   time.Duration
}

func (f *tokenFlags) register(fs *flag.FlagSet) func() error {
	fs.StringVar(&f.role, "role", booking.RoleAdmin, "user, staff, manager or admin")
	fs.StringVar(&f.sub, "sub", "", "who the token acts as (its subject): an operator's name such as ops or desk-1")
	fs.Uint64Var(&f.venue, "venue", 0, "the venue id, for staff and managers")
	fs.DurationVar(&f.ttl, "ttl", 12*time.Hour, "how long the token lasts (at most 720h)")
	return func() error {
		if f.sub == "" {
			return fmt.Errorf("--sub is required: who the token acts as")
		}
		return nil
	}
}

// run prints the token, and on the line after it when it expires.
func (f *tokenFlags) run(_ context.Context, cfg *config.Config, out io.Writer, _ *slog.Logger) error {
	if cfg.JWTSecret == "" {
		return fmt.Errorf("SLOTWHEEL_JWT_SECRET is not set: the token must be signed with the secret the instances check")
	}
	tok, exp, err := api.IssueToken([]byte(cfg.JWTSecret), booking.Actor{UserID: f.sub, Role: f.role, VenueID: f.venue}, f.ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(out, tok)
	fmt.Fprintf(out, "# %s %s, expires %s\n", f.role, f.sub, exp.UTC().Format(time.RFC3339))
	return nil
}
