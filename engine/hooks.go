package engine

import (
	"errors"

	"github.com/slotwheel/slotwheel/engine/release"
)

// testHooks let tests inject failures at the steps docs/DESIGN.md orders; nil in production.
type testHooks struct {
	// beforeCommit runs after a hold is marked confirming and before its booking commits. An error
	// fails the confirm; errSimulatedCrash makes it stop as a killed process would, undoing nothing.
	beforeCommit func(holdID string) error
	// afterCommit runs after the booking's COMMIT (acknowledged or not) and before the hold is
	// settled; errSimulatedCrash makes it stop as a killed process would, and an ErrCommitUnknown
	// reports the commit's acknowledgement lost although it happened.
	afterCommit func(holdID string) error
	// afterPublish runs after the relay published a batch and before it sends it; errSimulatedCrash
	// makes it stop as a killed process would, leaving the deliveries claimed.
	afterPublish func() error
	// beforeMoveCommit and afterMoveCommit run around a reschedule's commit; errSimulatedCrash makes
	// the move stop as a killed process would, leaving it reserved.
	beforeMoveCommit, afterMoveCommit func() error
	// release are the release service's hooks (release.Hooks): a batch's size, a give-back that
	// fails, a crash after a batch's commit.
	release release.Hooks
}

// errSimulatedCrash stands for a process killed mid-operation (tests only).
var errSimulatedCrash = errors.New("simulated crash")
