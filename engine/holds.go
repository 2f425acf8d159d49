package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Holds owns holds and their expiry (the wheel), keyed holds, a user's freeze and the request limit,
// and the waitlist, whose promotion is a hold (holds.go, holdonce.go, waitlist.go, policy.go, the
// wheel in loops.go).
type Holds struct {
	rs     *redisstore.Store
	cat    *catalog.Cache
	ss     *sqlstore.Store
	events *events
	freed  *freedBus // the units of a cancelled hold and of a lapsed promotion are announced
	clock  clock.Clock
	log    *slog.Logger

	holdTTL           time.Duration // Options.HoldTTL
	maxActiveHolds    int           // Options.MaxActiveHolds
	rateLimitPerIP    int           // Options.RateLimitPerIP
	confirmStaleAfter time.Duration // Options.ConfirmStaleAfter

	wheel   wheel
	freezes freezeSweep
	// holdIdem keeps the records of keyed holds that their script cannot write (HoldOnce).
	holdIdem *idem.Redis

	// What holds use of the other services.
	bookings interface { // the wheel finishes reschedules whose move ran out
		sweepMoves(ctx context.Context, venueID uint64, now time.Time) error
	}
	catalog interface {
		loadDay(ctx context.Context, ri *catalog.ResourceInfo, day string) error
	}
	payments interface { // an expired or cancelled hold's WeChat order is closed
		closeOrderOf(ctx context.Context, holdID, orderNo string)
	}
	upkeep interface { // the wheel repairs a hold it cannot settle
		repairHold(ctx context.Context, v uint64, id string, r redisstore.HoldRecord, ok bool, now time.Time, rep *ReconcileReport) (bool, error)
	}
	releases *release.Service // the freezes loop reads back as far as a release run may last
}

// HoldRequest takes units for a user: either a resource window (ResourceID, Start, End) or a service
// at Start on one of its resources (ServiceID, ResourceID, Start). Quantity 0 means 1.
type HoldRequest struct {
	UserID     string
	ResourceID uint64
	ServiceID  uint64
	Start      time.Time
	End        time.Time
	Quantity   int
	// Resources names, for a service with roles, the resource to take for some roles; the others
	// get the first of the role's resources with room.
	Resources map[string]uint64

	once *holdOnce // HoldOnce's idempotency step
}

// Hold takes units for a user, all or nothing. A service hold without a resource takes the first of
// the service's resources that has room. It decides on this instance's copy of the catalog, and the
// hold script refuses the decision when the venue's catalog version has moved on since the copy was
// read (an admin change answered on any instance): then it reads the catalog again and decides anew.
func (hs *Holds) Hold(ctx context.Context, req HoldRequest) (booking.Hold, error) {
	// A change can land between the fresh read and the script; more than a few in a row is a storm
	// of admin changes, which the client may retry through.
	const attempts = 4
	for attempt := 0; attempt < attempts; attempt++ {
		view := &holdView{cat: hs.cat, fresh: attempt > 0}
		h, err := hs.hold(ctx, req, view)
		switch {
		case errors.Is(err, errStaleCatalog):
		case err != nil && !view.fresh && !view.compared:
			// Refused on copies no script compared with Redis's version (closed by the copy's plan,
			// too soon by its rules, a disabled resource): the refusal must hold on a fresh read too.
		default:
			return h, err
		}
	}
	return booking.Hold{}, fmt.Errorf("hold: the catalog kept changing: %w", booking.ErrStorageUnavailable)
}

// errStaleCatalog is a hold decided on a copy of the catalog older than Redis's version.
var errStaleCatalog = errors.New("the catalog changed since it was read")

// holdView is what one attempt at a hold reads of the catalog: this instance's copies as they are
// (the hold script then compares their version with Redis's, in the hold's own round trip), or read
// fresh after a stale answer. Every entry it reads must be of one version.
type holdView struct {
	cat   *catalog.Cache
	fresh bool
	ver   catalog.Version
	mixed bool // two entries of different versions: one of them is stale
	// compared is set once a hold script compared ver with Redis's and found it current.
	compared bool
}

func (v *holdView) note(ver catalog.Version) {
	switch {
	case v.ver == catalog.Version{}:
		v.ver = ver
	case ver.Global != v.ver.Global:
		v.mixed = true
	case v.ver.Venue == "":
		v.ver.Venue = ver.Venue // the first entries were global ones
	case ver.Venue != "" && ver.Venue != v.ver.Venue:
		v.mixed = true
	}
}

func (v *holdView) resource(ctx context.Context, id uint64) (*catalog.ResourceInfo, error) {
	ri, ver, err := v.cat.ResourceAt(ctx, id, v.fresh)
	v.note(ver)
	return ri, err
}

func (v *holdView) service(ctx context.Context, id uint64) (*catalog.ServiceInfo, error) {
	si, ver, err := v.cat.ServiceAt(ctx, id, v.fresh)
	v.note(ver)
	return si, err
}

func (v *holdView) venue(ctx context.Context, id uint64) (*catalog.VenueInfo, error) {
	vi, ver, err := v.cat.VenueAt(ctx, id, v.fresh)
	v.note(ver)
	return vi, err
}

func (v *holdView) noshowPolicy(ctx context.Context) (booking.NoshowPolicy, error) {
	p, ver, err := v.cat.NoshowPolicyAt(ctx, v.fresh)
	v.note(ver)
	return p, err
}

// version is the venue version the hold script compares, or errStaleCatalog when the entries read
// do not agree.
func (v *holdView) version() (string, error) {
	if v.mixed {
		return "", errStaleCatalog
	}
	return v.ver.Venue, nil
}

func (hs *Holds) hold(ctx context.Context, req HoldRequest, view *holdView) (booking.Hold, error) {
	if req.UserID == "" {
		return booking.Hold{}, booking.ErrForbidden
	}
	var err error
	if req.Quantity, err = booking.Quantity(req.Quantity); err != nil {
		return booking.Hold{}, err
	}
	if req.Start.IsZero() {
		return booking.Hold{}, booking.Invalid("missing_start", "start is required").WithField("start")
	}
	if req.ServiceID == 0 {
		if req.ResourceID == 0 {
			return booking.Hold{}, booking.Invalid("missing_resource_id", "resource_id or service_id is required").WithField("resource_id")
		}
		ri, err := view.resource(ctx, req.ResourceID)
		if err != nil {
			return booking.Hold{}, booking.Unknown(err, "unknown_resource", "resource %d does not exist", req.ResourceID)
		}
		if err := hs.checkFrozenIn(ctx, req.UserID, ri.Venue.Loc, view.noshowPolicy); err != nil {
			return booking.Hold{}, err
		}
		return hs.take(ctx, req, ri, nil, view)
	}
	si, err := view.service(ctx, req.ServiceID)
	if err != nil {
		return booking.Hold{}, booking.Unknown(err, "unknown_service", "service %d does not exist", req.ServiceID)
	}
	vi, err := view.venue(ctx, si.Service.VenueID)
	if err != nil {
		return booking.Hold{}, err
	}
	if err := hs.checkFrozenIn(ctx, req.UserID, vi.Loc, view.noshowPolicy); err != nil {
		return booking.Hold{}, err
	}
	if len(si.Roles) > 0 {
		return hs.holdRoles(ctx, req, si, view)
	}
	if len(req.Resources) > 0 {
		return booking.Hold{}, booking.Invalid("invalid_resources", "service %d has no roles: name one resource_id", si.Service.ID).WithField("resources")
	}
	candidates := si.ResourceIDs
	if req.ResourceID != 0 {
		if !slices.Contains(si.ResourceIDs, req.ResourceID) {
			return booking.Hold{}, booking.Invalid("resource_not_in_service", "resource %d does not deliver service %d", req.ResourceID, req.ServiceID).WithField("resource_id")
		}
		candidates = []uint64{req.ResourceID}
	}
	var firstErr error
	for _, rid := range candidates {
		ri, err := view.resource(ctx, rid)
		if err == nil {
			var h booking.Hold
			if h, err = hs.take(ctx, req, ri, si, view); err == nil || errors.Is(err, errStaleCatalog) {
				return h, err
			}
		}
		if firstErr == nil || errors.Is(firstErr, booking.ErrSlotClosed) {
			firstErr = err
		}
		if !errors.Is(err, booking.ErrSlotFull) && !errors.Is(err, booking.ErrSlotClosed) && !errors.Is(err, booking.ErrResourceInactive) {
			return booking.Hold{}, err
		}
	}
	return booking.Hold{}, firstErr
}

// take places the request on ri's grid and runs the hold script, loading cold days from SQL first.
func (hs *Holds) take(ctx context.Context, req HoldRequest, ri *catalog.ResourceInfo, si *catalog.ServiceInfo, view *holdView) (booking.Hold, error) {
	ver, err := view.version()
	if err != nil {
		return booking.Hold{}, err
	}
	now := hs.clock.Now()
	p, err := catalog.Offer(ri, si).Place(req.Start, req.End, req.Quantity, now)
	if err != nil {
		return booking.Hold{}, err
	}
	v := ri.Resource.VenueID
	r := &redisstore.HoldRecord{CatalogVersion: ver, ID: redisstore.NewHoldID(v), UserID: req.UserID, VenueID: v, ResourceID: ri.Resource.ID,
		Quantity: req.Quantity, Status: booking.HoldHeld, Start: p.Start, End: p.End, OccupyStart: p.OccupyStart,
		OccupyEnd: p.OccupyEnd, Deadline: booking.HoldDeadline(now, hs.holdTTL), Created: now, AmountCents: p.AmountCents}
	if si != nil {
		r.ServiceID = si.Service.ID
	}
	r.Fields, r.Days = redisstore.SlotFields(ri.Resource.ID, p.Slots)
	var step *redisstore.IdemStep
	if req.once != nil {
		step = req.once.prepare(holdOf(r).In(ri.Venue.Loc))
	}
	return hs.runHold(ctx, r, ri.Venue.Loc, view, func() (redisstore.HoldOutcome, string, error) {
		out, day, a, err := hs.rs.HoldOnce(ctx, r, now, hs.maxActiveHolds, step)
		if err == nil && req.once != nil {
			req.once.outcome(out, a)
		}
		return out, day, err
	})
}

// runHold runs a hold script (script) until it answers something other than a cold day, loading
// each cold day it names, and turns its answer into the hold or the error the client gets.
func (hs *Holds) runHold(ctx context.Context, r *redisstore.HoldRecord, loc *time.Location, view *holdView, script func() (redisstore.HoldOutcome, string, error)) (booking.Hold, error) {
	// Each attempt loads one more day; a hold spans at most a few (a role service's resources'
	// days), so more attempts than this mean the day does not stay loaded.
	const maxAttempts = 10
	for attempt := 0; ; attempt++ {
		out, cold, err := script()
		if err != nil {
			return booking.Hold{}, err
		}
		holdCounter(out).Inc()
		view.compared = out != redisstore.HoldStale && out != redisstore.HoldCold
		switch out {
		case redisstore.HoldOK:
			return holdOf(r).In(loc), nil
		case redisstore.HoldDone:
			return booking.Hold{}, nil // a repeat: its first answer is the keyed hold's (HoldOnce)
		case redisstore.HoldReused:
			return booking.Hold{}, idem.ErrKeyReused
		case redisstore.HoldRunning:
			return booking.Hold{}, idem.ErrInProgress
		case redisstore.HoldCold:
			if attempt >= maxAttempts {
				return booking.Hold{}, redisstore.Unexpected("hold: day would not load")
			}
			if err := hs.loadDayField(ctx, cold); err != nil {
				return booking.Hold{}, err
			}
		case redisstore.HoldFull:
			return booking.Hold{}, booking.ErrSlotFull
		case redisstore.HoldStale:
			return booking.Hold{}, errStaleCatalog
		case redisstore.HoldLimit:
			return booking.Hold{}, booking.ErrTooManyHolds.WithDetail("max_active_holds", hs.maxActiveHolds)
		default:
			return booking.Hold{}, booking.ErrSlotClosed
		}
	}
}

// holdRoles takes a hold of a service that needs several resources at once: one resource of every
// role (the named one, or the first of the role's that has room), in one script, all or none.
func (hs *Holds) holdRoles(ctx context.Context, req HoldRequest, si *catalog.ServiceInfo, view *holdView) (booking.Hold, error) {
	if req.ResourceID != 0 {
		return booking.Hold{}, booking.Invalid("invalid_resources", "service %d needs one resource per role: name them in resources", si.Service.ID).WithField("resource_id")
	}
	for role := range req.Resources {
		if !slices.ContainsFunc(si.Roles, func(r catalog.Role) bool { return r.Role == role }) {
			return booking.Hold{}, booking.Invalid("invalid_resources", "service %d has no role %q", si.Service.ID, role).WithField("resources")
		}
	}
	now := hs.clock.Now()
	var first *booking.Placement
	var primary *catalog.ResourceInfo
	var firstErr error
	roles := make([]redisstore.Role, len(si.Roles))
	var allDays []string
	for i, role := range si.Roles {
		ids := role.ResourceIDs
		if pin, ok := req.Resources[role.Role]; ok {
			if !slices.Contains(ids, pin) {
				return booking.Hold{}, booking.Invalid("invalid_resources", "resource %d does not fill role %q", pin, role.Role).WithField("resources")
			}
			ids = []uint64{pin}
		}
		roles[i].Name = role.Role
		for _, rid := range ids {
			ri, err := view.resource(ctx, rid)
			var p booking.Placement
			if err == nil {
				p, err = catalog.Offer(ri, si).Place(req.Start, req.End, req.Quantity, now)
			}
			if err != nil {
				if firstErr == nil || errors.Is(firstErr, booking.ErrSlotClosed) || errors.Is(firstErr, booking.ErrResourceInactive) {
					firstErr = err
				}
				continue
			}
			if first == nil {
				first, primary = &p, ri
			}
			fields, days := redisstore.SlotFields(rid, p.Slots)
			roles[i].Candidates = append(roles[i].Candidates, redisstore.RoleCandidate{ResourceID: rid, Fields: fields, Days: days})
			allDays = append(allDays, days...)
		}
		if len(roles[i].Candidates) == 0 {
			return booking.Hold{}, firstErr
		}
	}
	ver, err := view.version()
	if err != nil {
		return booking.Hold{}, err
	}
	v := primary.Resource.VenueID
	r := &redisstore.HoldRecord{CatalogVersion: ver, ID: redisstore.NewHoldID(v), UserID: req.UserID, VenueID: v, ResourceID: primary.Resource.ID,
		ServiceID: si.Service.ID, Quantity: req.Quantity, Status: booking.HoldHeld, Start: first.Start, End: first.End,
		OccupyStart: first.OccupyStart, OccupyEnd: first.OccupyEnd, Deadline: booking.HoldDeadline(now, hs.holdTTL),
		Created: now, AmountCents: first.AmountCents, Days: allDays}
	return hs.runHold(ctx, r, primary.Venue.Loc, view, func() (redisstore.HoldOutcome, string, error) {
		return hs.rs.HoldRoles(ctx, r, roles, now, hs.maxActiveHolds)
	})
}

// loadDayField loads the resource-day a script found cold.
func (hs *Holds) loadDayField(ctx context.Context, dayField string) error {
	ri, err := hs.cat.Resource(ctx, redisstore.DayResource(dayField))
	if err != nil {
		return err
	}
	return hs.catalog.loadDay(ctx, ri, redisstore.DayOf(dayField))
}

// holdOf is the hold a record stands for, with the status it had when written.
func holdOf(r *redisstore.HoldRecord) booking.Hold {
	return booking.Hold{ID: r.ID, UserID: r.UserID, VenueID: r.VenueID, ResourceID: r.ResourceID, ServiceID: r.ServiceID,
		Quantity: r.Quantity, Status: r.Status, Start: r.Start, End: r.End, OccupyStart: r.OccupyStart, OccupyEnd: r.OccupyEnd,
		ExpiresAt: r.Deadline, CreatedAt: r.Created, AmountCents: r.AmountCents, BookingID: r.BookingID, Roles: r.Roles}
}

// readHold loads a live or recently ended hold record; ErrNotFound when Redis has none (a paid hold's
// record goes when its booking takes over, and unpaid holds may be lost with Redis).
func (hs *Holds) readHold(ctx context.Context, id string) (*redisstore.HoldRecord, error) {
	r, ok, err := hs.rs.ReadHold(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, booking.ErrNotFound
	}
	return &r, nil
}

// viewHold is what a caller is shown of a record: its effective status, in the venue's zone.
func (hs *Holds) viewHold(ctx context.Context, r *redisstore.HoldRecord) booking.Hold {
	h := holdOf(r)
	h.Status = r.Effective(hs.clock.Now())
	if vi, err := hs.cat.Venue(ctx, r.VenueID); err == nil {
		h = h.In(vi.Loc)
	}
	return h
}

// GetHold reads a hold (for 24 h after it ends). Owner or admin; others get ErrNotFound.
func (hs *Holds) GetHold(ctx context.Context, a booking.Actor, id string) (booking.Hold, error) {
	r, err := hs.readHold(ctx, id)
	if errors.Is(err, booking.ErrNotFound) {
		return hs.paidHold(ctx, a, id)
	}
	if err != nil {
		return booking.Hold{}, err
	}
	if !a.MayChange(r.UserID) {
		return booking.Hold{}, booking.ErrNotFound
	}
	return hs.viewHold(ctx, r), nil
}

// notActiveIfPaid is why a change of hold id, whose record is gone, is refused: ErrHoldNotActive when
// a's booking was made from it, else ErrNotFound.
func (hs *Holds) notActiveIfPaid(ctx context.Context, a booking.Actor, id string) error {
	if _, err := hs.paidHold(ctx, a, id); err != nil {
		return err
	}
	return booking.ErrHoldNotActive
}

// paidHold answers for a hold whose record is gone: the booking made from it says what it was.
func (hs *Holds) paidHold(ctx context.Context, a booking.Actor, id string) (booking.Hold, error) {
	if _, ok := redisstore.HoldVenue(id); !ok {
		return booking.Hold{}, booking.ErrNotFound
	}
	b, ok, err := hs.ss.BookingByHold(ctx, id)
	if err != nil {
		return booking.Hold{}, err
	}
	if !ok || !a.MayChange(b.UserID) {
		return booking.Hold{}, booking.ErrNotFound
	}
	return hs.holdFromBooking(ctx, &b.Booking), nil
}

func (hs *Holds) holdFromBooking(ctx context.Context, b *booking.Booking) booking.Hold {
	h := booking.Hold{ID: b.HoldID, UserID: b.UserID, VenueID: b.VenueID, ResourceID: b.ResourceID, ServiceID: b.ServiceID,
		Quantity: b.Quantity, Status: booking.HoldConfirmed, Start: b.Start, End: b.End, OccupyStart: b.OccupyStart,
		OccupyEnd: b.OccupyEnd, ExpiresAt: b.ConfirmedAt, CreatedAt: b.ConfirmedAt, AmountCents: b.AmountCents, BookingID: b.ID,
		Roles: b.Roles}
	if vi, err := hs.cat.Venue(ctx, b.VenueID); err == nil {
		h = h.In(vi.Loc)
	}
	return h
}

// ListHolds lists the actor's holds of the last 24 hours, newest first: unpaid ones from Redis at
// every venue, paid ones from the bookings they became.
func (hs *Holds) ListHolds(ctx context.Context, a booking.Actor) ([]booking.Hold, error) {
	venues, err := hs.cat.VenueList(ctx)
	if err != nil {
		return nil, err
	}
	const limit = 200
	var out []booking.Hold
	seen := map[string]bool{}
	for _, v := range venues {
		ids, err := hs.rs.UserHolds(ctx, v, a.UserID, limit)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			r, err := hs.readHold(ctx, id)
			if errors.Is(err, booking.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			seen[id] = true
			out = append(out, hs.viewHold(ctx, r))
		}
	}
	paid, err := hs.ss.PaidHolds(ctx, a.UserID, hs.clock.Now().Add(-redisstore.Keep), limit)
	if err != nil && !errors.Is(err, booking.ErrStorageUnavailable) {
		return nil, err
	}
	for i := range paid {
		if !seen[paid[i].HoldID] {
			out = append(out, hs.holdFromBooking(ctx, &paid[i].Booking))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CancelHold gives up an unpaid hold. Owner or admin. A hold already paid into a booking is not
// active (ErrHoldNotActive), as GetHold shows it CONFIRMED; cancelling it is cancelling the booking.
func (hs *Holds) CancelHold(ctx context.Context, a booking.Actor, id string) (booking.Hold, error) {
	r, err := hs.readHold(ctx, id)
	if errors.Is(err, booking.ErrNotFound) {
		return booking.Hold{}, hs.notActiveIfPaid(ctx, a, id)
	}
	if err != nil {
		return booking.Hold{}, err
	}
	if !a.MayChange(r.UserID) {
		return booking.Hold{}, booking.ErrNotFound
	}
	now := hs.clock.Now()
	out, err := hs.rs.CancelHold(ctx, r, now)
	if err != nil {
		return booking.Hold{}, err
	}
	switch out {
	case "cancelled":
	case "busy":
		return booking.Hold{}, booking.ErrConfirmInProgress
	case "missing":
		return booking.Hold{}, hs.notActiveIfPaid(ctx, a, id)
	default:
		return booking.Hold{}, booking.ErrHoldNotActive
	}
	hs.freed.announce(ctx, freedUnits{resources: []uint64{r.ResourceID}})
	hs.payments.closeOrderOf(ctx, r.ID, r.OrderNo)
	r.Status = booking.HoldCancelled // what the script just wrote
	return hs.viewHold(ctx, r), nil
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricHolds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_holds_total", Help: "Hold attempts by outcome (ok, full, closed, limit, cold: a day loaded from SQL first; done: a repeat of a keyed hold answered as the first time, reused: its key came with another body, running: its first request still ran; stale: decided on a copy of the catalog older than an admin change, and decided again).",
	}, []string{"outcome"})
)

// holdCounters are metricHolds' counters by outcome, looked up once: a hold counts itself without
// hashing its label.
var holdCounters = map[redisstore.HoldOutcome]prometheus.Counter{}

// Every label value is registered up front (engine.go says why).
func init() {
	for _, o := range []redisstore.HoldOutcome{redisstore.HoldOK, redisstore.HoldFull, redisstore.HoldClosed, redisstore.HoldLimit,
		redisstore.HoldCold, redisstore.HoldDone, redisstore.HoldReused, redisstore.HoldRunning, redisstore.HoldStale} {
		holdCounters[o] = metricHolds.WithLabelValues(string(o))
	}
}

// holdCounter is metricHolds' counter of outcome o.
func holdCounter(o redisstore.HoldOutcome) prometheus.Counter {
	if c, ok := holdCounters[o]; ok {
		return c
	}
	return metricHolds.WithLabelValues(string(o))
}
