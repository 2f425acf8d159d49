package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// fakeWechat plays code2Session: code "good" is user o-good, "bad" is refused with an errcode,
// "nobody" answers without an openid, "broken" fails with a 500, "gateway" with a 502 and a JSON
// body, "html" answers 200 with a page that is not JSON.
func fakeWechat(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/sns/jscode2session" || q.Get("appid") != "wx-app" || q.Get("secret") != "wx-secret" ||
			q.Get("grant_type") != "authorization_code" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(`{"errcode":40013,"errmsg":"invalid appid"}`))
			return
		}
		// WeChat answers JSON with a text/plain content type.
		w.Header().Set("Content-Type", "text/plain")
		switch q.Get("js_code") {
		case "good":
			_, _ = w.Write([]byte(`{"openid":"o-good","session_key":"sk","unionid":"u1"}`))
		case "nobody":
			_, _ = w.Write([]byte(`{"session_key":"sk"}`))
		case "broken":
			w.WriteHeader(http.StatusInternalServerError)
		case "gateway":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"openid":"o-good"}`))
		case "html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html><body>maintenance</body></html>`))
		default:
			_, _ = w.Write([]byte(`{"errcode":40029,"errmsg":"invalid code"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWechatLogin(t *testing.T) {
	t.Parallel()
	wx := fakeWechat(t)
	hs := newHarness(t, withOptions(func(o *Options) {
		o.WechatAppID, o.WechatSecret, o.WechatAPIBase = "wx-app", "wx-secret", wx.URL
	}))

	var tok tokenResponse
	hs.do(http.MethodPost, "/api/v1/auth/wechat", "", set{"code": "good"}).expect(t, http.StatusOK).decode(t, &tok)
	a, err := hs.h.tokens.Parse(tok.Token)
	require.NoError(t, err)
	require.Equal(t, "wx:o-good", a.UserID)
	require.Equal(t, "user", a.Role)
	hs.do(http.MethodGet, "/api/v1/holds", tok.Token, nil).expect(t, http.StatusOK)

	for code, want := range map[string]struct {
		status int
		code   string
	}{
		"bad":    {http.StatusUnauthorized, "wechat_login_failed"},
		"nobody": {http.StatusUnauthorized, "wechat_login_failed"},
		// A failed exchange is 401 whatever failed; the code tells WeChat being down apart.
		"broken":  {http.StatusUnauthorized, "wechat_unavailable"},
		"gateway": {http.StatusUnauthorized, "wechat_unavailable"},
		"html":    {http.StatusUnauthorized, "wechat_unavailable"},
	} {
		r := hs.do(http.MethodPost, "/api/v1/auth/wechat", "", set{"code": code})
		require.Equal(t, want.status, r.Status, "%s: %s", code, r.Body)
		require.Equal(t, want.code, r.errorCode(), code)
		require.Empty(t, r.Header.Get("Retry-After"), code)
	}

	// WeChat unreachable.
	down := newHarness(t, withOptions(func(o *Options) {
		o.WechatAppID, o.WechatSecret, o.WechatAPIBase = "wx-app", "wx-secret", "http://127.0.0.1:1"
	}))
	r := down.do(http.MethodPost, "/api/v1/auth/wechat", "", set{"code": "good"}).expect(t, http.StatusUnauthorized)
	require.Equal(t, "wechat_unavailable", r.errorCode())
	var zh answer.Body
	down.do(http.MethodPost, "/api/v1/auth/wechat", "", set{"code": "good"}, header{"Accept-Language", "zh-CN"}).
		expect(t, http.StatusUnauthorized).decode(t, &zh)
	require.Equal(t, "wechat_unavailable", zh.Error.Code)
	require.Regexp(t, `\p{Han}`, zh.Error.Message)
}

func TestWechatNotConfigured(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	r := hs.do(http.MethodPost, "/api/v1/auth/wechat", "", set{"code": "good"}).expect(t, http.StatusNotImplemented)
	require.Equal(t, "wechat_not_configured", r.errorCode())
}
