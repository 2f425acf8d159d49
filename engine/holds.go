package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// window is a request resolved against a resource's grid: which slots it occupies.
type window struct {
	ri          *resourceInfo
	serviceID   uint64
	start, end  time.Time // what the customer sees
	occStart    time.Time // the physical window, buffers included
	occEnd      time.Time
	fields      []string
	days        []string
	amountCents int64
}

// resolve checks a hold request against the grid, the clock and the horizon.
func (e *Engine) resolve(ctx context.Context, req HoldRequest, resourceID uint64, svc *serviceInfo) (*window, error) {
	ri, err := e.resource(ctx, resourceID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, Invalid("unknown_resource", "resource %d does not exist", resourceID)
		}
		return nil, err
	}
	if ri.res.Status != "active" {
		return nil, ErrResourceInactive
	}
	if ri.plan == nil {
		return nil, ErrSlotClosed
	}
	if req.Quantity > ri.res.Capacity {
		return nil, Invalid("invalid_quantity", "quantity %d is more than the resource's capacity %d", req.Quantity, ri.res.Capacity)
	}
	loc := ri.venue.loc
	w := &window{ri: ri, start: req.Start.UTC()}
	if svc != nil {
		w.serviceID = svc.svc.ID
		w.end = w.start.Add(time.Duration(svc.svc.DurationMinutes) * time.Minute)
		if !req.End.IsZero() && !req.End.Equal(w.end) {
			return nil, Invalid("invalid_end", "end must be start + the service's %d minutes, or omitted", svc.svc.DurationMinutes)
		}
		w.occStart = w.start.Add(-time.Duration(svc.svc.PrepMinutes) * time.Minute)
		w.occEnd = w.end.Add(time.Duration(svc.svc.CleanupMinutes) * time.Minute)
		w.amountCents = svc.svc.PriceCents * int64(req.Quantity)
	} else {
		if req.End.IsZero() {
			return nil, Invalid("missing_end", "end is required for a resource hold")
		}
		w.end = req.End.UTC()
		if !w.end.After(w.start) {
			return nil, Invalid("invalid_window", "end must be after start")
		}
		w.occStart, w.occEnd = w.start, w.end
	}
	if w.end.Sub(w.start) > 7*24*time.Hour {
		return nil, Invalid("invalid_window", "a hold may not be longer than seven days")
	}
	now := e.clock.Now()
	if !w.end.After(now) {
		return nil, ErrSlotPast
	}
	// The customer's own window must start (and, for resource holds, end) on the grid.
	custom, ok := ri.plan.window(w.start, w.end, loc)
	switch {
	case len(custom) == 0:
		return nil, e.closedOrFar(ri, w.start)
	case !custom[0].start.Equal(w.start), svc == nil && !custom[len(custom)-1].end.Equal(w.end):
		return nil, ErrOffGrid
	case !ok:
		return nil, e.closedOrFar(ri, w.start)
	case !custom[0].end.After(now):
		// A slot in progress can still be held; one that has ended cannot.
		return nil, ErrSlotPast
	}
	slots, ok := ri.plan.window(w.occStart, w.occEnd, loc)
	if !ok {
		return nil, ErrSlotClosed
	}
	if !e.withinHorizon(ri, localDay(custom[len(custom)-1].start, loc)) {
		return nil, ErrTooFar
	}
	if svc == nil {
		w.amountCents = ri.res.PriceCents * int64(len(custom)) * int64(req.Quantity)
	}
	w.fields, w.days = slotFields(ri.res.ID, slots)
	return w, nil
}

func (e *Engine) closedOrFar(ri *resourceInfo, t time.Time) error {
	if !e.withinHorizon(ri, localDay(t, ri.venue.loc)) && t.After(e.clock.Now()) {
		return ErrTooFar
	}
	return ErrSlotClosed
}

// Hold takes units for a user, all or nothing. A service hold without a resource takes the first
// of the service's resources that has room.
func (e *Engine) Hold(ctx context.Context, req HoldRequest) (Hold, error) {
	if req.UserID == "" {
		return Hold{}, ErrForbidden
	}
	var err error
	if req.Quantity, err = quantityOrOne(req.Quantity); err != nil {
		return Hold{}, err
	}
	if req.Start.IsZero() {
		return Hold{}, Invalid("missing_start", "start is required")
	}
	if req.ServiceID == 0 {
		if req.ResourceID == 0 {
			return Hold{}, Invalid("missing_resource_id", "resource_id or service_id is required")
		}
		w, err := e.resolve(ctx, req, req.ResourceID, nil)
		if err != nil {
			return Hold{}, err
		}
		return e.take(ctx, req, w)
	}
	svc, err := e.service(ctx, req.ServiceID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Hold{}, Invalid("unknown_service", "service %d does not exist", req.ServiceID)
		}
		return Hold{}, err
	}
	candidates := svc.resources
	if req.ResourceID != 0 {
		if !containsID(svc.resources, req.ResourceID) {
			return Hold{}, Invalid("resource_not_in_service", "resource %d does not deliver service %d", req.ResourceID, req.ServiceID)
		}
		candidates = []uint64{req.ResourceID}
	}
	var firstErr error
	for _, rid := range candidates {
		w, err := e.resolve(ctx, req, rid, svc)
		if err == nil {
			var h Hold
			if h, err = e.take(ctx, req, w); err == nil {
				return h, nil
			}
		}
		if firstErr == nil || errors.Is(firstErr, ErrSlotClosed) {
			firstErr = err
		}
		if !errors.Is(err, ErrSlotFull) && !errors.Is(err, ErrSlotClosed) && !errors.Is(err, ErrResourceInactive) {
			return Hold{}, err
		}
	}
	return Hold{}, firstErr
}

// quantityOrOne defaults a request's quantity to 1 and bounds it.
func quantityOrOne(q int) (int, error) {
	if q == 0 {
		return 1, nil
	}
	if q < 0 || q > 1000 {
		return 0, Invalid("invalid_quantity", "quantity must be between 1 and 1000")
	}
	return q, nil
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// take runs the hold script, loading cold days from SQL first.
func (e *Engine) take(ctx context.Context, req HoldRequest, w *window) (Hold, error) {
	now := e.clock.Now()
	v := w.ri.res.VenueID
	id := newHoldID(v)
	// The API shows expires_at in whole seconds; the deadline is that second, rounded up, so the
	// hold never ends before the time its owner was told.
	deadline := now.Add(e.opts.HoldTTL)
	if t := deadline.Truncate(time.Second); !t.Equal(deadline) {
		deadline = t.Add(time.Second)
	}
	k := e.keys
	keys := []string{k.Capacity(v), k.Used(v), k.Owners(v), k.Wheel(v), k.Days(v), k.Hold(v, id), k.UserHolds(v, req.UserID)}
	args := []any{
		now.UnixMilli(), deadline.UnixMilli(), req.Quantity, id, keep.Milliseconds(), k.HoldPrefix(v),
		strings.Join(w.days, ","), joinFields(w.fields),
		"id", id, "user", req.UserID, "venue", v, "resource", w.ri.res.ID, "service", w.serviceID,
		"qty", req.Quantity, "start_ms", w.start.UnixMilli(), "end_ms", w.end.UnixMilli(),
		"ostart_ms", w.occStart.UnixMilli(), "oend_ms", w.occEnd.UnixMilli(), "deadline_ms", deadline.UnixMilli(),
		"created_ms", now.UnixMilli(), "amount", w.amountCents, "days", strings.Join(w.days, ","),
	}
	for attempt := 0; ; attempt++ {
		out, err := reply(e.scripts.holdSlots.Run(ctx, e.rdb, keys, args...).Result())
		if err != nil {
			return Hold{}, backendErr("hold", err)
		}
		switch out[0] {
		case "ok":
			metricHolds.WithLabelValues("ok").Inc()
			return Hold{ID: id, UserID: req.UserID, VenueID: v, ResourceID: w.ri.res.ID, ServiceID: w.serviceID,
				Quantity: req.Quantity, Status: HoldHeld, Start: w.start, End: w.end, OccupyStart: w.occStart,
				OccupyEnd: w.occEnd, ExpiresAt: deadline, CreatedAt: now, AmountCents: w.amountCents}.in(w.ri.venue.loc), nil
		case "cold":
			if attempt >= 3 {
				return Hold{}, backendErr("hold", errors.New("day would not load"))
			}
			if err := e.loadDay(ctx, w.ri, dayOfField(out[1])); err != nil {
				return Hold{}, err
			}
		case "full":
			metricHolds.WithLabelValues("full").Inc()
			return Hold{}, ErrSlotFull
		default:
			metricHolds.WithLabelValues("closed").Inc()
			return Hold{}, ErrSlotClosed
		}
	}
}

// in converts a hold's times to the venue's zone, as the API answers them.
func (h Hold) in(loc *time.Location) Hold {
	h.Start, h.End = h.Start.In(loc), h.End.In(loc)
	h.OccupyStart, h.OccupyEnd = h.OccupyStart.In(loc), h.OccupyEnd.In(loc)
	h.ExpiresAt, h.CreatedAt = h.ExpiresAt.In(loc), h.CreatedAt.In(loc)
	return h
}

// newHoldID makes an unguessable hold id that names its venue, so a hold is found from its id alone.
func newHoldID(venueID uint64) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "h" + strconv.FormatUint(venueID, 10) + "_" + hex.EncodeToString(b)
}

// holdVenue reads the venue out of a hold id.
func holdVenue(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, "h")
	if !ok {
		return 0, false
	}
	v, tail, ok := strings.Cut(rest, "_")
	if !ok || len(tail) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// holdRecord is a hold as stored in Redis.
type holdRecord struct {
	Hold
	fields []string
	days   []string
}

// readHold loads a hold record; ErrNotFound when it is unknown or gone.
func (e *Engine) readHold(ctx context.Context, id string) (*holdRecord, error) {
	v, ok := holdVenue(id)
	if !ok {
		return nil, ErrNotFound
	}
	m, err := e.rdb.HGetAll(ctx, e.keys.Hold(v, id)).Result()
	if err != nil {
		return nil, backendErr("read hold", err)
	}
	if len(m) == 0 || m["id"] == "" {
		return nil, ErrNotFound
	}
	return e.decodeHold(ctx, m)
}

func (e *Engine) decodeHold(ctx context.Context, m map[string]string) (*holdRecord, error) {
	u := func(k string) uint64 { n, _ := strconv.ParseUint(m[k], 10, 64); return n }
	i := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	ms := func(k string) time.Time { return time.UnixMilli(i(k)).UTC() }
	r := &holdRecord{Hold: Hold{ID: m["id"], UserID: m["user"], VenueID: u("venue"), ResourceID: u("resource"),
		ServiceID: u("service"), Quantity: int(i("qty")), Status: m["status"], Start: ms("start_ms"), End: ms("end_ms"),
		OccupyStart: ms("ostart_ms"), OccupyEnd: ms("oend_ms"), ExpiresAt: ms("deadline_ms"), CreatedAt: ms("created_ms"),
		AmountCents: i("amount"), BookingID: u("booking_id")}}
	r.fields = strings.Split(m["slots"], ",")
	r.days = strings.Split(m["days"], ",")
	// A hold stops occupying at its deadline even if the ticker has not popped it yet.
	if r.Status == HoldHeld && !r.ExpiresAt.After(e.clock.Now()) {
		r.Status = HoldExpired
	}
	if vi, err := e.venue(ctx, r.VenueID); err == nil {
		r.Hold = r.Hold.in(vi.loc)
	}
	return r, nil
}

// visibleTo says whether an actor may see a hold: its owner or an admin.
func (h Hold) visibleTo(a Actor) bool {
	return a.Role == RoleAdmin || (a.UserID != "" && a.UserID == h.UserID)
}

// GetHold reads a hold (for 24 h after it ends). Owner or admin; others get ErrNotFound.
func (e *Engine) GetHold(ctx context.Context, a Actor, id string) (Hold, error) {
	r, err := e.readHold(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return e.holdFromBooking(ctx, a, id)
	}
	if err != nil {
		return Hold{}, err
	}
	if !r.visibleTo(a) {
		return Hold{}, ErrNotFound
	}
	return r.Hold, nil
}

// holdFromBooking answers for a paid hold whose Redis record is gone (Redis lost its data): the
// booking made from it says what it was. Only unpaid holds may be lost.
func (e *Engine) holdFromBooking(ctx context.Context, a Actor, id string) (Hold, error) {
	if _, ok := holdVenue(id); !ok {
		return Hold{}, ErrNotFound
	}
	b, ok, err := e.bookingByHold(ctx, id)
	if err != nil {
		return Hold{}, err
	}
	if !ok {
		return Hold{}, ErrNotFound
	}
	h := Hold{ID: id, UserID: b.UserID, VenueID: b.VenueID, ResourceID: b.ResourceID, ServiceID: b.ServiceID,
		Quantity: b.Quantity, Status: HoldConfirmed, Start: b.Start, End: b.End, OccupyStart: b.OccupyStart,
		OccupyEnd: b.OccupyEnd, ExpiresAt: b.ConfirmedAt, CreatedAt: b.ConfirmedAt, AmountCents: b.AmountCents, BookingID: b.ID}
	if !h.visibleTo(a) {
		return Hold{}, ErrNotFound
	}
	return h, nil
}

// ListHolds lists the actor's holds of the last 24 hours at every venue, newest first.
func (e *Engine) ListHolds(ctx context.Context, a Actor) ([]Hold, error) {
	venues, err := e.venueIDs(ctx)
	if err != nil {
		return nil, err
	}
	pipe := e.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, 0, len(venues))
	for _, v := range venues {
		cmds = append(cmds, pipe.ZRevRange(ctx, e.keys.UserHolds(v, a.UserID), 0, 199))
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
		return nil, backendErr("list holds", err)
	}
	var out []Hold
	for _, c := range cmds {
		for _, id := range c.Val() {
			r, err := e.readHold(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r.Hold)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// CancelHold gives up an unpaid hold. Owner or admin.
func (e *Engine) CancelHold(ctx context.Context, a Actor, id string) (Hold, error) {
	r, err := e.readHold(ctx, id)
	if err != nil {
		return Hold{}, err
	}
	if !r.visibleTo(a) {
		return Hold{}, ErrNotFound
	}
	v := r.VenueID
	k := e.keys
	out, err := e.scripts.cancelHold.Run(ctx, e.rdb, []string{k.Owners(v), k.Used(v), k.Wheel(v), k.Hold(v, id)},
		e.clock.Now().UnixMilli(), keep.Milliseconds(), k.HoldPrefix(v)).Text()
	if err != nil {
		return Hold{}, backendErr("cancel hold", err)
	}
	switch out {
	case "cancelled":
	case "busy":
		return Hold{}, ErrConfirmInProgress
	case "missing":
		return Hold{}, ErrNotFound
	default:
		return Hold{}, ErrHoldNotActive
	}
	e.promoteAfterFree(ctx, r.ResourceID)
	r.Status = HoldCancelled // what the script just wrote
	return r.Hold, nil
}
