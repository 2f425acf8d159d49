package fleet

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// httpClient is the fleet's HTTP client. It keeps at most maxConnsPerInstance connections to an
// instance, as a load balancer's pool would: a race of ten thousand requests is in flight all at
// once, and they share those connections instead of ten thousand dials overflowing the listen
// backlog of a small machine (dial timeouts, resets) before any request is read. No redirects are
// followed.
type httpClient struct {
	c  *http.Client
	tr *http.Transport
}

const maxConnsPerInstance = 512

func newHTTPClient() *httpClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     maxConnsPerInstance,
		MaxIdleConns:        4 * maxConnsPerInstance,
		MaxIdleConnsPerHost: maxConnsPerInstance,
		IdleConnTimeout:     30 * time.Second,
	}
	return &httpClient{tr: tr, c: &http.Client{Transport: tr, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (h *httpClient) close() { h.tr.CloseIdleConnections() }

// Token is a Bearer token for user in role (venueID for staff), signed with the instances' secret as
// docs/API.md's claims say, without a round trip: a race of ten thousand users needs ten thousand.
func (f *Fleet) Token(user, role, venueID string) string {
	now := time.Now()
	claims := jwt.MapClaims{"sub": user, "role": role, "iat": now.Unix(), "exp": now.Add(2 * time.Hour).Unix()}
	if venueID != "" {
		claims["venue_id"] = venueID
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(f.jwt))
	if err != nil {
		panic(err) // HS256 with a []byte key cannot fail
	}
	return tok
}

// Client speaks an instance's REST API.
type Client struct {
	f    *Fleet
	in   *Instance
	base string
}

// APIError is a non-2xx answer.
type APIError struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Do sends method path with body as JSON (nil: none) and token (empty: none). A 2xx answer is
// decoded into out (nil: dropped); any other answer is an *APIError; a failure to get an answer at
// all (a killed instance) is returned as it is — whether the request took effect is then unknown.
func (c *Client) Do(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.send(req, out)
}

func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.f.http.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error struct {
				Code    string         `json:"code"`
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Details: e.Error.Details}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode %q: %w", req.Method, req.URL.Path, raw, err)
	}
	return nil
}

// DevLogin asks the instance for a token (POST /api/v1/auth/dev-login).
func (c *Client) DevLogin(ctx context.Context, user, role, venueID string) (string, error) {
	body := map[string]any{"user_id": user, "role": role}
	if venueID != "" {
		body["venue_id"] = venueID
	}
	var out struct {
		Token string `json:"token"`
	}
	err := c.Do(ctx, http.MethodPost, "/api/v1/auth/dev-login", "", body, &out)
	return out.Token, err
}

// Venue is a venue as the API shows it.
type Venue struct {
	ID       string `json:"venue_id"`
	Name     string `json:"name"`
	Timezone string `json:"timezone"`
}

// CreateVenue creates a venue.
func (c *Client) CreateVenue(ctx context.Context, admin, name, timezone string) (Venue, error) {
	var v Venue
	err := c.Do(ctx, http.MethodPost, "/api/v1/admin/venues", admin, map[string]any{"name": name, "timezone": timezone}, &v)
	return v, err
}

// Resource is a resource as the API shows it.
type Resource struct {
	ID         string `json:"resource_id"`
	VenueID    string `json:"venue_id"`
	Name       string `json:"name"`
	Capacity   int    `json:"capacity"`
	Category   string `json:"category"`
	PriceCents int64  `json:"price_cents"`
}

// CreateResource creates a resource of kind court.
func (c *Client) CreateResource(ctx context.Context, admin string, r Resource) (Resource, error) {
	var out Resource
	err := c.Do(ctx, http.MethodPost, "/api/v1/admin/resources", admin, map[string]any{"venue_id": r.VenueID, "name": r.Name,
		"kind": "court", "capacity": r.Capacity, "category": r.Category, "price_cents": r.PriceCents}, &out)
	return out, err
}

// OpenAllDay gives a resource slots of slotMinutes around the clock, every day, horizonDays ahead.
func (c *Client) OpenAllDay(ctx context.Context, admin, resourceID string, slotMinutes, horizonDays int) error {
	return c.Do(ctx, http.MethodPut, "/api/v1/admin/resources/"+resourceID+"/schedule", admin, map[string]any{
		"slot_minutes": slotMinutes, "horizon_days": horizonDays,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}}, nil)
}

// SetGrace sets the grace of a resource category.
func (c *Client) SetGrace(ctx context.Context, admin, category string, seconds int) error {
	return c.Do(ctx, http.MethodPut, "/api/v1/admin/policies/grace", admin,
		map[string]any{"category": category, "grace_seconds": seconds}, nil)
}

// Hold holds quantity units (0: one) of a resource's window for the token's user.
func (c *Client) Hold(ctx context.Context, token, resourceID string, start, end time.Time, quantity int) (wire.Hold, error) {
	body := map[string]any{"resource_id": resourceID, "start": start.Format(time.RFC3339), "end": end.Format(time.RFC3339)}
	if quantity > 0 {
		body["quantity"] = quantity
	}
	b, err := json.Marshal(body)
	if err != nil {
		return wire.Hold{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/v1/holds", bytes.NewReader(b))
	if err != nil {
		return wire.Hold{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	// As a mini-program should: a repeat of the request is then answered as the first. It also lets
	// the HTTP client send it again on another connection when the one it picked was being closed.
	req.Header.Set("Idempotency-Key", testenv.Unique("hold-"))
	var h wire.Hold
	err = c.send(req, &h)
	return h, err
}

// Slot is one slot of an availability answer.
type Slot struct {
	Start     string `json:"start"`
	End       string `json:"end"`
	Available bool   `json:"available"`
	Remaining int    `json:"remaining"`
	Reason    string `json:"reason"`
}

// SlotAt reads the availability of the resource's slot that starts at start (in the venue's zone).
func (c *Client) SlotAt(ctx context.Context, resourceID string, start time.Time) (Slot, error) {
	var out struct {
		Slots []Slot `json:"slots"`
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/availability?resource_id="+resourceID+"&date="+start.Format("2006-01-02"), "", nil, &out); err != nil {
		return Slot{}, err
	}
	for _, s := range out.Slots {
		if at, err := time.Parse(time.RFC3339, s.Start); err == nil && at.Equal(start) {
			return s, nil
		}
	}
	return Slot{}, fmt.Errorf("no slot of resource %s starts at %s", resourceID, start.Format(time.RFC3339))
}

// Payment is the answer to a payment notification.
type Payment struct {
	Outcome   string        `json:"outcome"` // booked or refund
	PaymentID string        `json:"payment_id"`
	HoldID    string        `json:"hold_id"`
	Booking   *wire.Booking `json:"booking"`
}

// Pay sends the signed payment notification of a hold's amount, as the payment provider would; a
// booked answer is remembered for Audit.
func (c *Client) Pay(ctx context.Context, h wire.Hold, paymentID string) (Payment, error) {
	body, err := json.Marshal(map[string]any{"hold_id": h.HoldID, "payment_id": paymentID, "amount_cents": h.AmountCents,
		"paid_at": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return Payment{}, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(c.f.pay))
	mac.Write([]byte(ts + "." + string(body)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/v1/payments/notify", bytes.NewReader(body))
	if err != nil {
		return Payment{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slotwheel-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	var p Payment
	if err := c.send(req, &p); err != nil {
		return p, err
	}
	if p.Booking != nil && p.Outcome == "booked" {
		c.f.recordConfirmed(Confirmed{BookingID: p.Booking.BookingID, HoldID: p.Booking.HoldID, Via: c.in.Name})
	}
	return p, nil
}

// Confirm confirms a hold with the dev payment route (SLOTWHEEL_DEV_PAYMENTS); the booking is
// remembered for Audit.
func (c *Client) Confirm(ctx context.Context, token, holdID string) (wire.Booking, error) {
	var b wire.Booking
	if err := c.Do(ctx, http.MethodPost, "/api/v1/holds/"+holdID+"/confirm", token, map[string]any{}, &b); err != nil {
		return b, err
	}
	c.f.recordConfirmed(Confirmed{BookingID: b.BookingID, HoldID: b.HoldID, Via: c.in.Name})
	return b, nil
}

// CheckIn checks a booking in by its code, as staff.
func (c *Client) CheckIn(ctx context.Context, staff, code string) (wire.Booking, error) {
	var b wire.Booking
	err := c.Do(ctx, http.MethodPost, "/api/v1/checkins", staff, map[string]any{"checkin_code": code}, &b)
	return b, err
}

// Booking reads a booking.
func (c *Client) Booking(ctx context.Context, token, id string) (wire.Booking, error) {
	var b wire.Booking
	err := c.Do(ctx, http.MethodGet, "/api/v1/bookings/"+id, token, nil, &b)
	return b, err
}

// CourtSpec describes a court for a test.
type CourtSpec struct {
	Capacity     int           // units per slot; default 1
	GraceSeconds int           // grace after start before a no-show is released; 0: the deployment's default
	PriceCents   int64         // per slot; default 100
	MinLeft      time.Duration // the current slot lasts at least this much longer; default 10m, at most 30m
}

// Court is a venue with one resource in hourly slots open around the clock, and the slot in
// progress now: a booking of it is released at confirmed_at + grace.
type Court struct {
	Admin      string // an admin token
	Venue      Venue
	Resource   Resource
	Start, End time.Time // the slot in progress, in the venue's zone
}

// NewCourt creates a court (its own venue and grace category) whose slot in progress has at least
// spec.MinLeft to run: the venue is in Shanghai (slots on the UTC hour) or, when less is left of
// that hour, in Kolkata (slots on the UTC half hour).
func (c *Client) NewCourt(ctx context.Context, spec CourtSpec) (Court, error) {
	spec = spec.withDefaults()
	tz := "Asia/Shanghai"
	now := time.Now()
	if now.Truncate(time.Hour).Add(time.Hour).Sub(now) < spec.MinLeft {
		tz = "Asia/Kolkata"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Court{}, err
	}
	local := now.In(loc)
	start := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), 0, 0, 0, loc)
	ct := Court{Admin: c.f.Token("fleet-admin", "admin", ""), Start: start, End: start.Add(time.Hour)}
	if ct.Venue, err = c.CreateVenue(ctx, ct.Admin, "Fleet courts", tz); err != nil {
		return ct, fmt.Errorf("create venue: %w", err)
	}
	return ct, c.addCourt(ctx, &ct, spec)
}

// NewCourtsAt creates a court per spec in the venue of at, whose slot in progress they share (spec's
// MinLeft is at's): holds of every one of them live under the venue's hash tag, on one master of a
// cluster. Each has a grace category of its own.
func (c *Client) NewCourtsAt(ctx context.Context, at Court, specs ...CourtSpec) ([]Court, error) {
	out := make([]Court, len(specs))
	for i, spec := range specs {
		out[i] = Court{Admin: at.Admin, Venue: at.Venue, Start: at.Start, End: at.End}
		if err := c.addCourt(ctx, &out[i], spec.withDefaults()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (spec CourtSpec) withDefaults() CourtSpec {
	if spec.Capacity <= 0 {
		spec.Capacity = 1
	}
	if spec.PriceCents <= 0 {
		spec.PriceCents = 100
	}
	if spec.MinLeft <= 0 {
		spec.MinLeft = 10 * time.Minute
	}
	return spec
}

// addCourt creates ct's resource in ct's venue, with its grace category and hourly slots. Every
// instance decides with them as soon as they are answered (docs/API.md, "Admin changes are in
// force everywhere once answered").
func (c *Client) addCourt(ctx context.Context, ct *Court, spec CourtSpec) error {
	category := testenv.Unique("cat")
	if spec.GraceSeconds > 0 {
		if err := c.SetGrace(ctx, ct.Admin, category, spec.GraceSeconds); err != nil {
			return fmt.Errorf("grace: %w", err)
		}
	}
	var err error
	if ct.Resource, err = c.CreateResource(ctx, ct.Admin, Resource{VenueID: ct.Venue.ID, Name: "Court", Capacity: spec.Capacity,
		Category: category, PriceCents: spec.PriceCents}); err != nil {
		return fmt.Errorf("create resource: %w", err)
	}
	if err := c.OpenAllDay(ctx, ct.Admin, ct.Resource.ID, 60, 2); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	return nil
}
