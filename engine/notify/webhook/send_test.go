package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

func delivery(url string) webhook.Delivery {
	return webhook.Delivery{
		URL:       url,
		Secret:    webhook.NewSecret(),
		ID:        "evt_123",
		Timestamp: time.Now(),
		Body:      []byte(`{"type":"booking.confirmed"}`),
	}
}

func TestSendOK(t *testing.T) {
	t.Parallel()
	d := delivery("")
	ref, err := standardwebhooks.NewWebhook(d.Secret)
	require.NoError(t, err)
	type seen struct {
		method, contentType, userAgent string
		ourErr, refErr                 error
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{
			method:      r.Method,
			contentType: r.Header.Get("Content-Type"),
			userAgent:   r.Header.Get("User-Agent"),
			ourErr:      webhook.Verify(d.Secret, r.Header, body, time.Now(), time.Minute),
			refErr:      ref.Verify(body, r.Header),
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL + "/hook"

	res := (&webhook.Sender{Client: srv.Client(), UserAgent: "test-agent"}).Send(context.Background(), d)
	require.True(t, res.OK)
	require.NoError(t, res.Err)
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	require.Positive(t, res.Duration)

	s := <-got
	require.Equal(t, http.MethodPost, s.method)
	require.Equal(t, "application/json", s.contentType)
	require.Equal(t, "test-agent", s.userAgent)
	require.NoError(t, s.ourErr)
	require.NoError(t, s.refErr)
}

func TestSendServerError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database is down", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)

	res := (&webhook.Sender{}).Send(context.Background(), delivery(srv.URL))
	require.False(t, res.OK)
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	require.ErrorContains(t, res.Err, "500")
	require.Equal(t, "database is down\n", res.ResponseSnippet)
}

// hangingServer answers nothing until the client hangs up. The handler first reads the body:
// net/http notices a closed connection, and ends the request context, only once the body is read.
// The release channel unblocks it at cleanup anyway, so a broken Sender fails the test instead of
// hanging srv.Close (registered first, so it runs last).
func hangingServer(t *testing.T, before func()) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		before()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

func TestSendTimesOut(t *testing.T) {
	t.Parallel()
	srv := hangingServer(t, func() {})

	res := (&webhook.Sender{Timeout: 200 * time.Millisecond}).Send(context.Background(), delivery(srv.URL))
	require.False(t, res.OK)
	require.Zero(t, res.StatusCode)
	require.ErrorIs(t, res.Err, context.DeadlineExceeded)
	require.ErrorContains(t, res.Err, "timed out after 200ms")
	require.GreaterOrEqual(t, res.Duration, 200*time.Millisecond)
}

func TestSendCallerCancelIsNotCalledATimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv := hangingServer(t, cancel) // the caller gives up while the receiver is working

	res := (&webhook.Sender{}).Send(ctx, delivery(srv.URL))
	require.False(t, res.OK)
	require.ErrorIs(t, res.Err, context.Canceled)
	require.NotContains(t, res.Err.Error(), "timed out")
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	}))
	t.Cleanup(target.Close)
	for _, location := range []string{target.URL + "/elsewhere", "ftp://example.com/x"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, location, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(srv.Close)

		// The caller's client follows redirects; Send must override that, not mutate it.
		client := &http.Client{}
		res := (&webhook.Sender{Client: client}).Send(context.Background(), delivery(srv.URL))
		require.False(t, res.OK, location)
		require.Equal(t, http.StatusTemporaryRedirect, res.StatusCode, location)
		require.ErrorContains(t, res.Err, "307")
		require.Nil(t, client.CheckRedirect)
	}
	require.Zero(t, targetHits.Load())
}

func TestSendCutsHugeResponse(t *testing.T) {
	t.Parallel()
	// The receiver would stream without end; Send must stop reading and return.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("界", 1000)) // 3 bytes a rune: 512 is not a rune boundary
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)

	res := (&webhook.Sender{Timeout: 30 * time.Second}).Send(context.Background(), delivery(srv.URL))
	require.True(t, res.OK)
	require.NoError(t, res.Err)
	require.Equal(t, strings.Repeat("界", 170), res.ResponseSnippet) // 510 bytes, whole runes only
}

// countingBody is an endless response body that counts what is read from it.
type countingBody struct{ n atomic.Int64 }

func (b *countingBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	b.n.Add(int64(len(p)))
	return len(p), nil
}

func (b *countingBody) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSendReadsAtMost64KiB(t *testing.T) {
	t.Parallel()
	body := &countingBody{}
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusBadGateway, Body: body, Header: http.Header{}, Request: r}, nil
	})}
	res := (&webhook.Sender{Client: client}).Send(context.Background(), delivery("https://receiver.example/hook"))
	require.False(t, res.OK)
	require.Equal(t, http.StatusBadGateway, res.StatusCode)
	require.LessOrEqual(t, body.n.Load(), int64(webhook.MaxResponseRead))
	require.Len(t, res.ResponseSnippet, webhook.SnippetLength)
}

func TestSendRejectsBadInput(t *testing.T) {
	t.Parallel()
	var s webhook.Sender
	d := delivery("ftp://example.com/")
	require.ErrorContains(t, s.Send(context.Background(), d).Err, "scheme")
	d = delivery("https://user:pw@example.com/")
	require.ErrorContains(t, s.Send(context.Background(), d).Err, "password")
	d = delivery("https://example.com/")
	d.Secret = "whsec_!!"
	require.ErrorIs(t, s.Send(context.Background(), d).Err, webhook.ErrBadSecret)
}

func TestSendErrorHidesURLQuery(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens any more: the dial fails
	res := (&webhook.Sender{}).Send(context.Background(), delivery(srv.URL+"/hook?token=receiver-secret"))
	require.False(t, res.OK)
	require.Error(t, res.Err)
	require.NotContains(t, res.Err.Error(), "receiver-secret")
}
