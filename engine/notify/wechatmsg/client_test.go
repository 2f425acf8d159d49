package wechatmsg_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatfake"
)

const (
	appID  = "wx0123456789abcdef"
	secret = "s3cr3t-app-secret-value"
)

// clock is a settable time source for Client.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T) (*wechatfake.Fake, *wechatmsg.Client, *clock) {
	t.Helper()
	fake := wechatfake.New(t, appID, secret)
	clk := &clock{t: time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)}
	c := &wechatmsg.Client{AppID: appID, Secret: secret, APIBase: fake.URL, HTTP: fake.Client(), Now: clk.Now}
	return fake, c, clk
}

func msg(openid string) wechatmsg.Message {
	return wechatmsg.Message{
		ToUser:     openid,
		TemplateID: "tpl-booking-confirmed",
		Page:       "pages/booking/detail?id=42",
		Data: map[string]string{
			"thing1":            "瑜伽小班课",
			"time2":             "2025年6月1日 10:00~11:00",
			"character_string3": "BK20250601-0042",
			"name4":             "王小明",
		},
		MiniprogramState: "trial",
	}
}

func TestSendAndTokenCached(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	ctx := context.Background()
	for range 5 {
		require.NoError(t, c.Send(ctx, msg("openid-a")))
	}
	require.Equal(t, 1, fake.TokenFetches())
	require.Equal(t, 5, fake.Sends())

	got := fake.Messages()
	require.Len(t, got, 5)
	require.Equal(t, wechatfake.Message{
		ToUser:           "openid-a",
		TemplateID:       "tpl-booking-confirmed",
		Page:             "pages/booking/detail?id=42",
		MiniprogramState: "trial",
		Lang:             "zh_CN",
		Data:             msg("").Data,
	}, got[0])
}

func TestTokenRefetchedAfterExpiresIn(t *testing.T) {
	t.Parallel()
	fake, c, clk := setup(t)
	ctx := context.Background()
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 1, fake.TokenFetches())

	// 7200 s less the 5 min margin: still cached one second before, refetched at the limit.
	clk.Add(6899 * time.Second)
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 1, fake.TokenFetches())
	clk.Add(time.Second)
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 2, fake.TokenFetches())

	// A short-lived token is kept for half its life rather than the (negative) ttl - margin.
	fake.SetExpiresIn(60)
	clk.Add(6900 * time.Second)
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 3, fake.TokenFetches())
	clk.Add(29 * time.Second)
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 3, fake.TokenFetches())
	clk.Add(time.Second)
	require.NoError(t, c.Send(ctx, msg("u")))
	require.Equal(t, 4, fake.TokenFetches())
}

func TestTokenRefreshedOnceWhenRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(*wechatfake.Fake)
	}{
		{"40001 invalid credential", (*wechatfake.Fake).Invalidate},
		{"42001 expired", (*wechatfake.Fake).Expire},
		{"40014 invalid token", func(f *wechatfake.Fake) { f.RejectNextSend(40014, "invalid access_token") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, c, _ := setup(t)
			ctx := context.Background()
			require.NoError(t, c.Send(ctx, msg("u")))
			tc.spoil(fake)
			require.NoError(t, c.Send(ctx, msg("u")))
			require.Equal(t, 2, fake.TokenFetches())
			require.Equal(t, 3, fake.Sends()) // first send, rejected attempt, retry
			require.Len(t, fake.Messages(), 2)
			// The new token is cached in turn.
			require.NoError(t, c.Send(ctx, msg("u")))
			require.Equal(t, 2, fake.TokenFetches())
		})
	}
}

func TestTokenRejectedTwiceIsNotRetriedAgain(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	fake.RejectNextSend(40001, "invalid credential")
	fake.RejectNextSend(40001, "invalid credential")
	fake.RejectNextSend(40001, "invalid credential")
	err := c.Send(context.Background(), msg("u"))
	var apiErr *wechatmsg.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 40001, apiErr.Code)
	require.False(t, wechatmsg.Permanent(err))
	require.Equal(t, 2, fake.Sends())
	require.Equal(t, 2, fake.TokenFetches())
}

func TestNotSubscribedIsPermanentAndNotRetried(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	fake.Unsubscribe("gone")
	err := c.Send(context.Background(), msg("gone"))
	require.ErrorIs(t, err, wechatmsg.ErrNotSubscribed)
	require.NotErrorIs(t, err, wechatmsg.ErrRejected)
	require.True(t, wechatmsg.Permanent(err))
	require.Equal(t, 1, fake.Sends())
	require.Empty(t, fake.Messages())

	require.NoError(t, c.Send(context.Background(), msg("still-here")))
}

func TestRejectedIsPermanent(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	ctx := context.Background()

	// The fake checks values itself: an amount is passed through unchanged and this one is bad.
	m := msg("u")
	m.Data["amount5"] = "about ten yuan"
	err := c.Send(ctx, m)
	require.ErrorIs(t, err, wechatmsg.ErrRejected)
	require.True(t, wechatmsg.Permanent(err))
	var apiErr *wechatmsg.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 47003, apiErr.Code)
	require.Contains(t, apiErr.Msg, "amount5")
	require.Equal(t, 1, fake.Sends())

	for _, code := range []int{40003, 40037, 41030} {
		fake.RejectNextSend(code, "rejected")
		err := c.Send(ctx, msg("u"))
		require.ErrorIs(t, err, wechatmsg.ErrRejected, code)
		require.True(t, wechatmsg.Permanent(err), code)
	}
}

func TestRejectedLocally(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	ctx := context.Background()
	for name, m := range map[string]wechatmsg.Message{
		"no openid":   {TemplateID: "t", Data: map[string]string{"thing1": "x"}},
		"no template": {ToUser: "u", Data: map[string]string{"thing1": "x"}},
		"no data":     {ToUser: "u", TemplateID: "t"},
		"empty value": {ToUser: "u", TemplateID: "t", Data: map[string]string{"thing1": "  "}},
		"nothing fit": {ToUser: "u", TemplateID: "t", Data: map[string]string{"phrase1": "ok"}},
	} {
		err := c.Send(ctx, m)
		require.ErrorIs(t, err, wechatmsg.ErrRejected, name)
		require.True(t, wechatmsg.Permanent(err), name)
	}
	require.Zero(t, fake.Sends())
}

func TestTransientFailuresAreRetryable(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	ctx := context.Background()

	fake.FailNextSend(http.StatusInternalServerError)
	err := c.Send(ctx, msg("u"))
	require.ErrorContains(t, err, "HTTP 500")
	require.False(t, wechatmsg.Permanent(err))

	for _, code := range []int{-1, 45009} { // system busy, rate limit
		fake.RejectNextSend(code, "busy")
		err := c.Send(ctx, msg("u"))
		var apiErr *wechatmsg.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, code, apiErr.Code)
		require.False(t, wechatmsg.Permanent(err))
	}
	require.Equal(t, 3, fake.Sends()) // none of them retried inside Send

	require.NoError(t, c.Send(ctx, msg("u")))
	require.Len(t, fake.Messages(), 1)
}

func TestSendFitsValues(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	m := msg("u")
	m.Data["thing1"] = strings.Repeat("预约", 15)
	m.Data["phrase6"] = "已确认的"
	require.NoError(t, c.Send(context.Background(), m))
	got := fake.Messages()[0].Data
	require.Equal(t, strings.Repeat("预约", 10), got["thing1"])
	require.Equal(t, "已确认的", got["phrase6"])
}

func TestSecretNeverInErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Wrong secret: WeChat's own error, which is not about the message.
	fake := wechatfake.New(t, appID, secret)
	c := &wechatmsg.Client{AppID: appID, Secret: "wrong-" + secret, APIBase: fake.URL, HTTP: fake.Client()}
	err := c.Send(ctx, msg("u"))
	var apiErr *wechatmsg.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 40125, apiErr.Code)
	require.False(t, wechatmsg.Permanent(err))
	require.NotContains(t, err.Error(), secret)

	// Network failure: net/http's error would print the whole URL, secret included.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	c = &wechatmsg.Client{AppID: appID, Secret: secret, APIBase: dead.URL}
	err = c.Send(ctx, msg("u"))
	require.Error(t, err)
	require.False(t, wechatmsg.Permanent(err))
	require.NotContains(t, err.Error(), secret)
	require.Contains(t, err.Error(), "/cgi-bin/token")
}

// gate holds token requests until released, so that concurrent callers pile up behind one fetch.
type gate struct {
	next     http.RoundTripper
	arrived  chan struct{} // receives once per token request
	released chan struct{}
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/cgi-bin/token" {
		g.arrived <- struct{}{}
		<-g.released
	}
	return g.next.RoundTrip(r)
}

func gated(t *testing.T) (*wechatfake.Fake, *wechatmsg.Client, *gate) {
	fake := wechatfake.New(t, appID, secret)
	g := &gate{next: fake.Client().Transport, arrived: make(chan struct{}, 100), released: make(chan struct{})}
	c := &wechatmsg.Client{AppID: appID, Secret: secret, APIBase: fake.URL, HTTP: &http.Client{Transport: g}}
	return fake, c, g
}

func TestConcurrentSendsShareOneTokenFetch(t *testing.T) {
	t.Parallel()
	fake, c, g := gated(t)
	const n = 32
	var ready, done sync.WaitGroup
	ready.Add(n)
	errs := make(chan error, n)
	for i := range n {
		done.Go(func() {
			ready.Done()
			errs <- c.Send(context.Background(), msg("u"+strings.Repeat("x", i)))
		})
	}
	ready.Wait()
	<-g.arrived // the one fetch is under way and held; the others queue behind it
	close(g.released)
	done.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, fake.TokenFetches())
	require.Len(t, fake.Messages(), n)
}

func TestCallerGivingUpDoesNotFailTheSharedFetch(t *testing.T) {
	t.Parallel()
	fake, c, g := gated(t)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- c.Send(ctx, msg("impatient")) }()
	<-g.arrived // the first caller started the fetch

	second := make(chan error, 1)
	go func() { second <- c.Send(context.Background(), msg("patient")) }()
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	close(g.released)
	require.NoError(t, <-second)
	require.Equal(t, 1, fake.TokenFetches())
	require.Len(t, fake.Messages(), 1)
}

func TestAPIErrorMatchesOnlySendCodes(t *testing.T) {
	t.Parallel()
	e := &wechatmsg.APIError{Op: "/cgi-bin/token", Code: 40003, Msg: "x"}
	require.False(t, errors.Is(e, wechatmsg.ErrRejected))
	e = &wechatmsg.APIError{Op: "/cgi-bin/message/subscribe/send", Code: 40003, Msg: "x"}
	require.True(t, errors.Is(e, wechatmsg.ErrRejected))
	require.False(t, wechatmsg.Permanent(context.DeadlineExceeded))
	require.False(t, wechatmsg.Permanent(nil))
}
