package sqldb

import (
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// The store's sentinels. internal/sqlstore exports those its callers match on under its own name
// (sqlstore.ErrCommitUnknown is ErrCommitUnknown); they are declared here because MapErr must know
// them, to let them through as they are.
var (
	// ErrCommitUnknown: COMMIT was sent and no answer came back (the connection died, a timeout).
	// The transaction may or may not have committed; only a later read can tell.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrDuplicate: a unique key refused the write.
	ErrDuplicate = errors.New("duplicate key")
	// ErrStale: the row changed between read and version-checked update.
	ErrStale = errors.New("changed concurrently")
	// ErrNotFound is what MapErr makes of a missing row: the domain's own, booking.ErrNotFound.
	ErrNotFound = booking.ErrNotFound
	// ErrOverCapacity: the capacity ledger refused a change (see sqlstore.ErrOverCapacity).
	ErrOverCapacity = errors.New("the capacity ledger refused the change: a slot would pass its capacity")
)

// MapErr maps a driver or GORM error to the store's sentinels, keeping the cause: op names the
// operation that failed, for the message.
func MapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return ErrNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("%s: %w", op, ErrDuplicate)
	case errors.Is(err, ErrCommitUnknown), errors.Is(err, ErrStale), errors.Is(err, ErrDuplicate), errors.Is(err, ErrOverCapacity):
		return err
	}
	if _, ok := booking.AsError(err); ok {
		return err
	}
	return fmt.Errorf("sql %s: %w: %w", op, booking.ErrStorageUnavailable, err)
}
