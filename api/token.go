package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// MaxTokenTTL bounds the tokens IssueToken mints: an operator's token is signed by the deployment's
// secret, and one that lasts a year is a password nobody can revoke short of changing the secret.
const MaxTokenTTL = 30 * 24 * time.Hour

// IssueToken mints a token that the API accepts for actor a, signed with the deployment's JWT
// secret and lasting ttl: for operators of a deployment without dev log-in (`slotwheel token`).
// Its errors name the flag (role, sub, venue, ttl) that is wrong.
func IssueToken(secret []byte, a booking.Actor, ttl time.Duration, now time.Time) (string, time.Time, error) {
	switch {
	case !slices.Contains(booking.Roles(), a.Role):
		return "", time.Time{}, fmt.Errorf("--role must be one of %s", strings.Join(booking.Roles(), ", "))
	case !auth.ValidUserID(a.UserID):
		return "", time.Time{}, errors.New("--sub must be 1 to 128 letters, digits or ._:@- (the user id the token acts as)")
	case booking.VenueRole(a.Role) && a.VenueID == 0:
		return "", time.Time{}, fmt.Errorf("--venue is required for %s: the venue they work at", a.Role)
	case !booking.VenueRole(a.Role) && a.VenueID != 0:
		return "", time.Time{}, fmt.Errorf("--venue is only for staff and managers, not %s", a.Role)
	case ttl <= 0 || ttl > MaxTokenTTL:
		return "", time.Time{}, fmt.Errorf("--ttl must be more than 0 and at most %s", MaxTokenTTL)
	}
	return auth.NewTokens(secret, func() time.Time { return now }, answer.Failer{}).IssueFor(a, ttl)
}
