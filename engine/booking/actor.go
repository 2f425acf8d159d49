package booking

import "strings"

// Roles of an Actor, as carried by the JWT.
const (
	RoleUser  = "user"
	RoleStaff = "staff" // a venue's front desk: its bookings, check-in and the venue's decisions
	// RoleManager runs one venue: what its staff do, and its catalog (resources, services,
	// schedules, closures and booking rules). Deployment-wide settings stay the admin's.
	RoleManager = "manager"
	RoleAdmin   = "admin"
)

// Roles lists every role, in the order of their reach.
func Roles() []string { return []string{RoleUser, RoleStaff, RoleManager, RoleAdmin} }

// VenueRole reports whether role is bound to one venue (its actors carry VenueID): staff and
// managers.
func VenueRole(role string) bool { return role == RoleStaff || role == RoleManager }

// ActorSystem names the engine's own work (release, progress, reconciliation) in histories.
const ActorSystem = "system"

// Actor is who is asking. The domain, not the API, decides what an actor may see and change.
type Actor struct {
	UserID  string
	Role    string
	VenueID uint64 // staff and managers only: the venue they work at
}

// System is the actor of the engine's own work.
var System = Actor{UserID: ActorSystem, Role: RoleAdmin}

// Name is how histories record the actor: "role:user".
func (a Actor) Name() string {
	if a == System {
		return ActorSystem
	}
	return a.Role + ":" + a.UserID
}

// Owns reports whether the actor is the user who made something of userID's.
func (a Actor) Owns(userID string) bool { return a.UserID != "" && a.UserID == userID }

// MaySee reports whether the actor may read a booking: its owner, staff of its venue, or an admin.
func (a Actor) MaySee(b *Booking) bool {
	switch a.Role {
	case RoleAdmin:
		return true
	case RoleStaff, RoleManager:
		return a.VenueID == b.VenueID
	}
	return a.Owns(b.UserID)
}

// MayChange reports whether the actor may cancel, restore or move a booking (or a hold) of userID:
// its owner or an admin. Staff check in (MayCheckIn) but do not change bookings otherwise.
func (a Actor) MayChange(userID string) bool { return a.Role == RoleAdmin || a.Owns(userID) }

// MayCheckIn reports whether the actor may check a booking of venueID in: staff or a manager of
// that venue, or an admin.
func (a Actor) MayCheckIn(venueID uint64) bool {
	return a.Role == RoleAdmin || (VenueRole(a.Role) && a.VenueID == venueID)
}

// WorksAtAVenue reports whether the actor is staff or a manager (of the venue in VenueID).
func (a Actor) WorksAtAVenue() bool { return VenueRole(a.Role) }

// RequireManager is ErrForbidden unless the actor may change venueID's catalog and booking rules:
// its manager or an admin.
func (a Actor) RequireManager(venueID uint64) error {
	if a.Role == RoleAdmin || (a.Role == RoleManager && a.VenueID == venueID) {
		return nil
	}
	return ErrForbidden
}

// RequireAdmin is ErrForbidden unless the actor is an admin: only admins change the catalog, the
// policies and the notification settings, and erase users.
func (a Actor) RequireAdmin() error {
	if a.Role != RoleAdmin {
		return ErrForbidden
	}
	return nil
}

// MayDecide reports whether the actor may take the venue's decisions on a booking of venueID —
// approve or decline it, cancel it for the venue, restore it on the guest's appeal: staff of that
// venue (its front desk and its manager) or an admin.
func (a Actor) MayDecide(venueID uint64) bool { return a.MayCheckIn(venueID) }

// MayListVenue reports whether the actor may list a venue's bookings (the front desk's list).
func (a Actor) MayListVenue(venueID uint64) bool { return a.MayCheckIn(venueID) }

// wechatPrefix starts the user id of a user who logged in through WeChat: the rest is their openid,
// which subscribe messages and WeChat Pay orders are addressed to.
const wechatPrefix = "wx:"

// WechatUserID is the user id of the WeChat user with openid.
func WechatUserID(openid string) string { return wechatPrefix + openid }

// WechatOpenID answers the openid of a user who logged in through WeChat; ok is false for others.
func WechatOpenID(userID string) (openid string, ok bool) {
	openid, ok = strings.CutPrefix(userID, wechatPrefix)
	return openid, ok && openid != ""
}
