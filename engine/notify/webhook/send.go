package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// DefaultTimeout is how long a receiver has to answer one delivery (docs/API.md).
	DefaultTimeout = 10 * time.Second
	// DefaultUserAgent identifies our deliveries in receivers' logs.
	DefaultUserAgent = "slotwheel-webhooks/1"
	// MaxResponseRead is the most of a response body Send reads. Reading a small body to the end
	// lets the connection be reused; the cap stops a hostile or broken receiver from making us
	// read without end.
	MaxResponseRead = 64 << 10
	// SnippetLength is how much of the response body Result keeps, enough to show a receiver's
	// error message in the delivery log.
	SnippetLength = 512
)

// Delivery is one signed POST of an event to an endpoint.
type Delivery struct {
	URL    string
	Secret string // the endpoint secret, "whsec_..."
	ID     string // the event id, sent as webhook-id; receivers use it to drop duplicates
	// Timestamp is the signing time, sent as webhook-timestamp. Each attempt should carry a fresh
	// one, since receivers reject stale timestamps.
	Timestamp time.Time
	Body      []byte // JSON
}

// Result is the outcome of one delivery attempt.
type Result struct {
	StatusCode      int           // 0 when no response arrived
	Err             error         // nil exactly when OK
	Duration        time.Duration // from the start of the attempt to reading the response
	ResponseSnippet string        // the first SnippetLength bytes of the response body, valid UTF-8
	OK              bool          // the receiver answered 2xx and so acknowledged the event
}

// Sender delivers webhooks. The zero value is ready to use; a Sender is safe for concurrent use.
type Sender struct {
	// Client carries the requests; nil means a client on http.DefaultTransport. Its CheckRedirect
	// is overridden: Send never follows redirects.
	Client *http.Client
	// Timeout bounds each delivery, response body included; zero means DefaultTimeout.
	Timeout time.Duration
	// UserAgent is sent as User-Agent; empty means DefaultUserAgent.
	UserAgent string
}

// errTimeout is the cause of a delivery context ended by Sender.Timeout, telling it apart from a
// deadline or cancellation of the caller's context.
var errTimeout = errors.New("webhook: delivery timeout")

// noRedirect makes the client hand back the 3xx response itself instead of following it.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Send makes one delivery attempt and reports its outcome; it never retries. A 3xx answer is a
// failure like any other non-2xx: following it could carry the signed event to a host or scheme the
// endpoint owner never registered.
func (s *Sender) Send(ctx context.Context, d Delivery) Result {
	if err := ValidURL(d.URL); err != nil {
		return Result{Err: err}
	}
	sig, err := Sign(d.Secret, d.ID, d.Timestamp, d.Body)
	if err != nil {
		return Result{Err: err}
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The clock starts with the deadline, so a timed-out Result reports at least Timeout.
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return Result{Err: fmt.Errorf("webhook: building request: %w", err)}
	}
	ua := s.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", ua)
	req.Header.Set(HeaderID, d.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(d.Timestamp.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)

	// A shallow copy shares the caller's transport and its connection pool; only the redirect
	// policy differs.
	var client http.Client
	if s.Client != nil {
		client = *s.Client
	}
	client.CheckRedirect = noRedirect

	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: describe(ctx, req.URL, timeout, err), Duration: time.Since(start)}
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	res := Result{
		StatusCode:      resp.StatusCode,
		Duration:        time.Since(start),
		ResponseSnippet: snippet(body),
		OK:              resp.StatusCode >= 200 && resp.StatusCode <= 299,
	}
	// A 2xx status line is the acknowledgement; a body cut short afterwards does not undo it.
	if !res.OK {
		res.Err = fmt.Errorf("webhook: %s answered %d %s", req.URL.Host, resp.StatusCode, http.StatusText(resp.StatusCode))
		if readErr != nil {
			res.Err = fmt.Errorf("%w (reading body: %w)", res.Err, describe(ctx, req.URL, timeout, readErr))
		}
	}
	return res
}

// describe turns a transport error into one that names the host but not the full URL, whose query
// may hold the receiver's own tokens and would end up in delivery logs, and that says when the
// per-delivery timeout, rather than the caller, ended the attempt.
func describe(ctx context.Context, u *url.URL, timeout time.Duration, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if context.Cause(ctx) == errTimeout {
		// The transport reports the cause; callers test for the standard deadline error.
		return fmt.Errorf("webhook: POST to %s timed out after %s: %w", u.Host, timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("webhook: POST to %s: %w", u.Host, err)
}

// snippet keeps the first SnippetLength bytes, cut back to a rune boundary and with invalid UTF-8
// dropped, so it can be stored in a text column and shown as is.
func snippet(b []byte) string {
	if len(b) > SnippetLength {
		n := SnippetLength
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "")
}
