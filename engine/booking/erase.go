package booking

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Erasure of a person's data (PIPL) is decided here, once: what the engine keeps of a person that is
// personal, and what it becomes. The stores only apply it to their columns and keys.
//
// What is personal. The engine keeps no names, phone numbers or notes: it knows a person only by their
// user id — for a user who logged in through WeChat, "wx:" and their openid — and that id is the
// personal value, wherever it went:
//   - as the owner of bookings, holds, waitlist entries, refunds and events, and in the names of the
//     per-user Redis keys (their holds, their live holds, their no-show freeze);
//   - in the actor names of booking histories: "user:<id>", and "staff:<id>" or "admin:<id>" when the
//     same id acted in those roles;
//   - as the payer's openid of WeChat Pay orders;
//   - inside documents written for others: the user_id member of event data (what webhooks and WeChat
//     deliveries send) and of stored answers to idempotent requests;
//   - inside free text that came from outside and may quote what it was sent: a webhook receiver's or
//     a payment provider's error message.
//
// What is not: the ids of bookings, holds and payments, amounts, times, check-in codes, venues and
// resources. They are the venue's account of what was sold, paid and refunded, which must still add
// up after an erasure (and which accounting law keeps), and they name nobody without the payment
// provider's own records.
//
// What it becomes: one pseudonym for every record of the person, so that what is counted per user
// still counts the same — no-shows, a user's holds and their live-hold limit, refunds — and so that
// a repeated erasure finds what the first one did and answers the same. The pseudonym is keyed with
// a secret of the deployment (HMAC-SHA256): whoever knows an id but not the key — a webhook
// receiver that saw the openid before, a leaked export — cannot recompute it and recognise the
// records. A pseudonym is not a user id: nobody can sign in as one (see IsPseudonym).
//
// What else changes: the person's WAITING waitlist entries are withdrawn (nobody could be told of a
// promotion any more, nor pay for it), and a no-show freeze ends with the person it was about.
// Nothing that holds units changes: live holds run out or are paid as before, bookings keep their
// status, units and release.

// PseudonymPrefix starts every pseudonym.
const PseudonymPrefix = "erased:"

// pseudonymLabel separates this use of the key from any other.
const pseudonymLabel = "slotwheel erasure v1\x00"

// Pseudonym is what userID becomes when the user is erased under key: "erased:" and 128 bits of
// HMAC-SHA256 over the id, short enough for every user-id column (64 characters) and the history's
// actor column.
func Pseudonym(key []byte, userID string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(pseudonymLabel + userID))
	return PseudonymPrefix + hex.EncodeToString(mac.Sum(nil)[:16])
}

// IsPseudonym reports whether id is an erased user's pseudonym rather than a user id. Tokens and
// log-ins must refuse such ids, so that nobody can act as an erased user.
func IsPseudonym(id string) bool { return strings.HasPrefix(id, PseudonymPrefix) }

// Erasure is the erasure of one user: their id and the pseudonym that replaces it.
type Erasure struct {
	UserID    string
	Pseudonym string
}

// Replacement is one personal value and what it becomes.
type Replacement struct{ From, To string }

// Erase decides the erasure of userID under key. The engine's own name and pseudonyms are not
// people's ids.
func Erase(key []byte, userID string) (Erasure, error) {
	switch {
	case userID == "":
		return Erasure{}, Invalid("invalid_user_id", "a user id is required")
	case userID == ActorSystem:
		return Erasure{}, Invalid("invalid_user_id", "%q is the engine's own name, not a user's", userID)
	case IsPseudonym(userID):
		return Erasure{}, Invalid("invalid_user_id", "%q is the pseudonym of a user already erased", userID)
	}
	return Erasure{UserID: userID, Pseudonym: Pseudonym(key, userID)}, nil
}

// Owner is the user id where it names the owner of something (a booking, a hold, a refund, an event)
// or a per-user key.
func (x Erasure) Owner() Replacement { return Replacement{From: x.UserID, To: x.Pseudonym} }

// ActorNames are the names under which histories record the id acting, in each role (Actor.Name).
func (x Erasure) ActorNames() []Replacement {
	roles := Roles()
	out := make([]Replacement, len(roles))
	for i, r := range roles {
		out[i] = Replacement{From: Actor{UserID: x.UserID, Role: r}.Name(), To: Actor{UserID: x.Pseudonym, Role: r}.Name()}
	}
	return out
}

// OpenID is the user's WeChat openid where it stands alone (a WeChat Pay order's payer); false for a
// user who did not log in through WeChat.
func (x Erasure) OpenID() (Replacement, bool) {
	openid, ok := WechatOpenID(x.UserID)
	return Replacement{From: openid, To: x.Pseudonym}, ok
}

// DocumentMember is the user id as the JSON documents the engine writes for others carry it (the
// "user_id" member of engine/wire's booking, hold and waitlist views, written without spaces), for
// replacing inside stored event data and stored answers.
func (x Erasure) DocumentMember() Replacement {
	return Replacement{From: userIDMember(x.UserID), To: userIDMember(x.Pseudonym)}
}

func userIDMember(id string) string {
	quoted, _ := json.Marshal(id) // a string always encodes
	return `"user_id":` + string(quoted)
}

// FreeText are the values to replace wherever they occur in text that came from outside: the user id
// and, for a WeChat user, the bare openid (the id first, so that "wx:<openid>" is replaced whole).
func (x Erasure) FreeText() []Replacement {
	out := []Replacement{x.Owner()}
	if o, ok := x.OpenID(); ok {
		out = append(out, o)
	}
	return out
}

// WithdrawnWaiting is what the user's waitlist entries in the first status become: a waiter that has
// been erased can no longer be told of a promotion, nor pay for one, so their turn passes at once
// instead of holding units for a hold nobody will pay.
func (Erasure) WithdrawnWaiting() (from, to WaitStatus) { return WaitWaiting, WaitCancelled }
