package webhook_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

func TestValidURL(t *testing.T) {
	t.Parallel()
	long := "https://example.com/" + strings.Repeat("a", 2048)
	for _, tc := range []struct {
		raw  string
		want string // substring of the error; "" means valid
	}{
		{"https://example.com/hooks/slotwheel", ""},
		{"http://127.0.0.1:8080/hook?tenant=7", ""},
		{"https://[::1]:8443/x", ""},
		{"HTTPS://Example.COM/x", ""},
		{"https://例子.测试/回调", ""},
		{"https://example.com/" + strings.Repeat("a", 2048-len("https://example.com/")), ""},
		{"", "empty"},
		{long, "limit is 2048"},
		{" https://example.com", "spaces"},
		{"https://example.com/\n", "spaces"},
		{"ftp://example.com/x", `scheme "ftp" is not allowed`},
		{"javascript:alert(1)", `scheme "javascript" is not allowed`},
		{"file:///etc/passwd", `scheme "file" is not allowed`},
		{"//example.com/x", "absolute"},
		{"/hooks", "absolute"},
		{"example.com/hook", "absolute"},
		{"https:example.com", "two slashes"},
		{"https://user:pass@example.com/", "user name or password"},
		{"https://user@example.com/", "user name or password"},
		{"https://example.com/#frag", "fragment"},
		{"https://example.com/#", "fragment"},
		{"https:///path", "no host"},
		{"https://:443/path", "no host"},
		{"https://exa mple.com/", "cannot be parsed"},
		{"https://example.com:port/", "cannot be parsed"},
		{"https://example.com/\x00", "cannot be parsed"},
	} {
		err := webhook.ValidURL(tc.raw)
		if tc.want == "" {
			require.NoError(t, err, "%q", tc.raw)
			continue
		}
		require.Error(t, err, "%q", tc.raw)
		require.Contains(t, err.Error(), tc.want, "%q", tc.raw)
	}
}
