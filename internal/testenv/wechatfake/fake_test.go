package wechatfake_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv/wechatfake"
)

type answer struct {
	OpenID      string `json:"openid"`
	SessionKey  string `json:"session_key"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	ErrCode     int    `json:"errcode"`
	ErrMsg      string `json:"errmsg"`
}

func get(t *testing.T, f *wechatfake.Fake, path string, q url.Values) answer {
	t.Helper()
	resp, err := f.Client().Get(f.URL + path + "?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var a answer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a
}

func post(t *testing.T, f *wechatfake.Fake, token, body string) answer {
	t.Helper()
	resp, err := f.Client().Post(f.URL+"/cgi-bin/message/subscribe/send?access_token="+token, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var a answer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a
}

func TestCode2Session(t *testing.T) {
	t.Parallel()
	f := wechatfake.New(t, "wxapp", "sec")
	f.Code("code-1", "openid-1")
	q := func(code string) url.Values {
		return url.Values{"appid": {"wxapp"}, "secret": {"sec"}, "js_code": {code}, "grant_type": {"authorization_code"}}
	}

	a := get(t, f, "/sns/jscode2session", q("code-1"))
	require.Zero(t, a.ErrCode)
	require.Equal(t, "openid-1", a.OpenID)
	require.NotEmpty(t, a.SessionKey)

	require.Equal(t, 40163, get(t, f, "/sns/jscode2session", q("code-1")).ErrCode) // codes are single-use
	require.Equal(t, 40029, get(t, f, "/sns/jscode2session", q("nope")).ErrCode)
	require.Equal(t, 41008, get(t, f, "/sns/jscode2session", q("")).ErrCode)

	bad := q("code-1")
	bad.Set("secret", "wrong")
	require.Equal(t, 40125, get(t, f, "/sns/jscode2session", bad).ErrCode)
	bad = q("code-1")
	bad.Set("grant_type", "client_credential")
	require.Equal(t, 40002, get(t, f, "/sns/jscode2session", bad).ErrCode)
}

func TestTokenAndSendChecks(t *testing.T) {
	t.Parallel()
	f := wechatfake.New(t, "wxapp", "sec")
	tq := url.Values{"grant_type": {"client_credential"}, "appid": {"wxapp"}, "secret": {"sec"}}

	require.Equal(t, 40013, get(t, f, "/cgi-bin/token", url.Values{"grant_type": {"client_credential"}, "appid": {"x"}, "secret": {"sec"}}).ErrCode)
	require.Zero(t, f.TokenFetches())
	a := get(t, f, "/cgi-bin/token", tq)
	require.Equal(t, "token-1", a.AccessToken)
	require.Equal(t, 7200, a.ExpiresIn)
	require.Equal(t, 1, f.TokenFetches())

	valid := `{"touser":"u","template_id":"t","data":{"thing1":{"value":"课程"}},"lang":"zh_CN"}`
	require.Zero(t, post(t, f, "token-1", valid).ErrCode)
	require.Equal(t, 40001, post(t, f, "token-9", valid).ErrCode)
	require.Equal(t, 41001, post(t, f, "", valid).ErrCode)
	for body, code := range map[string]int{
		`not json`: 47001,
		`{"template_id":"t","data":{"thing1":{"value":"x"}}}`:                                  40003,
		`{"touser":"u","data":{"thing1":{"value":"x"}}}`:                                       40037,
		`{"touser":"u","template_id":"t","data":{}}`:                                           47003,
		`{"touser":"u","template_id":"t","data":{"thing1":{}}}`:                                47003,
		`{"touser":"u","template_id":"t","data":{"thing1":"x"}}`:                               47001,
		`{"touser":"u","template_id":"t","data":{"thing1":{"value":"123456789012345678901"}}}`: 47003,
		`{"touser":"u","template_id":"t","data":{"phrase1":{"value":"OK"}}}`:                   47003,
		`{"touser":"u","template_id":"t","data":{"thing1":{"value":"x"}},"lang":"fr"}`:         47003,
	} {
		require.Equal(t, code, post(t, f, "token-1", body).ErrCode, body)
	}
	require.Len(t, f.Messages(), 1)

	f.Expire()
	require.Equal(t, 42001, post(t, f, "token-1", valid).ErrCode)
	get(t, f, "/cgi-bin/token", tq)
	f.Invalidate()
	require.Equal(t, 40001, post(t, f, "token-2", valid).ErrCode)
}
