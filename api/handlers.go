package api

import (
	"bytes"
	"context"
	_ "embed"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
)

// Limits of request values. The engine enforces its own rules as well; these keep absurd values out
// with a code that names the field.
const (
	maxNameLen     = 200
	maxTagLen      = 64 // kind, category
	maxCapacity    = 1000000
	maxPriceCents  = 10_000_000_000 // 100 million in the currency's main unit
	maxQuantity    = 1000
	maxSlotMinutes = 1440
	maxHorizonDays = 366
	defaultHorizon = 30
	maxMinutes     = 1440 // a service's duration, preparation or clean-up
	maxGraceSecs   = 86400
	maxServiceRes  = 100
	maxCodeLen     = 16 // check-in codes
	maxPaymentID   = 128
	defaultLimit   = 20
	maxLimit       = 100
	maxCursorLen   = 256
)

// ---- health, readiness, document ----

func (s *server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	if err := s.eng.Ready(ctx); err != nil {
		s.log.WarnContext(ctx, "not ready", "request_id", requestIDOf(c), "err", err)
		s.fail(c, errBackendUnavailable)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

//go:embed openapi.json
var openAPIDoc []byte

func serveOpenAPI(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPIDoc)
}

// ---- admin ----

type venueRequest struct {
	Name     *string `json:"name"`
	Timezone *string `json:"timezone"`
}

func (s *server) createVenue(c *gin.Context) {
	var req venueRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(
		requireName("name", req.Name),
		requireString("timezone", req.Timezone, 64),
	); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.eng.CreateVenue(c.Request.Context(), actorOf(c), engine.VenueInput{Name: *req.Name, Timezone: *req.Timezone})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toVenueResponse(v))
}

type resourceRequest struct {
	VenueID    *jsonID `json:"venue_id"`
	Name       *string `json:"name"`
	Kind       *string `json:"kind"`
	Capacity   *int    `json:"capacity"`
	Category   string  `json:"category"`
	PriceCents *int64  `json:"price_cents"`
}

func (s *server) createResource(c *gin.Context) {
	var req resourceRequest
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(
		requireID("venue_id", req.VenueID),
		requireName("name", req.Name),
		requireTag("kind", "invalid_kind", req.Kind),
		requireInt("capacity", req.Capacity, 1, maxCapacity),
		optionalTag("category", "invalid_category", req.Category),
		requireInt64("price_cents", req.PriceCents, 0, maxPriceCents),
	); err != nil {
		s.fail(c, err)
		return
	}
	r, err := s.eng.CreateResource(c.Request.Context(), actorOf(c), engine.ResourceInput{
		VenueID:    uint64(*req.VenueID),
		Name:       *req.Name,
		Kind:       *req.Kind,
		Capacity:   *req.Capacity,
		Category:   req.Category,
		PriceCents: *req.PriceCents,
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toResourceResponse(r))
}

type weeklyRuleRequest struct {
	Weekdays []int  `json:"weekdays"`
	Open     string `json:"open"`
	Close    string `json:"close"`
}

type exceptionRequest struct {
	Date   string `json:"date"`
	Closed bool   `json:"closed"`
	Open   string `json:"open"`
	Close  string `json:"close"`
}

type scheduleRequest struct {
	SlotMinutes *int                 `json:"slot_minutes"`
	Weekly      *[]weeklyRuleRequest `json:"weekly"`
	Exceptions  []exceptionRequest   `json:"exceptions"`
	HorizonDays *int                 `json:"horizon_days"`
}

func (s *server) setSchedule(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	var req scheduleRequest
	if !s.bind(c, &req) {
		return
	}
	horizon := defaultHorizon
	if req.HorizonDays != nil {
		horizon = *req.HorizonDays
	}
	errs := []error{
		requireInt("slot_minutes", req.SlotMinutes, 1, maxSlotMinutes),
		intInRange("horizon_days", horizon, 1, maxHorizonDays),
	}
	if req.Weekly == nil {
		errs = append(errs, missing("weekly"))
	}
	in := engine.ScheduleInput{HorizonDays: horizon}
	if req.SlotMinutes != nil {
		in.SlotMinutes = *req.SlotMinutes
	}
	if req.Weekly != nil {
		for _, w := range *req.Weekly {
			errs = append(errs, checkWeekdays("weekly.weekdays", w.Weekdays),
				checkTimeOfDay("weekly.open", w.Open), checkTimeOfDay("weekly.close", w.Close))
			in.Weekly = append(in.Weekly, engine.WeeklyRule{Weekdays: w.Weekdays, Open: w.Open, Close: w.Close})
		}
	}
	for _, e := range req.Exceptions {
		errs = append(errs, checkDate("exceptions.date", e.Date))
		switch {
		case e.Closed && e.Open == "" && e.Close == "":
		case !e.Closed && e.Open != "" && e.Close != "":
			errs = append(errs, checkTimeOfDay("exceptions.open", e.Open), checkTimeOfDay("exceptions.close", e.Close))
		default:
			errs = append(errs, unprocessable("invalid_exception", "an exception is closed, or has open and close").withField("exceptions"))
		}
		in.Exceptions = append(in.Exceptions, engine.ScheduleException{Date: e.Date, Closed: e.Closed, Open: e.Open, Close: e.Close})
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	sched, err := s.eng.SetSchedule(c.Request.Context(), actorOf(c), id, in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toScheduleResponse(sched))
}

type serviceRequest struct {
	VenueID         *jsonID   `json:"venue_id"`
	Name            *string   `json:"name"`
	DurationMinutes *int      `json:"duration_minutes"`
	PrepMinutes     int       `json:"prep_minutes"`
	CleanupMinutes  int       `json:"cleanup_minutes"`
	ResourceIDs     *[]jsonID `json:"resource_ids"`
	PriceCents      *int64    `json:"price_cents"`
}

func (s *server) createService(c *gin.Context) {
	var req serviceRequest
	if !s.bind(c, &req) {
		return
	}
	errs := []error{
		requireID("venue_id", req.VenueID),
		requireName("name", req.Name),
		requireInt("duration_minutes", req.DurationMinutes, 1, maxMinutes),
		intInRange("prep_minutes", req.PrepMinutes, 0, maxMinutes),
		intInRange("cleanup_minutes", req.CleanupMinutes, 0, maxMinutes),
		requireInt64("price_cents", req.PriceCents, 0, maxPriceCents),
	}
	var resourceIDs []uint64
	if req.ResourceIDs == nil {
		errs = append(errs, missing("resource_ids"))
	} else {
		seen := map[jsonID]bool{}
		for _, id := range *req.ResourceIDs {
			if seen[id] {
				errs = append(errs, unprocessable("invalid_resource_ids", "resource_ids repeats an id").withField("resource_ids"))
			}
			seen[id] = true
			resourceIDs = append(resourceIDs, uint64(id))
		}
		if len(resourceIDs) == 0 || len(resourceIDs) > maxServiceRes {
			errs = append(errs, unprocessable("invalid_resource_ids", "a service needs 1 to 100 resources").withField("resource_ids"))
		}
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	svc, err := s.eng.CreateService(c.Request.Context(), actorOf(c), engine.ServiceInput{
		VenueID:         uint64(*req.VenueID),
		Name:            *req.Name,
		DurationMinutes: *req.DurationMinutes,
		PrepMinutes:     req.PrepMinutes,
		CleanupMinutes:  req.CleanupMinutes,
		ResourceIDs:     resourceIDs,
		PriceCents:      *req.PriceCents,
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toServiceResponse(svc))
}

type peakRuleRequest struct {
	Weekdays     []int  `json:"weekdays"`
	From         string `json:"from"`
	To           string `json:"to"`
	GraceSeconds *int   `json:"grace_seconds"`
}

type gracePolicyRequest struct {
	Category     *string           `json:"category"`
	GraceSeconds *int              `json:"grace_seconds"`
	Peak         []peakRuleRequest `json:"peak"`
}

func (s *server) setGracePolicy(c *gin.Context) {
	var req gracePolicyRequest
	if !s.bind(c, &req) {
		return
	}
	errs := []error{requireInt("grace_seconds", req.GraceSeconds, 0, maxGraceSecs)}
	if req.Category == nil {
		errs = append(errs, missing("category"))
	} else {
		errs = append(errs, optionalTag("category", "invalid_category", *req.Category))
	}
	in := engine.GracePolicy{}
	if req.Category != nil {
		in.Category = *req.Category
	}
	if req.GraceSeconds != nil {
		in.GraceSeconds = *req.GraceSeconds
	}
	for _, p := range req.Peak {
		errs = append(errs, checkWeekdays("peak.weekdays", p.Weekdays),
			checkTimeOfDay("peak.from", p.From), checkTimeOfDay("peak.to", p.To),
			requireInt("peak.grace_seconds", p.GraceSeconds, 0, maxGraceSecs))
		if p.GraceSeconds != nil {
			in.Peak = append(in.Peak, engine.PeakRule{Weekdays: p.Weekdays, From: p.From, To: p.To, GraceSeconds: *p.GraceSeconds})
		}
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	g, err := s.eng.SetGracePolicy(c.Request.Context(), actorOf(c), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toGracePolicyResponse(g))
}

// ---- browsing ----

func (s *server) listVenues(c *gin.Context) {
	vs, err := s.eng.ListVenues(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(vs, "", toVenueResponse))
}

func (s *server) listResources(c *gin.Context) {
	venueID, ok := s.queryID(c, "venue_id")
	if !ok {
		return
	}
	rs, err := s.eng.ListResources(c.Request.Context(), venueID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(rs, "", toResourceResponse))
}

func (s *server) listServices(c *gin.Context) {
	venueID, ok := s.queryID(c, "venue_id")
	if !ok {
		return
	}
	ss, err := s.eng.ListServices(c.Request.Context(), venueID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ss, "", toServiceResponse))
}

func (s *server) availability(c *gin.Context) {
	resourceID, ok := s.queryID(c, "resource_id")
	if !ok {
		return
	}
	serviceID, ok := s.queryID(c, "service_id")
	if !ok {
		return
	}
	if resourceID == 0 && serviceID == 0 {
		s.fail(c, badRequest("missing_parameter", "resource_id or service_id is required").withField("resource_id"))
		return
	}
	date, present := c.GetQuery("date")
	if !present {
		s.fail(c, badRequest("missing_parameter", "date is required").withField("date"))
		return
	}
	if !validDate(date) {
		s.fail(c, badRequest("invalid_date", "date must be YYYY-MM-DD").withField("date"))
		return
	}
	slots, err := s.eng.Availability(c.Request.Context(), engine.AvailabilityQuery{ResourceID: resourceID, ServiceID: serviceID, Date: date})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toAvailabilityResponse(slots))
}

// ---- holds ----

type holdRequest struct {
	ResourceID *jsonID   `json:"resource_id"`
	ServiceID  *jsonID   `json:"service_id"`
	Start      *jsonTime `json:"start"`
	End        *jsonTime `json:"end"`
	Quantity   *int      `json:"quantity"`
}

func (s *server) createHold(c *gin.Context) {
	var req holdRequest
	if !s.bind(c, &req) {
		return
	}
	quantity := 1
	if req.Quantity != nil {
		quantity = *req.Quantity
	}
	hr := engine.HoldRequest{UserID: actorOf(c).UserID, Quantity: quantity}
	errs := []error{intInRange("quantity", quantity, 1, maxQuantity)}
	switch {
	case req.Start == nil:
		errs = append(errs, missing("start"))
	case req.ServiceID != nil:
		// The service's duration decides the end; an end, if sent, must agree (the engine checks).
		hr.ServiceID = uint64(*req.ServiceID)
		if req.End != nil {
			hr.End = req.End.Time
		}
	case req.ResourceID == nil:
		errs = append(errs, missing("resource_id"))
	case req.End == nil:
		errs = append(errs, missing("end"))
	case !req.End.After(req.Start.Time):
		errs = append(errs, unprocessable("invalid_window", "end must be after start").withField("end"))
	default:
		hr.End = req.End.Time
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	hr.Start = req.Start.Time
	if req.ResourceID != nil {
		hr.ResourceID = uint64(*req.ResourceID)
	}
	h, err := s.eng.Hold(c.Request.Context(), hr)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toHoldResponse(h))
}

func (s *server) listHolds(c *gin.Context) {
	hs, err := s.eng.ListHolds(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(hs, "", toHoldResponse))
}

func (s *server) getHold(c *gin.Context) {
	id, ok := s.pathHoldID(c)
	if !ok {
		return
	}
	h, err := s.eng.GetHold(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

func (s *server) cancelHold(c *gin.Context) {
	id, ok := s.pathHoldID(c)
	if !ok {
		return
	}
	h, err := s.eng.CancelHold(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toHoldResponse(h))
}

// confirmHold stands in for a payment in trials; it does not exist unless dev payments are on.
func (s *server) confirmHold(c *gin.Context) {
	if !s.opts.DevPayments {
		s.fail(c, errNotFound)
		return
	}
	id, ok := s.pathHoldID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.Confirm(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toBookingResponse(b))
}

// ---- bookings ----

func (s *server) listBookings(c *gin.Context) {
	cursor := c.Query("cursor")
	if len(cursor) > maxCursorLen {
		s.fail(c, badRequest("invalid_cursor", "the cursor is not valid").withField("cursor"))
		return
	}
	limit := defaultLimit
	if v, ok := c.GetQuery("limit"); ok {
		n, ok := parseID(v)
		if !ok || n > maxLimit {
			s.fail(c, badRequest("invalid_limit", "limit must be 1 to 100").withField("limit"))
			return
		}
		limit = int(n)
	}
	bs, next, err := s.eng.ListBookings(c.Request.Context(), actorOf(c), cursor, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(bs, next, toBookingResponse))
}

func (s *server) getBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	b, err := s.eng.GetBooking(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (s *server) cancelBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.CancelBooking(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

func (s *server) restoreBooking(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	b, err := s.eng.Restore(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

type checkinRequest struct {
	CheckinCode *string `json:"checkin_code"`
}

func (s *server) checkIn(c *gin.Context) {
	var req checkinRequest
	if !s.bind(c, &req) {
		return
	}
	if err := requireString("checkin_code", req.CheckinCode, maxCodeLen); err != nil {
		s.fail(c, err)
		return
	}
	b, err := s.eng.CheckIn(c.Request.Context(), actorOf(c), *req.CheckinCode)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBookingResponse(b))
}

// ---- waitlist ----

type waitlistRequest struct {
	ResourceID *jsonID   `json:"resource_id"`
	Start      *jsonTime `json:"start"`
	End        *jsonTime `json:"end"`
	Quantity   *int      `json:"quantity"`
}

func (s *server) joinWaitlist(c *gin.Context) {
	var req waitlistRequest
	if !s.bind(c, &req) {
		return
	}
	quantity := 1
	if req.Quantity != nil {
		quantity = *req.Quantity
	}
	errs := []error{requireID("resource_id", req.ResourceID), intInRange("quantity", quantity, 1, maxQuantity)}
	switch {
	case req.Start == nil:
		errs = append(errs, missing("start"))
	case req.End == nil:
		errs = append(errs, missing("end"))
	case !req.End.After(req.Start.Time):
		errs = append(errs, unprocessable("invalid_window", "end must be after start").withField("end"))
	}
	if err := firstError(errs...); err != nil {
		s.fail(c, err)
		return
	}
	w, err := s.eng.JoinWaitlist(c.Request.Context(), engine.WaitlistRequest{UserID: actorOf(c).UserID,
		ResourceID: uint64(*req.ResourceID), Start: req.Start.Time, End: req.End.Time, Quantity: quantity})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toWaitlistResponse(w))
}

func (s *server) listWaitlist(c *gin.Context) {
	ws, err := s.eng.ListWaitlist(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ws, "", toWaitlistResponse))
}

func (s *server) leaveWaitlist(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	w, err := s.eng.LeaveWaitlist(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWaitlistResponse(w))
}

// ---- request helpers ----

// pathID reads the numeric :id of the path; anything else names no object (404).
func (s *server) pathID(c *gin.Context) (uint64, bool) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		s.fail(c, errNotFound)
	}
	return id, ok
}

// pathHoldID reads the opaque hold :id of the path.
func (s *server) pathHoldID(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !saneToken(id, 64) {
		s.fail(c, errNotFound)
		return "", false
	}
	return id, true
}

// queryID reads an optional numeric id from the query; 0 when absent.
func (s *server) queryID(c *gin.Context, name string) (uint64, bool) {
	v, present := c.GetQuery(name)
	if !present || v == "" {
		return 0, true
	}
	id, ok := parseID(v)
	if !ok {
		s.fail(c, badRequest("invalid_id", "an id must be decimal digits").withField(name))
	}
	return id, ok
}

// bindEmpty accepts an empty body or an empty JSON object, for POSTs that take no input.
func (s *server) bindEmpty(c *gin.Context) bool {
	if len(bytes.TrimSpace(bodyOf(c))) == 0 {
		return true
	}
	return s.bind(c, &struct{}{})
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// The checkers below return a nil error (not a typed nil) when the value is fine.

func requireName(field string, v *string) error {
	if v == nil {
		return missing(field)
	}
	if n := utf8.RuneCountInString(*v); n == 0 || n > maxNameLen || !utf8.ValidString(*v) {
		return unprocessable("invalid_name", "a name is 1 to 200 characters").withField(field)
	}
	return nil
}

func requireString(field string, v *string, max int) error {
	if v == nil {
		return missing(field)
	}
	if *v == "" || len(*v) > max {
		code := "invalid_" + field // invalid_timezone, invalid_payment_id, invalid_checkin_code
		return unprocessable(code, "the value is empty or too long").withField(field)
	}
	return nil
}

func requireTag(field, code string, v *string) error {
	if v == nil {
		return missing(field)
	}
	if *v == "" {
		return unprocessable(code, "the value is empty").withField(field)
	}
	return optionalTag(field, code, *v)
}

func optionalTag(field, code, v string) error {
	if utf8.RuneCountInString(v) > maxTagLen {
		return unprocessable(code, "the value is longer than 64 characters").withField(field)
	}
	return nil
}

func requireID(field string, v *jsonID) error {
	if v == nil {
		return missing(field)
	}
	return nil
}

func requireInt(field string, v *int, lo, hi int) error {
	if v == nil {
		return missing(field)
	}
	return intInRange(field, *v, lo, hi)
}

func intInRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return outOfRange(field)
	}
	return nil
}

func requireInt64(field string, v *int64, lo, hi int64) error {
	if v == nil {
		return missing(field)
	}
	if *v < lo || *v > hi {
		return outOfRange(field)
	}
	return nil
}

var (
	timeOfDay = regexp.MustCompile(`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`)
	dateRe    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

func checkTimeOfDay(field, v string) error {
	if !timeOfDay.MatchString(v) {
		return unprocessable("invalid_time_of_day", "a time of day is HH:MM from 00:00 to 24:00").withField(field)
	}
	return nil
}

func checkWeekdays(field string, days []int) error {
	if len(days) == 0 {
		return unprocessable("invalid_weekdays", "at least one weekday is needed").withField(field)
	}
	for _, d := range days {
		if d < 1 || d > 7 {
			return unprocessable("invalid_weekdays", "weekdays are 1 (Monday) to 7 (Sunday)").withField(field)
		}
	}
	return nil
}

func validDate(v string) bool {
	if !dateRe.MatchString(v) {
		return false
	}
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

func checkDate(field, v string) error {
	if !validDate(v) {
		return unprocessable("invalid_date", "a date is YYYY-MM-DD").withField(field)
	}
	return nil
}
