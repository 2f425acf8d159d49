package answer

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gin-gonic/gin"
)

// HeaderRequestID is echoed on every answer, and named in every error body.
const HeaderRequestID = "X-Request-Id"

const ctxRequestID = "slotwheel.request_id"

// RequestID takes the client's X-Request-Id when it is sane, else makes one, and puts it on the
// answer before anything else can write.
func RequestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(HeaderRequestID)
		if !SaneToken(id, 128) {
			id = newRequestID()
		}
		c.Set(ctxRequestID, id)
		c.Header(HeaderRequestID, id)
		c.Next()
	}
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RequestIDOf is the request id RequestID gave c.
func RequestIDOf(c *gin.Context) string { return c.GetString(ctxRequestID) }

// SaneToken reports whether s is 1..max characters of letters, digits and "-_.:": the shape of a
// request id, and of the opaque ids (holds, openids) that reach logs and keys.
func SaneToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case ch == '-' || ch == '_' || ch == '.' || ch == ':':
		default:
			return false
		}
	}
	return true
}
