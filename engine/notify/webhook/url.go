package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// MaxURLLength bounds endpoint URLs; longer ones are almost always pasted by mistake and some
// proxies refuse them anyway.
const MaxURLLength = 2048

// ValidURL reports, with a message fit to show the user who registers the endpoint, why raw cannot
// be a webhook endpoint. It accepts only absolute http or https URLs with a host, without userinfo
// (credentials belong in the signing secret, not in a URL that ends up in logs) and without a
// fragment (it is never sent, so it would only mislead). It does not resolve the host: blocking
// private addresses is the job of the dialer, which sees the address actually used.
func ValidURL(raw string) error {
	switch {
	case raw == "":
		return errors.New("webhook URL is empty")
	case len(raw) > MaxURLLength:
		return fmt.Errorf("webhook URL is %d characters long; the limit is %d", len(raw), MaxURLLength)
	case strings.TrimSpace(raw) != raw:
		return errors.New("webhook URL must not start or end with spaces")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the wrapper repeats the whole URL
		}
		return fmt.Errorf("webhook URL cannot be parsed: %v", err)
	}
	switch {
	case u.Scheme == "":
		return errors.New("webhook URL must be absolute, starting with https:// or http://")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("webhook URL scheme %q is not allowed; use https or http", u.Scheme)
	case u.Opaque != "":
		return errors.New("webhook URL must start with https:// or http:// (two slashes)")
	case u.User != nil:
		return errors.New("webhook URL must not contain a user name or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("webhook URL must not contain a #fragment")
	case u.Hostname() == "":
		return errors.New("webhook URL has no host")
	}
	return nil
}
