package redisstore

import (
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/engine/booking"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// expireBatch bounds how many due holds one script gives back before doing its own work, so that a
// script stays short even when the wheel has fallen far behind.
const expireBatch = 1000

// prelude is Lua generated from the Go definitions the scripts share with this package: hold
// statuses, hold record fields, owner kinds and separators. Nothing of it is written twice.
func prelude() string {
	var b strings.Builder
	def := func(name, value string) { fmt.Fprintf(&b, "local %s = %q\n", name, value) }
	for _, s := range booking.HoldStatuses() {
		def("HOLD_"+string(s), string(s))
	}
	// A slice, not a map: the script text (and so its SHA) must be the same in every process.
	for _, f := range [][2]string{
		{"F_STATUS", hfStatus}, {"F_ID", hfID}, {"F_QTY", hfQty}, {"F_SLOTS", hfSlots}, {"F_DAYS", hfDays},
		{"F_DEADLINE", hfDeadline}, {"F_SINCE", hfSince}, {"F_BOOKING_ID", hfBookingID}, {"F_ENDED", hfEnded},
		{"F_RETAKEN", hfRetaken}, {"F_ORDER_NO", hfOrderNo}, {"F_RESOURCE", hfResource}, {"F_ROLES", hfRoles},
		{"F_USER", hfUser}, {"F_REFUSED", hfRefused},
	} {
		def(f[0], f[1])
	}
	def("OWNER_HOLD", ownerHold)
	def("OWNER_BOOKING", ownerBooking)
	def("OWNER_MOVE", ownerMove)
	def("LIST_SEP", listSep)
	def("UNITS_SEP", unitsSep)
	fmt.Fprintf(&b, "local EXPIRE_BATCH = %d\n", expireBatch)
	return b.String()
}

// scripts holds one Lua script per Redis operation. Each file under lua/ is headed by its
// KEYS/ARGV/Output contract, next to the method of the capability that runs it (see Store).
type scripts struct {
	holdSlots      *redis.Script
	readSlots      *redis.Script
	markConfirming *redis.Script
	settleHold     *redis.Script
	unconfirm      *redis.Script
	cancelHold     *redis.Script
	giveBack       *redis.Script
	ensureOwners   *redis.Script
	loadDay        *redis.Script
	recount        *redis.Script
	regrid         *redis.Script
	expireDue      *redis.Script
	finishExpired  *redis.Script
	idemBegin      *redis.Script
	idemFinish     *redis.Script
	rateLimit      *redis.Script
	holdRoles      *redis.Script
	setOrder       *redis.Script
	leaseHold      *redis.Script
	leaseRelease   *redis.Script
	reserveMove    *redis.Script
	endMove        *redis.Script
	eraseHolds     *redis.Script
	refuseHold     *redis.Script
	bumpVersion    *redis.Script
}

func loadScripts() *scripts {
	head := prelude() + mustRead("common.lua")
	s := func(name string) *redis.Script { return redis.NewScript(head + "\n" + mustRead(name)) }
	return &scripts{
		holdSlots:      s("hold_slots.lua"),
		readSlots:      s("read_slots.lua"),
		markConfirming: s("mark_confirming.lua"),
		settleHold:     s("settle_hold.lua"),
		unconfirm:      s("unconfirm.lua"),
		cancelHold:     s("cancel_hold.lua"),
		giveBack:       s("give_back.lua"),
		ensureOwners:   s("ensure_owners.lua"),
		loadDay:        s("load_day.lua"),
		recount:        s("recount.lua"),
		regrid:         s("regrid.lua"),
		expireDue:      s("expire_due.lua"),
		finishExpired:  s("finish_expired.lua"),
		rateLimit:      s("rate_limit.lua"),
		holdRoles:      s("hold_roles.lua"),
		setOrder:       s("set_order.lua"),
		leaseHold:      s("lease_hold.lua"),
		leaseRelease:   s("lease_release.lua"),
		reserveMove:    s("reserve_move.lua"),
		endMove:        s("end_move.lua"),
		idemBegin:      s("idem_begin.lua"),
		idemFinish:     s("idem_finish.lua"),
		eraseHolds:     s("erase_holds.lua"),
		refuseHold:     s("refuse_hold.lua"),
		bumpVersion:    s("bump_version.lua"),
	}
}

func mustRead(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(fmt.Sprintf("redisstore: embedded script %s: %v", name, err))
	}
	return string(b)
}

// replyStrings reads a script's table answer as strings (integers and nils included).
func replyStrings(v any, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %T", v)
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		switch t := x.(type) {
		case string:
			out[i] = t
		case int64:
			out[i] = fmt.Sprint(t)
		case nil:
		default:
			return nil, fmt.Errorf("unexpected script reply element %T", x)
		}
	}
	return out, nil
}
